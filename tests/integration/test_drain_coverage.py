"""Drain and refill intervals cover the configured bucket.

A grid of six token-bucket profiles (high rate, low rate, budget and sampling
interval all vary; none is a setting another test uses), each drained twice with
a refill probe, on fresh hosts per repetition (full buckets). The 95 % intervals
of time to empty, budget and refill must cover what the vm_type configures
(:func:`cloudbench.spec.vmtypes.expected_goodput`) in at least 90 % of the runs,
counted per quantity. The test prints each interval's width (the README's table).

Run (root, about 4 minutes)::

    .venv/bin/python -m pytest -m integration tests/integration/test_drain_coverage.py -s
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cloudbench.core.netns import list_netns
from cloudbench.runner import CampaignRunner
from cloudbench.spec.vmtypes import VmTypeModel, expected_goodput
from cloudbench.workloads import parse_spec, workload_kind

pytestmark = pytest.mark.integration

# (high, low, budget, interval, window, rest): 1.5–3.4 s to empty; rest × low < 0.9 budget
PROFILES = [
    ("160mbit", "32mbit", "48MiB", "0.5s", "2s", "4s"),
    ("200mbit", "50mbit", "40MiB", "0.25s", "1.5s", "3s"),
    ("100mbit", "20mbit", "32MiB", "1s", "3s", "4s"),
    ("300mbit", "100mbit", "64MiB", "0.5s", "2s", "3s"),
    ("120mbit", "60mbit", "24MiB", "0.5s", "2s", "2s"),
    ("250mbit", "25mbit", "40MiB", "0.25s", "1.5s", "4s"),
]
REPETITIONS = 2
QUANTITIES = (("time_to_empty_s", "time_to_empty", 1.0), ("budget_mbit", "budget_bits", 1e6),
              ("refill_mbps", "refill_rate", 1e6))


def grid_spec() -> str:
    subnets = "\n".join(f"              s{i}: {{hosts: [tb{i}], vm_type: tb{i}}}"
                        for i in range(len(PROFILES)))
    types = "\n".join(f"  tb{i}: {{shaping: token_bucket, high_rate: {h}, low_rate: {lo}, "
                      f"budget: {b}}}" for i, (h, lo, b, *_rest) in enumerate(PROFILES))
    works = "\n".join(
        f"  - {{kind: tbdrain, name: d{i}, pairs: [[tb{i}, sink]], interval: {dt}, window: {w}, "
        f"max_duration: 12s, rest: {rest}}}" for i, (_h, _l, _b, dt, w, rest) in enumerate(PROFILES))
    return f"""name: tbgrid
seed: 16
repetitions: {REPETITIONS}
fresh_hosts: repetition
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
{subnets}
              sink: {{hosts: [sink]}}
vm_types:
{types}
workloads:
{works}
"""


def test_drain_intervals_cover_the_configured_bucket(tmp_path: Path) -> None:
    text = grid_spec()
    spec = parse_spec(text, "tbgrid.yaml")
    run = CampaignRunner(spec, "tbgrid.yaml", tmp_path / "results").execute()
    manifest = run.manifest()
    for rep in manifest.repetitions:
        assert [n for n in list_netns() if n.startswith(f"cb{rep.stack}-")] == []
    covered: dict[str, list[bool]] = {q: [] for q, _, _ in QUANTITIES}
    widths: dict[str, list[float]] = {q: [] for q, _, _ in QUANTITIES}
    print("\nprofile                         quantity          truth    estimate  95 % interval")
    for w in manifest.workloads():
        i = int(w["name"][1:])
        h, lo, b, dt, *_ = PROFILES[i]
        exp = expected_goodput(VmTypeModel.model_validate(
            {"shaping": "token_bucket", "high_rate": h, "low_rate": lo, "budget": b}), "tcp")
        drains: list[dict[str, Any]] = workload_kind("tbdrain").report_section(run, manifest, w)["drains"]
        assert len(drains) == REPETITIONS, drains
        for d in drains:
            assert d["drained"], d
            for q, key, scale in QUANTITIES:
                truth = exp[key] / scale
                lo_ci, hi_ci = d[f"{q}_ci_low"], d[f"{q}_ci_high"]
                ok = bool(lo_ci <= truth <= hi_ci)
                covered[q].append(ok)
                widths[q].append((hi_ci - lo_ci) / truth)
                print(f"{h}/{lo} {b} every {dt:5s}  {q:16s} {truth:8.3f} {d[q]:9.3f}  "
                      f"[{lo_ci:.3f}, {hi_ci:.3f}] {'' if ok else 'MISSED'}")
    for q, _, _ in QUANTITIES:
        ws = sorted(widths[q])
        print(f"{q}: covered {sum(covered[q])}/{len(covered[q])}, relative width "
              f"median {ws[len(ws) // 2]:.1%}, max {ws[-1]:.1%}")
    for q, _, _ in QUANTITIES:
        assert sum(covered[q]) >= 0.9 * len(covered[q]), (q, covered[q])
