"""Ground truth of the emulated WAN: ECMP diamonds, delays, scheduled steps, AS paths.

Each test runs a small campaign end to end (CampaignRunner on the netns
testbed) and checks what the measurements recovered against what the testbed
was told to be (the provider's WAN facts).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from geographiclib.geodesic import Geodesic

from cloudbench.analysis.paths import PrefixTable
from cloudbench.core.cluster import Cluster
from cloudbench.providers.netns import NetnsProvider
from cloudbench.providers.netns.flows import flow_branches
from cloudbench.providers.netns.forwarder import RTT_ALLOWANCE_US
from cloudbench.providers.netns.provider import HASH_SEED_SYSCTL
from cloudbench.providers.netns.wan import TRANSIT_ASN, link_facts
from cloudbench.report.build import build_report
from cloudbench.runner import CampaignRunner
from cloudbench.store.rundir import RunDir
from cloudbench.workloads import parse_spec
from cloudbench.workloads.traceroute.data import graphs, load_prefix_table

from .conftest import assert_gone, ours

pytestmark = pytest.mark.integration

REGIONS = """
providers:
  netns:
    regions:
      ra:
        location: [50.11, 8.68]
        zones: {{ra-1: {{subnets: {{sa: {{hosts: 1}}}}}}}}
      rb:
        location: [48.86, 2.35]
        zones: {{rb-1: {{subnets: {{sb: {{hosts: 1}}}}}}}}
{more}
"""


@dataclass
class Recorder:
    """A netns provider that remembers the clusters it made (for their WAN facts)."""

    inner: NetnsProvider = field(default_factory=NetnsProvider)
    clusters: list[Cluster] = field(default_factory=list)
    pids: dict[str, list[int]] = field(default_factory=dict)  # sshd and delay lines, by stack
    name: str = "netns"
    look: Callable[[Cluster], Any] | None = None  # at each testbed while it stands
    seen: dict[str, Any] = field(default_factory=dict)  # what ``look`` saw, by stack

    def provision(self, topology: Any, workdir: Path) -> Cluster:
        c = self.inner.provision(topology, workdir)
        self.clusters.append(c)
        state = json.loads(Path(c.facts["state_file"]).read_text())
        self.pids[c.stack] = [int(p["pid"]) for p in state["pids"]]
        if self.look is not None:
            self.seen[c.stack] = self.look(c)
        return c

    def preflight(self, topology: Any) -> list[Any]:
        return self.inner.preflight(topology)

    def destroy(self, cluster: Cluster) -> None:
        self.inner.destroy(cluster)

    def gc(self, dry_run: bool = False) -> list[str]:
        return self.inner.gc(dry_run)


def campaign(text: str, tmp: Path, look: Callable[[Cluster], Any] | None = None) -> tuple[RunDir, Recorder]:
    rec = Recorder(look=look)
    spec = parse_spec(text, "wan.yaml")
    run = CampaignRunner(spec, "wan.yaml", tmp, provider_factory=lambda _n: rec).execute()
    for c in rec.clusters:
        n_links = len(c.facts["wan"]["links"])
        assert len(rec.pids[c.stack]) == len(c.hosts) + n_links  # one delay line per link
        assert_gone(c.stack, rec.pids[c.stack])
        assert ours(c.stack) == []
    return run, rec


@pytest.fixture(scope="module")
def mda_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunDir, Recorder]]:
    text = "name: wanmda\n" + REGIONS.format(more="""      rc:
        zones: {rc-1: {subnets: {sc: {hosts: 1}}}}
wan:
  links:
    - {between: [ra, rb], delay: 1ms, ecmp: 2}
    - {between: [ra, rc], delay: 1ms, ecmp: 3}
    - {between: [rb, rc], delay: 1ms}
workloads:
  - {kind: traceroute, sources: [sa-1], confidence: 99, wait_probe: 150ms, wait_timeout: 1s, pps: 200}
repetitions: 2
""")
    yield campaign(text, tmp_path_factory.mktemp("mda"), look=hashing)


# Fixed flows (source port, destination port) sent through the 3-way diamond of each testbed
FLOWS = [(40000, dport) for dport in range(33435, 33495)]


def hashing(c: Cluster) -> dict[str, Any]:
    """Each router's multipath hash key as the kernel holds it, and the branch of the 3-way
    diamond (ra → rc) each of ``FLOWS`` from sa-1 to sc-1 is hashed to."""
    keys = {}
    for ns in c.facts["routers"]:
        r = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", HASH_SEED_SYSCTL],
                           capture_output=True, text=True, check=False)
        keys[ns] = int(r.stdout) if r.returncode == 0 else None
    if c.facts.get("multipath_hash_seeds") is None:  # an older kernel: the test skips
        return {"keys": keys, "branches": None}
    try:  # a failed probe fails the test that reads it, not the fixture every MDA test shares
        branches = flow_branches(c, "sa-1", "sc-1", ("ra", "rc"), FLOWS, timeout_s=1.0)
    except (LookupError, OSError) as e:
        return {"keys": keys, "branches": None, "error": repr(e)}
    return {"keys": keys, "branches": branches}


def test_each_testbed_splits_flows_with_its_own_hash_key(mda_run: tuple[RunDir, Recorder]) -> None:
    """The two repetitions' testbeds are independent draws of the ECMP hash: each router holds
    the key recorded in the run's facts, the two testbeds' keys differ, and the same 60 flows
    are split differently (with one key per boot they took the same branch, 60 of 60)."""
    run, rec = mda_run
    facts = [r.facts for r in run.manifest().repetitions]
    if facts[0]["multipath_hash_seeds"] is None:
        pytest.skip("this kernel (< 6.11) keys the multipath hash once per boot")
    for f, c in zip(facts, rec.clusters, strict=True):
        assert rec.seen[c.stack]["keys"] == f["multipath_hash_seeds"]
        assert all(k != 0 for k in f["multipath_hash_seeds"].values())
    a, b = (list(f["multipath_hash_seeds"].values()) for f in facts)
    assert all(x != y for x, y in zip(a, b, strict=True))
    maps = [rec.seen[c.stack]["branches"] for c in rec.clusters]
    assert all(m is not None for m in maps), [rec.seen[c.stack].get("error") for c in rec.clusters]
    # flows answered in both testbeds (a reply can be late under load: then it is left out)
    both = [(x, y) for x, y in zip(*maps, strict=True) if x is not None and y is not None]
    assert len(both) >= len(FLOWS) // 2, maps
    same = sum(x == y for x, y in both)
    print(f"\nsame branch in both testbeds: {same} of {len(both)} flows (independent keys: ~1/3)")
    assert same < len(both), maps  # all alike by chance: at most 3⁻³⁰


def _first_split(run: RunDir, rep: int, dst_addr: str, w_addr: str) -> str:
    """For a failure message: the scamper trace's source port and, per next hop of W, the
    distinct flows (destination ports) that reached it (raw output kept under the run)."""
    for path in sorted((run.path / "traceroute" / "raw").glob(f"r{rep:03d}-*.json")):
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            if obj.get("type") != "tracelb" or obj.get("dst") != dst_addr:
                continue
            split = {hop.get("addr", "*"): sorted({p["flowid"] for p in hop.get("probes", [])})
                     for node in obj.get("nodes", []) if node.get("addr") == w_addr
                     for links in node.get("links", []) for hop in links}
            return f"{path}: sport {obj.get('sport')}, probes {obj.get('probec')}, flows after W {split}"
    return f"no raw trace to {dst_addr} in repetition {rep}"


def test_every_ecmp_branch_is_discovered(mda_run: tuple[RunDir, Recorder]) -> None:
    """MDA's guarantee is per trace and probabilistic. At 99 % confidence scamper stops at
    8 flows when they all hash one way and at 15 when they show two branches, so it misses
    a branch of the 2-way diamond 2·2⁻⁸ ≈ 0.8 % of the time and of the 3-way one
    3·(2/3)¹⁵ ≈ 0.7 % (bench/bench_mda.py measures it). Each repetition's testbed draws its
    own hash keys (test_each_testbed_splits_flows_with_its_own_hash_key), so the two traces
    of a diamond are independent: each must find no false branch, and at least one must
    find every branch, which fails by chance when both miss (< 1e-4)."""
    from cloudbench.analysis.paths import diamonds

    run, rec = mda_run
    gs = graphs(run, "traceroute")
    assert {(s, d) for _, s, d in gs} == {("sa-1", "sb-1"), ("sa-1", "sc-1")}
    assert {r for r, _, _ in gs} == {0, 1}
    complete: dict[str, int] = {"sb-1": 0, "sc-1": 0}
    misses: list[str] = []
    for (rep, _, dst), g in gs.items():
        facts = rec.clusters[rep].facts
        region = {"sb-1": "rb", "sc-1": "rc"}[dst]
        lf = link_facts(facts, "ra", region)
        hops = lf["forward_hops"] if lf["a"] == "ra" else lf["reverse_hops"]
        branches = {addr for h in hops for addr in h[1:-1]}
        assert len(branches) == lf["ecmp"] in (2, 3)
        on_link = {addr for h in hops for addr in h} | {lf["w_addr"]}
        wan_nodes = {n for n in g.nodes if n.startswith("198.19.128.")}
        assert wan_nodes <= on_link, f"{dst}: interfaces not on the link: {wan_nodes - on_link}"
        if branches <= g.nodes:
            (d,) = diamonds(g)
            assert d.width == lf["ecmp"] and d.divergence == lf["w_addr"]
            complete[dst] += 1
        else:
            misses.append(f"repetition {rep}, {dst}: {_first_split(run, rep, g.dst, lf['w_addr'])}")
    assert all(n >= 1 for n in complete.values()), f"a diamond was never fully discovered: {complete}; {misses}"


def test_as_path_matches_the_testbed_table(mda_run: tuple[RunDir, Recorder]) -> None:
    run, rec = mda_run
    rows = rec.clusters[0].facts["wan"]["asn_table"]
    table = PrefixTable.from_rows(rows)
    asn = {name.removeprefix("cb-"): a for _, a, name in rows}
    report = build_report(run)
    paths = report["workloads"]["traceroute"]["paths"]
    assert sorted((p["repetition"], p["dst"]) for p in paths) == [
        (0, "sb-1"), (0, "sc-1"), (1, "sb-1"), (1, "sc-1")]
    for p in paths:
        dst_region = {"sb-1": "rb", "sc-1": "rc"}[p["dst"]]
        assert p["as_path"] == f"{asn['ra']} {TRANSIT_ASN} {asn[dst_region]}"
    csv_table = load_prefix_table(run.path / "traceroute" / "asn-table.csv")
    assert csv_table.lookup("198.19.128.1") == table.lookup("198.19.128.1") == (TRANSIT_ASN, "cb-transit")


def echo_spec(name: str, wan: str, duration: str, window: str) -> str:
    return f"name: {name}\n" + REGIONS.format(more=wan + f"""
workloads:
  - {{kind: echo, rate: 100, duration: {duration}, warmup: 0.5s, window: {window}, self_loop: false}}
""")


def test_echo_recovers_the_geodesic_delay(tmp_path: Path) -> None:
    run, rec = campaign(echo_spec("wandelay", "wan: {overhead: 2ms}", "4s", "1s"), tmp_path)
    d = Geodesic.WGS84.Inverse(50.11, 8.68, 48.86, 2.35)["s12"]
    one_way_us = (d / (299_792_458.0 * 2 / 3) + 0.002) * 1e6
    lf = link_facts(rec.clusters[0].facts, "ra", "rb")
    assert lf["origin"] == "geodesic" and lf["delay_s"] * 1e6 == pytest.approx(one_way_us)
    ((n, median),) = duckdb.sql("SELECT count(rtt_ns), median(rtt_ns / 1000.0) "
                                f"FROM read_parquet('{run.path}/echo/*.parquet') WHERE NOT warmup").fetchall()
    assert n > 500
    print(f"\nwan delay: expected RTT {2 * one_way_us:.0f} us, echo median {median:.0f} us "
          f"({(median / (2 * one_way_us) - 1) * 100:+.2f} %)")
    assert abs(median - 2 * one_way_us) <= 0.05 * 2 * one_way_us + RTT_ALLOWANCE_US, (median, one_way_us)


def test_scheduled_step_is_detected_in_time_and_size(tmp_path: Path) -> None:
    at, before, after, window = 5.0, 0.004, 0.007, 0.5
    wan = f"wan: {{links: [{{between: [ra, rb], delay: {before}, steps: [{{at: {at}, delay: {after}}}]}}]}}"
    run, rec = campaign(echo_spec("wanstep", wan, "8s", f"{window}s"), tmp_path)
    epoch_ns = rec.clusters[0].facts["wan"]["epoch_monotonic_ns"]
    trial = run.manifest().to_json()["trials"][0]
    section = build_report(run)["workloads"]["echo"]
    shifts, events = section["level_shifts"], section["events"]
    # host load on this 2-vCPU machine moves RTTs by ~1-2 % for a second or two; those
    # are measured shifts too, but the weather under test is the configured step
    steps = [s for s in shifts if s["kind"] == "step" and ">" in s["series"]
             and abs(s["size"]) >= (after - before) * 1e6]
    pair_steps = {s["series"]: s for s in steps}
    assert len(steps) == 2 and set(pair_steps) == {"sa-1>sb-1", "sb-1>sa-1"}, [  # one each
        (s["series"], s["kind"], s["time_s"], round(s["size"]), round(s["before"])) for s in shifts]
    for series, s in pair_steps.items():
        t0_ns = trial["stats"][series.split(">")[0]]["t0_ns"]
        expected_s = (epoch_ns + at * 1e9 - t0_ns) / 1e9
        print(f"\n{series}: step at {s['time_s']:.2f} s (expected {expected_s:.2f} s), "
              f"size {s['size']:.0f} us (expected {2 * (after - before) * 1e6:.0f} us)")
        assert abs(s["time_s"] - expected_s) <= window, (series, s, expected_s)
        # Its size: the per-pair detector on raw RTTs (a low quantile each side, so
        # host load does not pull it), which the report prints per pair instead of window medians.
        # The window medians' size is not asserted: a step inside a window splits it (read 25 % low).
        ev = [e for e in events if e["series"] == series and e["kind"] == "step" and e["origin"] == "link"
              and abs(e["time_s"] - expected_s) <= window]
        assert ev, (series, events)
        assert ev[0]["size"] == pytest.approx(2 * (after - before) * 1e6, rel=0.10), (series, ev)
