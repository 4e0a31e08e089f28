"""Ground truth on the testbed: shaped vm_types, throughput and token-bucket drains.

What the shaper should deliver is computed from the vm_type (cloudbench.providers.netns.shaping):
tc counts Ethernet frames, the tools count payload, so a TCP receiver sees
1448/1514 = 95.6 % of a configured rate (TESTBED-NOTES: 191 and 48 Mbit/s behind
200 and 50). Rates, budget and refill are compared with those goodputs, the time
to empty with budget / (high − low) on the wire. The tolerance is the issue's
(10 %, refill 20 %); the recorded runs of this test land within 1–3 %, so the
margin absorbs a busy CI machine (timer slack of tbf, a slow first interval),
not a model error.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.core.netns import list_netns, netns_pids
from cloudbench.core.processes import pid_cmdline
from cloudbench.remote import Remote
from cloudbench.runner import CampaignRunner, worker_bundle
from cloudbench.spec.model import Spec
from cloudbench.spec.vmtypes import VmTypeModel, expected_goodput, goodput_fraction
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import read_summaries
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialContext, TrialOutcome

from .conftest import provisioned


def section(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> dict[str, Any]:
    """The report section of workload ``w`` (throughput or tbdrain), as the report builds it."""
    return workload_kind(w["kind"]).report_section(run, manifest, w)

pytestmark = pytest.mark.integration

TOPOLOGY = """\
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {{hosts: [a, b], vm_type: {vm_type}}}
"""

TB = {"shaping": "token_bucket", "high_rate": "200mbit", "low_rate": "50mbit", "budget": "75MiB"}

TB_SPEC = "name: tbtruth\nseed: 7\n" + TOPOLOGY.format(vm_type="tb-test") + """\
vm_types:
  tb-test: {shaping: token_bucket, high_rate: 200mbit, low_rate: 50mbit, budget: 75MiB, qdisc: QDISC}
workloads:
  - kind: tbdrain
    name: drain
    pairs: [[a, b]]
    interval: 0.5s
    window: 2s
    max_duration: 20s
    rest: 6s
"""
# b's own bucket, drained with iperf3 (its rule watches the interface counter)
IPERF3_DRAIN = """\
  - kind: tbdrain
    name: drain3
    tool: iperf3
    pairs: [[b, a]]
    interval: 0.5s
    window: 2s
    max_duration: 20s
"""

CAP_SPEC = "name: captruth\n" + TOPOLOGY.format(vm_type="local.100m").replace(
    "s1: {hosts: [a, b], vm_type: local.100m}",
    "s1: {hosts: [a], vm_type: local.100m}\n              s2: {hosts: [b]}") + """\
workloads:
  - kind: tbdrain
    name: nodrain
    pairs: [[a, b]]
    interval: 0.5s
    window: 2s
    max_duration: 6s
  - kind: throughput
    name: udp
    protocol: udp
    udp_rate: 300mbit
    length: 1472
    pairs: [[a, b]]
    duration: 6s
  - kind: throughput
    name: tcp
    tool: iperf3
    pairs: [[a, b]]
    direction: both
    duration: 3s
"""


def tool_processes(prefix: str) -> list[str]:
    """nuttcp / iperf3 processes left in the testbed's namespaces."""
    left = []
    for ns in list_netns():
        if ns.startswith(prefix):
            left += [c for p in netns_pids(ns) if any(t in (c := pid_cmdline(p))
                                                       for t in ("nuttcp", "iperf3"))]
    return left


@pytest.mark.parametrize("qdisc", ["tbf", "htb"])
def test_token_bucket_ground_truth(tmp_path: Path, qdisc: str) -> None:
    text = TB_SPEC.replace("QDISC", qdisc) + (IPERF3_DRAIN if qdisc == "tbf" else "")
    spec_path = tmp_path / "tb.yaml"
    spec_path.write_text(text)
    spec = parse_spec(text, str(spec_path))
    leftovers: list[list[str]] = []
    runner: CampaignRunner

    def after(trial: Trial, outcome: TrialOutcome) -> None:
        assert not outcome.failures, outcome.failures
        leftovers.append(tool_processes(f"cb{runner.manifest.repetitions[-1].stack}-"))

    runner = CampaignRunner(spec, str(spec_path), tmp_path / "results", after_trial=after)
    run = runner.execute()
    manifest = run.manifest()
    stack = manifest.repetitions[0].stack
    assert [n for n in list_netns() if n.startswith(f"cb{stack}-")] == []
    assert leftovers == [[]] * len(spec.workloads), "a server outlived its trial"
    facts = manifest.repetitions[0].hosts[0].facts["shaping"]
    assert facts["vm_type"] == "tb-test"
    peak = "peakrate 200000000bit" if qdisc == "tbf" else "classid 1:1 htb rate 50000000bit ceil 200000000bit"
    assert any(peak in c for c in facts["commands"])

    exp = expected_goodput(VmTypeModel.model_validate(TB), "tcp")
    w = {x["name"]: x for x in manifest.workloads()}
    (d,) = section(run, manifest, w["drain"])["drains"]
    print(f"\n{qdisc}: nuttcp drain a→b, configured (goodput) vs estimated:")
    for key, e in (("high_mbps", exp["high_rate"] / 1e6), ("low_mbps", exp["low_rate"] / 1e6),
                   ("time_to_empty_s", exp["time_to_empty"]),
                   ("budget_mbit", exp["budget_bits"] / 1e6), ("refill_mbps", exp["refill_rate"] / 1e6)):
        print(f"  {key:16s} {e:9.3f} {d[key]:9.3f} [{d[key + '_ci_low']:.3f}, "
              f"{d[key + '_ci_high']:.3f}]  {d[key] / e - 1:+.2%}")
    assert d["drained"]
    assert d["high_mbps"] == pytest.approx(exp["high_rate"] / 1e6, rel=0.10)
    assert d["low_mbps"] == pytest.approx(exp["low_rate"] / 1e6, rel=0.10)
    assert d["time_to_empty_s"] == pytest.approx(exp["time_to_empty"], rel=0.10)
    assert d["budget_mbit"] == pytest.approx(exp["budget_bits"] / 1e6, rel=0.10)
    assert d["refill_mbps"] == pytest.approx(exp["refill_rate"] / 1e6, rel=0.20)
    assert not d["refill_saturated"] and 5.5 < d["rest_s"] < 6.5

    rows = {(r["workload"], r["metric"]): r["value"] for r in read_summaries(run).to_pylist()}
    assert rows[("drain", "time_to_empty_s")] == pytest.approx(d["time_to_empty_s"])
    if "drain3" not in w:
        return
    (d3,) = section(run, manifest, w["drain3"])["drains"]
    print(f"iperf3 drain b→a: high {d3['high_mbps']:.1f} low {d3['low_mbps']:.1f} "
          f"empty after {d3['time_to_empty_s']:.2f} s budget {d3['budget_mbit']:.0f} Mbit "
          f"(counted at the {d3['side']})")
    assert d3["drained"]
    assert d3["time_to_empty_s"] == pytest.approx(exp["time_to_empty"], rel=0.10)
    assert d3["high_mbps"] == pytest.approx(exp["high_rate"] / 1e6, rel=0.10)
    assert d3["low_mbps"] == pytest.approx(exp["low_rate"] / 1e6, rel=0.10)


# -- a plain cap, driven through the kinds with a provisioned testbed ---------------------------
@pytest.fixture
def capped(tmp_path: Path) -> Iterator[tuple[Spec, Cluster]]:
    spec = parse_spec(CAP_SPEC, "cap.yaml")
    with provisioned(spec.topology(), tmp_path) as cluster:
        yield spec, cluster


async def _run_trials(spec: Spec, cluster: Cluster, run: RunDir) -> dict[str, TrialOutcome]:
    out: dict[str, TrialOutcome] = {}
    async with Remote(cluster) as remote:
        bundle = worker_bundle(["throughput"])
        for h in cluster.hosts:
            await remote.put(h, bundle, h.workdir)
        for i, w in enumerate(spec.workloads):
            kind = workload_kind(w.kind)
            ((hosts, pairs),) = kind.expand(w, spec)
            trial = Trial(f"r000-t{i:03d}-{w.name}", 0, i, w.name, w.kind, hosts, pairs)
            ctx = TrialContext(trial, w, spec, cluster, remote, run, "token")
            out[w.name] = await kind.run(ctx)
            assert tool_processes(f"cb{cluster.stack}-") == [], f"{w.name}: server left running"
    return out


def test_plain_cap_no_drain_and_udp_loss(capped: tuple[Spec, Cluster], tmp_path: Path) -> None:
    spec, cluster = capped
    a = cluster.host("a")
    qdisc = subprocess.run(["tc", "-n", a.netns or "", "qdisc", "show", "dev", "eth0"],
                           capture_output=True, text=True, check=True).stdout
    assert "tbf" in qdisc and "rate 100Mbit" in qdisc
    assert a.facts["shaping"]["commands"][0].startswith(f"tc -n {a.netns} qdisc replace")
    run = RunDir(tmp_path / "results" / "captruth" / "run")
    run.path.mkdir(parents=True)
    outcomes = asyncio.run(_run_trials(spec, cluster, run))
    assert all(not o.failures and o.rows > 0 for o in outcomes.values()), outcomes
    manifest = Manifest.model_validate({
        "campaign": "captruth", "run_id": "run",
        "spec": spec.model_dump(mode="json"),
        "repetitions": [{"index": 0, "stack": cluster.stack,
                         "hosts": [h.to_dict() for h in cluster.hosts]}],
    })
    w = {x["name"]: x for x in manifest.workloads()}
    cap = 100e6

    (nd,) = section(run, manifest, w["nodrain"])["drains"]
    assert not nd["drained"], nd

    (udp,) = section(run, manifest, w["udp"])["trials"]
    goodput = cap * goodput_fraction("udp", payload=1472) / 1e6
    want_loss = 100 * (1 - goodput / 300)
    # what the sender offered, from what arrived and what the receiver counted lost
    assert udp["loss_pct"] < 100, udp  # something arrived
    offered = udp["mean_mbps"] / (1 - udp["loss_pct"] / 100)
    print(f"\nUDP 300 Mbit/s into a 100 Mbit/s cap: received {udp['mean_mbps']:.1f} Mbit/s "
          f"(shaper: {goodput:.1f}), loss {udp['loss_pct']:.1f} % (expected {want_loss:.1f}), "
          f"offered {offered:.1f}, capacity ≥ {udp['capacity_lb_mbps']:.1f}")
    # What the shaper guarantees: never more than its rate (+5 %, the shapers' own spread), and
    # the report's capacity bound (its best windows) at that rate. The mean and the loss also
    # depend on CPU scheduling: a sender that waits for a busy core and then catches up in a
    # burst overflows the queue the shaper had left idle, and a receiver that waits drops from
    # its socket buffer (one run beside other work lost 82.2 %, not 67.6 ± 6.8 %; its figures
    # were not kept; 9 runs beside one or two busy loops: loss 67.2-67.3 %, received and
    # capacity bound 97.2-97.5, offered 297-298). The loss is checked as accounting instead: what it
    # implies was offered is the sender's 300 Mbit/s (-20 %, +5 %); a loss counted against the
    # wrong total, or none, fails that.
    assert udp["mean_mbps"] <= 1.05 * goodput, udp
    assert 0.90 * goodput <= udp["capacity_lb_mbps"] <= 1.05 * goodput, udp
    assert 0.80 * 300 <= offered <= 1.05 * 300, (offered, udp)

    tcp = section(run, manifest, w["tcp"])
    fwd = next(r for r in tcp["trials"] if r["direction"] == "forward")
    rev = next(r for r in tcp["trials"] if r["direction"] == "reverse")
    print(f"TCP forward {fwd['mean_mbps']:.1f} (shaper: {cap * goodput_fraction('tcp') / 1e6:.1f}), "
          f"reverse {rev['mean_mbps']:.1f} Mbit/s")
    assert fwd["mean_mbps"] == pytest.approx(cap * goodput_fraction("tcp") / 1e6, rel=0.05)
    assert rev["mean_mbps"] > 5 * fwd["mean_mbps"]  # b is not shaped
    (asym,) = tcp["asymmetry"]
    assert asym["ratio"] == pytest.approx(fwd["mean_mbps"] / rev["mean_mbps"])
    assert all(r["shift_s"] != r["shift_s"] for r in tcp["trials"])  # NaN: no level shift
