"""The colocation audit on the testbed, against its ground truth (issue 17).

experiments/colocation.yaml: 8 hosts capped at 80 Mbit/s each; a1-a3 share a
100 Mbit/s NIC (physical host ph1), b1-b2 another (ph2), c1-c3 have their own.
The audit must infer exactly {a1, a2, a3} and {b1, b2}, and under full load each
host placed on a physical host must send within 10 % of its fair share of the
NIC (nic / members, as TCP goodput: 1448/1514 of the wire rate), the others
within 10 % of their own cap. The rates are small (at most 440 Mbit/s in all) so
that two busy cores carry them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudbench.core.netns import list_netns, netns_pids
from cloudbench.core.processes import pid_cmdline
from cloudbench.runner import CampaignRunner
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.store.summaries import read_summaries
from cloudbench.workloads import load_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialOutcome

from ..paths import EXPERIMENTS

pytestmark = pytest.mark.integration

SPEC = EXPERIMENTS / "colocation.yaml"


def test_colocation_audit_finds_the_truth(tmp_path: Path) -> None:
    spec = load_spec(SPEC)
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
    expected = {**dict.fromkeys(("a1", "a2", "a3"), 100e6 / 3 * tcp),
                **dict.fromkeys(("b1", "b2"), 100e6 / 2 * tcp),
                **dict.fromkeys(("c1", "c2", "c3"), 80e6 * tcp)}
    print("  host  egress  expected (Mbit/s, full load)")
    for r in sec["hosts"]:
        print(f"  {r['host']:4s} {r['egress_mbps']:7.1f} {expected[r['host']] / 1e6:7.1f} "
              f"{r['egress_mbps'] * 1e6 / expected[r['host']] - 1:+.1%}")
    for r in sec["hosts"]:
        assert r["egress_mbps"] == pytest.approx(expected[r["host"]] / 1e6, rel=0.10), r["host"]
        assert r["nominal_mbps"] == pytest.approx(80 * tcp)
    loss = {x["size"]: x["loss"] for x in sec["loss"]}
    assert loss[3] == pytest.approx(1 - 100 / 3 / 80, abs=0.1)
    assert loss[2] == pytest.approx(1 - 50 / 80, abs=0.1)

    rows = {(r["metric"], r["group"]): r["value"] for r in read_summaries(run).to_pylist()}
    assert rows[("colocated_hosts", "all")] == 5
