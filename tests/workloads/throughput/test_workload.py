"""Throughput / tbdrain workloads without a testbed: spec, plan, worker commands, tables,
summaries and the report section (built from recorded worker records)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from cloudbench.analysis.throughput import cv_rmse
from cloudbench.core.cluster import HostAccess
from cloudbench.core.files import write_json_atomic
from cloudbench.core.topology import HostSpec
from cloudbench.errors import SpecError
from cloudbench.plan import make_plan
from cloudbench.spec.model import Spec
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import read_parquet, write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.workers import throughput as throughput_worker
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.tbdrain.params import TbDrainWorkload
from cloudbench.workloads.tbdrain.report import render as render_drains
from cloudbench.workloads.tbdrain.report import section as drain_section
from cloudbench.workloads.tbdrain.summaries import drain_summaries
from cloudbench.workloads.throughput.controller import (
    THROUGHPUT_SCHEMA,
    client_config,
    throughput_table,
)
from cloudbench.workloads.throughput.data import RunFacts, Transfer, trend_warnings
from cloudbench.workloads.throughput.params import UDP_SOCKET_BUFFER
from cloudbench.workloads.throughput.report import cv_rmse_rows, section
from cloudbench.workloads.throughput.summaries import throughput_summaries
from tests.paths import DATA as TESTS_DATA

DATA = TESTS_DATA / "tput"

SPEC = """\
name: tput
seed: 3
repetitions: 2
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: [a1, a2], vm_type: local.tb-small}
          r1-b:
            subnets:
              s2: {hosts: [b1]}
      r2:
        zones:
          r2-a:
            subnets:
              s3: {hosts: [c1]}
workloads:
  - kind: throughput
    name: tcp
    pairs: cross_zone
    direction: both
    duration: 5s
  - kind: throughput
    name: udp
    protocol: udp
    tool: iperf3
    udp_rate: 300mbit
    pairs: [[a1, c1], [c1, a1]]
  - kind: throughput
    name: onoff
    pairs: cross_region
    pattern: {send: 10s, pause: 30s}
    duration: 80s
  - kind: tbdrain
    pairs: [[a1, a2]]
    max_duration: 60s
    rest: 20s
"""


def spec() -> Spec:
    return parse_spec(SPEC, "tput.yaml")


def workload(name: str) -> Any:
    return spec().workload(name)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_one_trial_per_pair_and_the_planner_shuffles_them() -> None:
    s = spec()
    plan = make_plan(s)
    rep0 = plan.of_repetition(0)
    by_wl: dict[str, list[tuple[str, str]]] = {}
    for t in rep0:
        (pair,) = t.pairs
        assert t.hosts == pair
        by_wl.setdefault(t.workload, []).append(pair)
    # cross_zone in r1 between zones r1-a and r1-b, unordered because direction is both
    assert sorted(by_wl["tcp"]) == [("a1", "b1"), ("a2", "b1")]
    assert by_wl["udp"] == [("a1", "c1"), ("c1", "a1")]
    assert sorted(by_wl["onoff"]) == sorted(
        [(x, "c1") for x in ("a1", "a2", "b1")] + [("c1", x) for x in ("a1", "a2", "b1")])
    assert by_wl["tbdrain"] == [("a1", "a2")]
    assert [t.workload for t in rep0] != [t.workload for t in plan.of_repetition(1)]
    tcp = workload_kind("throughput")
    assert tcp.estimate_seconds(s.workload("tcp")) == pytest.approx(2 * (5 + 3))


def test_bursts_of_each_pattern() -> None:
    assert workload("tcp").bursts() == [{"seconds": 5.0, "stop": "time"}]
    onoff = workload("onoff").bursts()
    assert len(onoff) == 2 and onoff[0] == {"seconds": 10.0, "stop": "time", "pause_after_s": 30.0}
    assert [b["stop"] for b in workload("tbdrain").bursts()] == ["drain", "drain"]
    one = TbDrainWorkload.model_validate({"kind": "tbdrain"})
    assert len(one.bursts()) == 1


def _host(name: str, addr: str) -> HostAccess:
    return HostAccess(HostSpec(name, "netns", "r1", "r1-a", "s1", "local"), addr, addr,
                      workdir=f"/w/{name}")


def test_client_config_and_the_tool_command_lines() -> None:
    a, b = _host("a1", "198.18.1.10"), _host("c1", "198.18.3.10")
    udp = client_config(workload("udp"), a, b, "forward")
    assert udp["socket_buffer"] == UDP_SOCKET_BUFFER and udp["protocol"] == "udp"
    argv = throughput_worker.client_argv(udp, 10.0)
    assert argv[:3] == ["iperf3", "-c", "198.18.3.10"]
    assert "-u" in argv and argv[argv.index("-b") + 1] == "300000000"
    assert argv[argv.index("-w") + 1] == str(UDP_SOCKET_BUFFER) and "-R" not in argv
    tcp = client_config(workload("tcp"), a, b, "reverse")
    assert tcp["socket_buffer"] is None and tcp["reverse"]
    n = throughput_worker.client_argv(tcp, 2.5)
    assert n == ["nuttcp", "-P5000", "-p5001", "-i1", "-fparse", "-T2.5", "-r", "198.18.3.10"]
    udp_n = throughput_worker.client_argv({**udp, "tool": "nuttcp", "length": 1472, "streams": 4}, 3)
    assert {"-u", "-R300000", "-l1472", "-N4", "-w4096"} <= set(udp_n)
    i3 = throughput_worker.client_argv({**udp, "tool": "iperf3"}, 2.2)
    assert i3[i3.index("-t") + 1] == "3"  # iperf3 -t takes whole seconds
    drain = client_config(workload("tbdrain"), a, b, "forward")
    assert drain["drain"] == {"window_s": 10.0, "factor": 0.75}
    assert throughput_worker.server_argv({"tool": "nuttcp", "port": 5000}) == ["nuttcp", "-S", "--nofork",
                                                                 "-P5000", "-p5001"]


@pytest.mark.parametrize(
    ("old", "new", "needle", "words"),
    [
        ("pairs: [[a1, c1], [c1, a1]]", "pairs: [[a1, c1], [c1, zz]]", "[c1, zz]",
         "unknown host 'zz'"),
        ("pairs: [[a1, a2]]", "pairs: [[a1, a1]]", "[[a1, a1]]", "sends to itself"),
        ("pairs: cross_region", "pairs: cross_ocean", "cross_ocean", "cross_region"),
        ("pattern: {send: 10s, pause: 30s}", "pattern: {send: 10s, sleep: 30s}", "sleep",
         "sleep"),
        ("udp_rate: 300mbit", "udp_rate: 300 apples", "300 apples", "bad bit rate"),
        ("rest: 20s", "rest: soon", "rest: soon", "bad duration"),
    ],
)
def test_spec_errors_name_the_line(old: str, new: str, needle: str, words: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new)
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    assert info.value.line == line_of(text, needle), str(info.value)
    assert words in str(info.value)


def _records(tmp: Path) -> list[tuple[str, Path, str, str]]:
    return [("forward", DATA / "record_nuttcp_drain_tb_small.jsonl", "a1", "a2")]


def test_throughput_table_from_a_recorded_drain() -> None:
    table = throughput_table(_records(Path()), 0, "r000-t000-tbdrain", "nuttcp", "tcp")
    assert table.schema == THROUGHPUT_SCHEMA
    rows = table.to_pylist()
    assert {r["burst"] for r in rows} == {0, 1}
    for burst in (0, 1):
        b = [r for r in rows if r["burst"] == burst]
        assert all(x["t_end_us"] == pytest.approx(y["t_start_us"], abs=2) for x, y in itertools.pairwise(b))
    first_end = max(r["t_end_us"] for r in rows if r["burst"] == 0)
    second_start = min(r["t_start_us"] for r in rows if r["burst"] == 1)
    # data stopped flowing after the SIGINT (socket buffer drained), then a 5 s rest
    assert 4.5e6 < second_start - first_end < 5.1e6
    assert rows[0]["side"] == "receiver" and rows[-1]["derived"]


def wrap_record(tool_text: str) -> str:
    """A worker record holding one burst of recorded tool output."""
    lines = [{"type": "header", "schema": 1, "worker": "tput", "config": {"tool": "nuttcp"}},
             {"type": "start", "burst": 0, "attempt": 0, "t_ns": 1_000_000, "argv": ["nuttcp"]}]
    for i, text in enumerate(tool_text.splitlines()):
        lines.append({"type": "out", "burst": 0, "attempt": 0, "t_ns": 1_000_000_000 * (i + 1),
                      "text": text})
    lines.append({"type": "end", "burst": 0, "attempt": 0, "t_ns": 4_000_000_000,
                  "sent_until_ns": 4_000_000_000, "rc": 0, "stop": "time", "stderr": ""})
    return "".join(json.dumps(x) + "\n" for x in lines)


def fake_run(tmp: Path) -> RunDir:
    """A run directory as the runner leaves it: manifest + tbdrain and throughput files."""
    run = RunDir(tmp / "tput" / "20260101T000000Z-abcd")
    s = spec()
    labels = {h.name: h.labels() for h in s.topology()}
    shaping = {"profile": {"shaping": "token_bucket", "high_rate": 200e6, "low_rate": 50e6,
                           "budget": 75 * 2**20}}
    manifest = {
        "schema": formats.MANIFEST.current, "campaign": "tput", "run_id": run.run_id, "status": "complete",
        "spec": s.model_dump(mode="json"), "seed": 3,
        "repetitions": [{"index": 0, "stack": "abc123", "hosts": [
            {"name": n, "labels": lab, "facts": {"shaping": shaping if n.startswith("a") else None}}
            for n, lab in labels.items()]}],
        "trials": [{"id": "r000-t000-tbdrain", "repetition": 0, "workload": "tbdrain", "kind": "tbdrain",
                    "started_utc": "2026-01-01T00:00:00Z"},
                   {"id": "r000-t001-udp", "repetition": 0, "workload": "udp", "kind": "throughput",
                    "started_utc": "2026-01-01T00:01:00Z"}],
        "files": {},
    }
    (run.path / "tbdrain").mkdir(parents=True)
    (run.path / "udp").mkdir()
    write_json_atomic(run.manifest_path, manifest)
    table = throughput_table(_records(tmp), 0, "r000-t000-tbdrain", "nuttcp", "tcp")
    write_parquet(run.path / "tbdrain" / "r000-t000-tbdrain.parquet", table, kind="throughput")
    rec = tmp / "udp.jsonl"
    rec.write_text(wrap_record((DATA / "nuttcp_udp_cap.txt").read_text()))
    udp = throughput_table([("forward", rec, "a1", "c1")], 0, "r000-t001-udp", "nuttcp", "udp")
    write_parquet(run.path / "udp" / "r000-t001-udp.parquet", udp, kind="throughput")
    return run


def test_tbdrain_section_and_summaries(tmp_path: Path) -> None:
    run = fake_run(tmp_path)
    manifest = run.manifest()
    w = next(w for w in manifest.workloads() if w["name"] == "tbdrain")
    sec = drain_section(run, manifest, w)
    (d,) = sec["drains"]
    assert d["drained"] and d["vm_type"] == "local.tb-small"
    for key in ("high_mbps", "low_mbps", "time_to_empty_s", "budget_mbit", "refill_mbps"):
        assert d[key] == pytest.approx(d["expected_" + key], rel=0.05), key
        assert d[f"{key}_ci_low"] <= d[key] <= d[f"{key}_ci_high"]
    rows = drain_summaries(run, manifest, w)
    got = {r.metric: r.value for r in rows}
    assert set(got) == {"drained", "high_rate_mbps", "low_rate_mbps", "time_to_empty_s",
                        "budget_mbit", "refill_rate_mbps"}
    assert {r.group for r in rows} == {"a1>a2"} and {r.repetition for r in rows} == {0}
    console = Console(record=True, width=160)
    render_drains("tbdrain", sec, console)
    assert "configured" in console.export_text()


def test_throughput_summaries_and_section(tmp_path: Path) -> None:
    run = fake_run(tmp_path)
    manifest = run.manifest()
    w = next(w for w in manifest.workloads() if w["name"] == "udp")
    sec = section(run, manifest, w)
    (t,) = sec["trials"]
    assert t["group"] == "cross_region" and t["mean_mbps"] == pytest.approx(95.7, rel=0.01)
    assert t["loss_pct"] == pytest.approx(0.48712, rel=1e-3)  # nuttcp's own total
    rows = throughput_summaries(run, manifest, w)
    metrics = {(r.metric, r.group) for r in rows}
    assert ("throughput_mbps", "cross_region") in metrics and ("throughput_mbps", "a1>c1") in metrics
    assert ("loss_pct", "cross_region") in metrics
    assert all(r.run_id == run.run_id and r.workload == "udp" for r in rows)
    assert read_parquet(run.path / "udp" / "r000-t001-udp.parquet", kind="throughput").num_rows == 3


def _series(rep: int, trial: str, src: str, dst: str, mbps: float, n: int = 5) -> Transfer:
    t0 = np.arange(n, dtype=float)
    return Transfer(rep, trial, src, dst, "forward", "nuttcp", "tcp", "receiver",
                  np.zeros(n, dtype=np.int64), t0, t0 + 1, np.full(n, mbps * 1e6 / 8),
                  np.zeros(n), np.full(n, np.nan), np.full(n, np.nan))


def _facts(stacks: dict[int, str], starts: dict[str, str]) -> RunFacts:
    s = spec()
    labels = {h.name: h.labels() for h in s.topology()}
    return RunFacts(Manifest.model_validate({
        "campaign": "tput", "run_id": "x",
        "repetitions": [{"index": r, "stack": st, "hosts": [
            {"name": n, "labels": lab, "facts": {}} for n, lab in labels.items()]}
            for r, st in stacks.items()],
        "trials": [{"id": t, "repetition": int(t[1:4]), "workload": "tcp", "kind": "throughput",
                    "started_utc": u} for t, u in starts.items()],
    }))


def test_falling_trend_on_the_same_hosts_warns_and_fresh_hosts_do_not() -> None:
    means = [190.0, 160.0, 120.0, 90.0, 60.0]
    trials = [f"r{i:03d}-t000-tcp" for i in range(5)]
    starts = {t: f"2026-01-01T00:0{i}:00Z" for i, t in enumerate(trials)}
    series = [_series(i, t, "a1", "b1", m) for i, (t, m) in enumerate(zip(trials, means, strict=True))]
    same = trend_warnings(series, _facts({i: "stack0" for i in range(5)}, starts), "tcp")
    assert len(same) == 1 and "a1" in same[0] and "token bucket" in same[0]
    fresh = trend_warnings(series, _facts({i: f"stack{i}" for i in range(5)}, starts), "tcp")
    assert fresh == []
    # the trend follows the trials' start times, not the order the files were read in
    shuffled = trend_warnings(series[::-1], _facts({i: "stack0" for i in range(5)}, starts), "tcp")
    assert shuffled == same


def test_cv_rmse_between_zone_pairs_paired_by_repetition() -> None:
    # a1, a2 in zone r1-a; b1 in r1-b: zone pairs (r1-a→r1-b) and (r1-b→r1-a)
    x = [100.0, 110.0, 90.0]
    y = [100.0, 130.0, 90.0]
    series = [_series(r, f"r{r:03d}-t000", "a1", "b1", v) for r, v in enumerate(x)]
    series += [_series(r, f"r{r:03d}-t001", "b1", "a1", v) for r, v in enumerate(y)]
    (row,) = cv_rmse_rows(series, _facts({0: "s0", 1: "s1", 2: "s2"}, {}))
    assert row["method"] == "repetition means" and row["n"] == 3
    assert row["cv_rmse"] == pytest.approx(cv_rmse(x, y), rel=1e-9)
