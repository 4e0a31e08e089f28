"""Echo connection modes and a payload sweep on the testbed, end to end (spec → Parquet → summaries → report)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cloudbench.report.build import build_report
from cloudbench.report.figures import section_figures
from cloudbench.report.files import write_report
from cloudbench.runner import CampaignRunner
from cloudbench.store.parquet import read_parquet
from cloudbench.store.summaries import read_summaries
from cloudbench.workloads import parse_spec

from .test_run import stacks_left

pytestmark = pytest.mark.integration

SPEC = """
name: modes
seed: 3
repetitions: 1
rest: 0s
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: 2}
              s2: {hosts: 1}
workloads:
  - {kind: echo, name: hot, rate: 50, duration: 2s, warmup: 0s}
  - {kind: echo, name: warm, idle: 500ms, duration: 2s, warmup: 0s}
  - {kind: echo, name: cold, connection: per_round, rate: 10, timeout: 90ms, duration: 2s, warmup: 0s}
  - {kind: echo, name: sweep, payload: [64, 16KiB], rate: 20, duration: 1s, warmup: 0s}
"""


def table(run_path: Path, workload: str) -> list:
    return [read_parquet(p, kind="echo") for p in sorted((run_path / workload).glob("*.parquet"))]


def test_connection_modes_and_a_payload_sweep_on_the_testbed(tmp_path: Path) -> None:
    spec = parse_spec(SPEC, "modes.yaml")
    run = CampaignRunner(spec, "modes.yaml", tmp_path).execute()
    assert stacks_left(run) == []
    m = run.manifest()
    assert m.status == "complete", m.error
    assert run.verify() == []

    # cold: a handshake per row, timed apart from the echo; every server accepted a connection per round
    (cold,) = table(run.path, "cold")
    assert cold.num_rows == 3 * 3 * 20  # 3 senders × 3 peers (self-loop included) × 2 s at 10/s
    ok = ~cold.column("timeout").to_numpy(zero_copy_only=False)
    connect = cold.column("connect_ns").to_numpy(zero_copy_only=False)
    assert ok.mean() > 0.8
    assert np.isfinite(connect[ok].astype(float)).all()
    assert (connect[ok] > 0).all() and np.median(connect[ok]) < 10e6  # a handshake on a bridge: µs, not ms
    stats = next(t for t in m.trials if t.workload == "cold").stats
    assert all(s["connects"] >= 0.8 * 60 for s in stats.values()), stats

    # hot: persistent, no handshake in any row
    (hot,) = table(run.path, "hot")
    assert hot.column("connect_ns").null_count == hot.num_rows

    # warm: each peer every 500 ms (2 s → 4 rounds)
    (warm,) = table(run.path, "warm")
    src = np.array(warm.column("src").cast("string").to_pylist())
    dst = np.array(warm.column("dst").cast("string").to_pylist())
    send = warm.column("send_us").to_numpy()
    assert warm.num_rows == 3 * 3 * 4
    for s in set(src):
        for d in set(dst):
            gaps = np.diff(np.sort(send[(src == s) & (dst == d)])) / 1e6
            # on schedule; a late round is followed by one at most twice as fast, never a burst
            assert abs(float(np.median(gaps)) - 0.5) < 0.05 and (gaps > 0.2).all(), (s, d, gaps)

    # sweep: one trial per payload, recorded in the manifest and in the summaries' groups
    sweeps = sorted(t.sweep["payload"] for t in m.trials if t.workload == "sweep")
    assert sweeps == [64, 16384]
    groups = {r["group"] for r in read_summaries(run).to_pylist() if r["workload"] == "sweep"}
    assert {"same_subnet@payload=64", "same_subnet@payload=16384"} <= groups

    rep = build_report(run)
    hot_section = rep["workloads"]["hot"]
    modes = {r["workload"]: r["mode"] for r in hot_section["connection_modes"]}
    assert modes == {
        "hot": "persistent, every 20ms",
        "warm": "persistent, idle 500ms",
        "cold": "per_round, every 100ms",
        "sweep": "persistent, every 50ms",
    }
    assert rep["workloads"]["cold"]["connect"] and rep["workloads"]["sweep"]["sweep"]
    assert all(r["distribution"] for r in hot_section["modes"])
    written = write_report(run, rep)
    assert not any(p.suffix == ".png" for p in written)  # figures are the page's, under report/figures/
    assert "sweep-sweep-payload" in [p.name for p in section_figures("sweep", rep["workloads"]["sweep"])]
