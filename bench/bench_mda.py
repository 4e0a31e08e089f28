"""How often MDA (scamper tracelb) misses an ECMP branch on the namespace testbed, and whether
testbeds hash flows independently (needs root and scamper; about 2.5 min with the defaults).

The testbed is the one of ``tests/integration/test_wan.py``'s MDA campaign: sa-1 reaches sb-1
through a 2-way ECMP diamond and sc-1 through a 3-way one. On each of ``--testbeds`` fresh
testbeds:

* **the hash**: TTL-limited UDP probes (``cloudbench.providers.netns.flows``) of fixed flows
  read which branch each flow is hashed to: 60 flows of one source port (how many take the
  same branch in two testbeds: all of them with one key per boot, about a third with
  independent keys), and ``--sports`` source ports × scamper's first 15 flow IDs
  (destination ports 33435…), on which scamper's 99 % stopping rule is applied (stop at 8
  flows that all went one way, at 15 when they went two ways): the share of source ports
  for which MDA would miss a branch, per testbed and jointly in every testbed, against the
  value under uniform hashing;
* **scamper itself**: ``--rounds`` × ``--concurrency`` tracelb runs from sa-1 (the traceroute
  worker's command line, 99 %, each process its own pid and so its own source port) to
  sb-1 and sc-1: traces that miss a branch (raw output kept under ``--keep``), anonymous
  hops (``*``: probes no router answered), and the routers' ICMP rate-limit counters.

``--unseeded`` writes the kernel's default hash key (0) back into every router after
provisioning, i.e. how testbeds were built before each router drew its own key.

Usage: .venv/bin/python bench/bench_mda.py [--testbeds 3] [--rounds 2] [--concurrency 10]
       [--sports 400] [--unseeded] [--keep DIR (default: /tmp/cloudbench-mda-misses)]
Prints a table and one JSON line; exits 1 when a per-trace miss rate's 95 % interval lies
above MDA's 1 % or when two testbeds split all 60 fixed flows alike (keys not independent).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.core.cluster import Cluster  # noqa: E402
from cloudbench.providers.netns import NetnsProvider  # noqa: E402
from cloudbench.providers.netns.flows import flow_branches  # noqa: E402
from cloudbench.providers.netns.provider import HASH_SEED_SYSCTL  # noqa: E402
from cloudbench.providers.netns.wan import link_facts  # noqa: E402
from cloudbench.workers.traceroute import scamper_command  # noqa: E402
from cloudbench.workloads import parse_spec  # noqa: E402

SPEC = """name: benchmda
providers:
  netns:
    regions:
      ra: {zones: {ra-1: {subnets: {sa: {hosts: 1}}}}}
      rb: {zones: {rb-1: {subnets: {sb: {hosts: 1}}}}}
      rc: {zones: {rc-1: {subnets: {sc: {hosts: 1}}}}}
wan:
  links:
    - {between: [ra, rb], delay: 1ms, ecmp: 2}
    - {between: [ra, rc], delay: 1ms, ecmp: 3}
    - {between: [rb, rc], delay: 1ms}
workloads: [{kind: traceroute, sources: [sa-1]}]
"""
# The campaign's traceroute parameters in test_wan.py's MDA fixture
TRACELB = {"method": "udp-dport", "confidence": 99, "gap_limit": 3, "attempts": 2,
           "wait_probe_s": 0.15, "wait_timeout_s": 1.0, "pps": 200}
FIRST_DPORT = 33435  # scamper tracelb -P udp-dport: flow i has destination port 33435 + i
STOP_ONE, STOP_TWO = 8, 15  # scamper's flows at 99 % to rule out a 2nd, a 3rd next hop
FIXED = [(40000, FIRST_DPORT + i) for i in range(60)]
DIAMONDS = {"sb-1": ("rb", 2), "sc-1": ("rc", 3)}


def mda_misses(branches: Sequence[int | None], width: int) -> bool:
    """Whether scamper's stopping rule at 99 % stops short of ``width`` branches when its
    flows are hashed to ``branches`` in order (unanswered flows are skipped)."""
    seen = [b for b in branches if b is not None]
    if len(set(seen[:STOP_ONE])) < 2:
        return True
    return width > 2 and len(set(seen[:STOP_TWO])) < 3


def uniform_miss(width: int) -> float:
    """The same probability under uniform, independent hashing of the flows."""
    one = width * (1 / width) ** STOP_ONE  # the first 8 flows all went one way
    if width == 2:
        return one
    # ... or the first 15 went two ways only; counting apart the 8-one-way cases whose
    # next 7 flows took both other branches (scamper stopped at 8, before seeing them)
    two_only = 3 * (2 / 3) ** STOP_TWO - 3 * (1 / 3) ** STOP_TWO
    rest = STOP_TWO - STOP_ONE
    return two_only + one * (1 - 2 * (2 / 3) ** rest + (1 / 3) ** rest)


def hash_view(c: Cluster, sports: range) -> dict[str, Any]:
    """Branch of each fixed flow, and per source port scamper's first 15 flows' branches."""
    out: dict[str, Any] = {}
    for dst_name, (region, _width) in DIAMONDS.items():
        flows = [(s, FIRST_DPORT + i) for s in sports for i in range(STOP_TWO)]
        got = flow_branches(c, "sa-1", dst_name, ("ra", region), FIXED + flows)
        fixed, got = got[:len(FIXED)], got[len(FIXED):]
        per_sport = [got[k:k + STOP_TWO] for k in range(0, len(got), STOP_TWO)]
        out[dst_name] = {"fixed": fixed, "per_sport": per_sport}
    return out


def scamper_round(c: Cluster, k: int, tmp: Path) -> list[dict[str, Any]]:
    """``k`` concurrent scamper processes from sa-1, each tracing sb-1 and sc-1."""
    src = c.host("sa-1")
    assert src.netns is not None
    cfg = {**TRACELB, "destinations": [c.host(d).address for d in DIAMONDS]}
    outs = [tmp / f"trace-{time.monotonic_ns()}-{i}.json" for i in range(k)]
    procs = [subprocess.Popen(["ip", "netns", "exec", src.netns, *scamper_command(cfg, str(o))],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for o in outs]
    traces = []
    try:
        for p in procs:
            p.wait(timeout=120)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for o in outs:
        lines = o.read_text().splitlines() if o.exists() else []
        for line in lines:
            obj = json.loads(line)
            if obj.get("type") == "tracelb":
                traces.append({"obj": obj, "raw": line, "file": o})
    return traces


def judge(c: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    """Which branches of its diamond a trace found, its unanswered hops, its source port."""
    dst_name = next(h.name for h in c.hosts if h.address == obj["dst"])
    region, width = DIAMONDS[dst_name]
    lf = link_facts(c.facts, "ra", region)
    branches = {hop[1] for hop in lf["forward_hops"]}
    found = {hop.get("addr") for node in obj.get("nodes", []) for links in node.get("links", [])
             for hop in links} | {node.get("addr") for node in obj.get("nodes", [])}
    anon = sum(1 for node in obj.get("nodes", []) for links in node.get("links", [])
               for hop in links if hop.get("addr", "*") == "*")
    anon_w = sum(1 for node in obj.get("nodes", []) if node.get("addr") == lf["w_addr"]
                 for links in node.get("links", []) for hop in links if hop.get("addr", "*") == "*")
    return {"dst": dst_name, "width": width, "found": len(branches & found), "anon": anon, "anon_w": anon_w,
            "sport": obj.get("sport"), "probes": obj.get("probec")}


def icmp_limited(c: Cluster) -> dict[str, int]:
    """ICMP messages not sent because of a rate limit (the global one or the one per
    destination), by the routers (time exceeded) and by the hosts (port unreachable)."""
    total = {"routers": 0, "hosts": 0}
    hosts = [str(h.netns) for h in c.hosts]
    for kind, names in (("routers", list(c.facts["routers"])), ("hosts", hosts)):
        for ns in names:
            snmp = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"],
                                  capture_output=True, text=True, check=True).stdout.splitlines()
            head, vals = (ln.split()[1:] for ln in snmp if ln.startswith("Icmp:"))
            row = dict(zip(head, vals, strict=True))
            total[kind] += sum(int(row.get(k, 0)) for k in ("OutRateLimitGlobal", "OutRateLimitHost"))
    return total


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact") if n else None
    return (ci.low, ci.high) if ci else (0.0, 1.0)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--testbeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of scamper runs per testbed")
    ap.add_argument("--concurrency", type=int, default=10, help="scamper processes per round")
    ap.add_argument("--sports", type=int, default=400, help="source ports of 15 probed flows each")
    ap.add_argument("--unseeded", action="store_true", help="write the default hash key (0) back")
    ap.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "cloudbench-mda-misses",
                    help="where the raw output of each trace that missed a branch is kept")
    args = ap.parse_args()
    if not 2 <= args.testbeds <= 10 or not 1 <= args.rounds <= 20 or not 1 <= args.concurrency <= 20:
        ap.error("--testbeds 2..10, --rounds 1..20, --concurrency 1..20")
    return args


def run_testbeds(args: argparse.Namespace, sports: range) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                   dict[str, dict[str, int]]]:
    """On each fresh testbed: scamper's rounds, then the hash view. Returns the hash views (one
    per testbed), the judged traces, and the ICMP messages held back while scamper ran and
    while the flows were probed."""
    spec = parse_spec(SPEC, "bench_mda.yaml")
    provider = NetnsProvider()
    views: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    limited = {"probing": {"routers": 0, "hosts": 0}, "scamper": {"routers": 0, "hosts": 0}}
    for t in range(args.testbeds):
        with tempfile.TemporaryDirectory() as tmp:
            c = provider.provision(spec.topology(), Path(tmp))
            try:
                if args.unseeded:
                    for ns in c.facts["routers"]:
                        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", f"{HASH_SEED_SYSCTL}=0"],
                                       check=True)
                # scamper first: the first round meets a cold testbed, as a campaign's trial does
                for rnd in range(args.rounds):
                    for tr in scamper_round(c, args.concurrency, Path(tmp)):
                        r = judge(c, tr["obj"])
                        r["testbed"], r["cold"] = t, rnd == 0
                        if r["found"] < r["width"]:
                            args.keep.mkdir(parents=True, exist_ok=True)
                            kept = args.keep / f"miss-{c.stack}-{r['dst']}-{r['sport']}.json"
                            kept.write_text(tr["raw"] + "\n")
                            r["kept"] = str(kept)
                        results.append(r)
                after_scamper = icmp_limited(c)
                views.append(hash_view(c, sports))
                for k, v in icmp_limited(c).items():
                    limited["scamper"][k] += after_scamper[k]
                    limited["probing"][k] += v - after_scamper[k]
            finally:
                provider.destroy(c)
    return views, results, limited


def summarize(dst: str, width: int, views: list[dict[str, Any]], results: list[dict[str, Any]],
              sports: range) -> tuple[dict[str, Any], bool]:
    """The row of the ``width``-way diamond toward ``dst``: the hash views and scamper's traces
    pooled over the testbeds, printed and returned; and whether two testbeds split every fixed
    flow answered in both (at least half of them) alike."""
    fixed = [v[dst]["fixed"] for v in views]
    pairs = [[(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
             for a, b in itertools.combinations(fixed, 2)]  # flows answered in both testbeds
    agree = [sum(x == y for x, y in both) for both in pairs]
    shares = [sum(s.count(j) for v in views for s in v[dst]["per_sport"]) for j in range(width)]
    unanswered = sum(f.count(None) for v in views for f in v[dst]["per_sport"])
    miss = [[mda_misses(s, width) for s in v[dst]["per_sport"]] for v in views]
    per_bed = [sum(m) for m in miss]
    joint = sum(all(col) for col in zip(*miss, strict=True))
    n_sets = sum(len(m) for m in miss)
    p_sets = sum(per_bed) / n_sets
    lo_s, hi_s = clopper_pearson(sum(per_bed), n_sets)
    traces = [r for r in results if r["dst"] == dst]
    k = sum(r["found"] < width for r in traces)
    lo, hi = clopper_pearson(k, len(traces))
    chi_p = [float(stats.chisquare([sum(s.count(j) for s in v[dst]["per_sport"]) for j in range(width)]).pvalue)
             for v in views]
    row = {"width": width, "fixed_flows": len(FIXED), "fixed_alike": agree,
           "branch_shares": shares, "shares_chi2_p": chi_p, "unanswered_probes": unanswered,
           "sets_missing": per_bed, "sets_missing_in_all_testbeds": joint,
           "set_miss_rate": p_sets, "set_miss_ci95": [lo_s, hi_s], "uniform_miss": uniform_miss(width),
           "traces": len(traces), "trace_misses": k, "trace_miss_ci95": [lo, hi],
           "anonymous_hops": sum(r["anon"] for r in traces),
           "anonymous_after_w": sum(r["anon_w"] for r in traces),
           "cold_traces": sum(r["cold"] for r in traces),
           "cold_misses": sum(r["cold"] and r["found"] < width for r in traces),
           "kept": [r["kept"] for r in traces if "kept" in r]}
    print(f"\n{width}-way diamond (sa-1 → {dst})")
    print(f"  {len(FIXED)} fixed flows on the same branch in two testbeds: {agree} "
          f"(one key per boot: {len(FIXED)}; independent keys: ~{len(FIXED) / width:.0f})")
    print(f"  branch shares of {sum(shares)} probes: {shares} (χ² p per testbed: "
          f"{', '.join(f'{p:.2f}' for p in chi_p)}); "
          f"unanswered: {unanswered}")
    print(f"  scamper's first flows of {len(sports)} source ports: MDA would miss a branch for "
          f"{per_bed} per testbed, {joint} in every testbed; rate {p_sets:.2%} "
          f"[{lo_s:.2%}, {hi_s:.2%}] (uniform hashing: {uniform_miss(width):.2%})")
    print(f"  scamper tracelb at 99 %: {k} of {len(traces)} traces missed a branch, "
          f"{k / max(len(traces), 1):.1%} [{lo:.1%}, {hi:.1%}] ({row['cold_misses']} of the "
          f"{row['cold_traces']} on cold testbeds); anonymous hops {row['anonymous_hops']}, "
          f"{row['anonymous_after_w']} of them in the diamond"
          + (f"; raw output kept: {row['kept']}" if row["kept"] else ""))
    return row, any(len(both) >= len(FIXED) // 2 and n == len(both) for n, both in zip(agree, pairs, strict=True))


def main() -> int:
    args = parse_args()
    if shutil.which("scamper") is None:
        print("bench_mda.py: scamper is not installed (apt-get install scamper)", file=sys.stderr)
        return 2
    sports = range(41000, 41000 + max(1, min(args.sports, 4000)))
    t0 = time.monotonic()
    views, results, limited = run_testbeds(args, sports)
    elapsed = time.monotonic() - t0
    out: dict[str, Any] = {"bench": "mda", "unseeded": args.unseeded, "testbeds": args.testbeds,
                           "sports": len(sports), "elapsed_s": round(elapsed, 1),
                           "icmp_rate_limited": limited, "diamonds": {}}
    failed = False
    print(f"{args.testbeds} testbeds{' (unseeded: one hash key per boot)' if args.unseeded else ''}, "
          f"{elapsed:.0f} s; ICMP messages held back by rate limits: {limited} (hosts: port "
          "unreachables to one source beyond 1/s, burst 6: anonymous last hops, no branch lost)")
    for dst, (_region, width) in DIAMONDS.items():
        row, all_alike = summarize(dst, width, views, results, sports)
        out["diamonds"][dst] = row
        if row["trace_miss_ci95"][0] > 0.01 or row["set_miss_ci95"][0] > 0.01:
            failed = True
        if all_alike and not args.unseeded:  # every flow answered in two testbeds on the same branch
            failed = True
    print(json.dumps(out))
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
