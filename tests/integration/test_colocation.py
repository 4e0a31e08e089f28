"""The colocation audit on the testbed, against its ground truth.

experiments/colocation.yaml: 8 hosts capped at 80 Mbit/s each; a1-a3 share a
100 Mbit/s NIC (physical host ph1), b1-b2 another (ph2), c1-c3 have their own.
The audit must infer exactly {a1, a2, a3} and {b1, b2}. Under full load the test
asserts what the testbed guarantees, not how CPU scheduling splits a NIC:

* no host sends more than its bound (its cap, or its NIC for members of a
  physical host; as TCP goodput, 1448/1514 of the wire rate) plus 5 %, the
  spread of the shapers' own measurements;
* a shared NIC is kept busy: its members together send at least 80 % of it;
* nobody starves: each member sends at least half its fair share, each host with
  its own NIC at least 75 % of its cap.

The split between members of one NIC is measured and printed but not asserted:
with other work on the two cores it ranged -17 %..+16 % of the fair share
(a2 26.5 vs 31.9 Mbit/s failed the old 10 % bound), while the audit's groups
were right every time. The rates are small (at most 440 Mbit/s in all) so that
two busy cores carry them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudbench.core.netns import list_netns, netns_pids
from cloudbench.core.processes import pid_cmdline
from cloudbench.runner import CampaignRunner
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.store.summaries import read_summaries
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialOutcome

from ..paths import EXPERIMENTS

pytestmark = pytest.mark.integration

SPEC = EXPERIMENTS / "colocation.yaml"


def test_colocation_audit_finds_the_truth(tmp_path: Path) -> None:
    # the experiment's full load and probes, shortened: what is asserted is a rate over each
    text = SPEC.read_text()
    for old, new in (("duration: 10s", "duration: 5s"), ("probe: 3s", "probe: 1.5s")):
        assert old in text
        text = text.replace(old, new)
    spec = parse_spec(text, str(SPEC))
    leftovers: list[list[str]] = []
    runner: CampaignRunner

    def after(trial: Trial, outcome: TrialOutcome) -> None:
        assert not outcome.failures, outcome.failures
        prefix = f"cb{runner.manifest.repetitions[-1].stack}-"
        leftovers.append([c for ns in list_netns() if ns.startswith(prefix)
                          for p in netns_pids(ns) if "nuttcp" in (c := pid_cmdline(p))])

    runner = CampaignRunner(spec, str(SPEC), tmp_path / "results", after_trial=after)
    run = runner.execute()
    manifest = run.manifest()
    rep = manifest.repetitions[0]
    assert [n for n in list_netns() if n.startswith(f"cb{rep.stack}-")] == []
    assert leftovers == [[]], "a server outlived the trial"
    assert rep.facts["physical_hosts"]["ph1"]["hosts"] == ["a1", "a2", "a3"]
    placed = {h.name: (h.facts.get("physical_host") or {}).get("name") for h in rep.hosts}
    assert placed == {"a1": "ph1", "a2": "ph1", "a3": "ph1", "b1": "ph2", "b2": "ph2",
                      "c1": None, "c2": None, "c3": None}

    (w,) = manifest.workloads()
    sec = workload_kind("colocation").report_section(run, manifest, w)
    (audit,) = sec["audits"]
    print(f"\n{audit['probes']} probes {audit['phases']}; inferred {audit['groups']}")
    for g in sec["groups"]:
        print(f"  {g['hosts']:10s} confidence {g['confidence']:.3f} truth {g['matches_truth']}")
    assert sorted(map(tuple, audit["groups"])) == [("a1", "a2", "a3"), ("b1", "b2")]
    assert audit["matches_truth"] is True

    tcp = goodput_fraction("tcp")
    nics = {"ph1": (("a1", "a2", "a3"), 100 * tcp), "ph2": (("b1", "b2"), 100 * tcp)}
    cap = 80 * tcp
    egress = {r["host"]: r["egress_mbps"] for r in sec["hosts"]}
    print("  host  egress  fair share or cap (Mbit/s, full load)")
    for r in sec["hosts"]:
        nic = next((v for v in nics.values() if r["host"] in v[0]), None)
        fair = nic[1] / len(nic[0]) if nic else cap
        print(f"  {r['host']:4s} {r['egress_mbps']:7.1f} {fair:7.1f} {r['egress_mbps'] / fair - 1:+.1%}")
        assert r["nominal_mbps"] == pytest.approx(cap)
    for name, (members, rate) in nics.items():
        total = sum(egress[h] for h in members)
        assert 0.80 * rate <= total <= 1.05 * rate, (name, total, rate)
        for h in members:
            assert 0.5 * rate / len(members) <= egress[h] <= 1.05 * min(rate, cap), (h, egress[h])
    for h in ("c1", "c2", "c3"):
        assert 0.75 * cap <= egress[h] <= 1.05 * cap, (h, egress[h])
    loss = {x["size"]: x["loss"] for x in sec["loss"]}
    assert loss[3] == pytest.approx(1 - 100 / 3 / 80, abs=0.1)
    assert loss[2] == pytest.approx(1 - 50 / 80, abs=0.1)

    rows = {(r["metric"], r["group"]): r["value"] for r in read_summaries(run).to_pylist()}
    assert rows[("colocated_hosts", "all")] == 5
