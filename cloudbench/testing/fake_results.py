"""Synthetic result directories: a manifest and ``summaries.parquet`` per run.

Tests and benchmarks of the repetition analysis build campaigns with known
values and known metadata here instead of running workloads::

    root = make_campaign(tmp_path, "demo", [FakeRun({("rtt_p50_us", "same_zone"): values})])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.core.files import utc_stamp
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.spec.vmtypes import BUILTIN_VM_TYPES
from cloudbench.store import formats
from cloudbench.store.manifest import (
    HostRecord,
    Manifest,
    RepetitionRecord,
    ResolvedMetadata,
    TrialRecord,
    save_manifest,
)
from cloudbench.store.parquet import ParquetStream
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import summary_row, write_summaries
from cloudbench.workers.echo_protocol import FLAG_TIMEOUT, FLAG_WARMUP
from cloudbench.workloads import workload_kind
from cloudbench.workloads.echo.controller import echo_host_table
from cloudbench.workloads.echo.schema import ECHO_SCHEMA, ENCODINGS, echo_schema_metadata

_BASE_TIME = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)


@dataclass
class FakeRun:
    """One run: per (metric, group) one value per repetition, plus host labels.

    The run has as many repetitions as the longest series; a shorter series, or
    ``None`` in it, leaves those repetitions without a summary row.
    ``rep_labels`` overrides labels of chosen repetitions (index -> labels), to
    build campaigns whose metadata differ between repetitions.

    The manifest has the current schema with the resolved values a runner records:
    ``vm_type_definition`` (default: the built-in profile of ``vm_type``, None for a
    name the testbed does not know), ``wan`` and ``workloads`` as given, and one trial
    per repetition and entry of ``sweeps`` (the swept values it ran). ``schema=1``
    writes a manifest of schema 1, which records no resolved values.
    """

    values: Mapping[tuple[str, str], Sequence[float | None]]
    workload: str = "echo"
    unit: str = "us"
    provider: str = "netns"
    regions: Sequence[str] = ("r1",)
    zones_per_region: int = 2
    vm_type: str = "local"
    worker_version: str = "1"
    workloads: Sequence[Mapping[str, Any]] = ({"name": "echo", "kind": "echo", "rate": 100},)
    rep_labels: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    status: str = "complete"
    run_id: str | None = None
    schedule: Mapping[str, Any] | None = None  # the spec's `schedule:` (a scheduled campaign's run)
    vm_type_definition: Mapping[str, Any] | None = None
    wan: Mapping[str, Any] | None = None
    sweeps: Sequence[Mapping[str, Any]] = ()
    schema: int = formats.MANIFEST.current

    @property
    def repetitions(self) -> int:
        return max((len(v) for v in self.values.values()), default=0)


def _hosts(run: FakeRun, repetition: int) -> list[dict[str, Any]]:
    hosts = []
    octet = 10
    for region in run.regions:
        for z in range(run.zones_per_region):
            labels = {
                "provider": run.provider,
                "region": region,
                "zone": f"{region}-{chr(ord('a') + z)}",
                "subnet": f"s{z + 1}",
                "vm_type": run.vm_type,
            }
            labels.update(run.rep_labels.get(repetition, {}))
            hosts.append({"name": f"{labels['zone']}-1", "labels": labels,
                          "address": f"198.18.{z + 1}.{octet}"})
            octet += 1
    return hosts


def write_run(campaign_dir: Path, run: FakeRun, index: int = 0, seed: int = 0) -> RunDir:
    """Write one run directory (manifest + summaries) under ``campaign_dir``."""
    start = _BASE_TIME + timedelta(hours=index)
    run_id = run.run_id or f"{start:%Y%m%dT%H%M%SZ}-{index:04x}"
    rd = RunDir(Path(campaign_dir) / run_id)
    rd.path.mkdir(parents=True, exist_ok=True)
    reps = run.repetitions
    rows = [
        summary_row(rd, r, run.workload, metric, group, float(value), run.unit, 1000)
        for (metric, group), vals in run.values.items()
        for r, value in enumerate(vals)
        if value is not None
    ]
    digest = write_summaries(rd, rows)
    rep_minutes = 5
    resolved = None
    if run.schema >= 2:
        builtin = BUILTIN_VM_TYPES.get(run.vm_type)
        definition = (dict(run.vm_type_definition) if run.vm_type_definition is not None
                      else None if builtin is None else builtin.model_dump(mode="json"))
        resolved = ResolvedMetadata(vm_types={run.vm_type: definition},
                                    wan=None if run.wan is None else dict(run.wan),
                                    workloads=[dict(w) for w in run.workloads])
    trials = [TrialRecord(id=f"r{r:03d}-t{i:03d}-{run.workload}", repetition=r, workload=run.workload,
                          kind=run.workload, status="ok", sweep=dict(sw))
              for r in range(reps) for i, sw in enumerate(run.sweeps)]
    manifest = Manifest(
        schema=run.schema,
        resolved=resolved,
        trials=trials,
        campaign=Path(campaign_dir).name,
        run_id=run_id,
        status=run.status,
        spec={"name": Path(campaign_dir).name, "workloads": [dict(w) for w in run.workloads],
              **({"schedule": dict(run.schedule)} if run.schedule is not None else {})},
        seed=seed,
        worker_version=run.worker_version,
        started_utc=utc_stamp(start, micro=True),
        ended_utc=utc_stamp(start + timedelta(minutes=rep_minutes * reps), micro=True),
        repetitions=[
            RepetitionRecord.model_validate({
                "index": r,
                "started_utc": utc_stamp(start + timedelta(minutes=rep_minutes * r), micro=True),
                "ended_utc": utc_stamp(start + timedelta(minutes=rep_minutes * (r + 1)), micro=True),
                "hosts": _hosts(run, r),
            })
            for r in range(reps)
        ],
        files={"summaries.parquet": digest},
    )
    save_manifest(rd.manifest_path, manifest)
    return rd


def make_campaign(root: Path, name: str, runs: Sequence[FakeRun], seed: int = 0) -> Path:
    """``root/name`` holding one directory per run, in order; returns the campaign dir."""
    campaign = Path(root) / name
    campaign.mkdir(parents=True, exist_ok=True)
    for i, run in enumerate(runs):
        write_run(campaign, run, index=i, seed=seed)
    return campaign


def normal_values(n: int, mean: float, cov: float, seed: int = 0) -> list[float]:
    """``n`` i.i.d. normal values with coefficient of variation ``cov``."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in rng.normal(mean, cov * mean, n)]


ECHO_TOPOLOGY: tuple[tuple[str, str, str, str], ...] = (
    # (host, region, zone, subnet): every latency group from self to cross-region
    ("a-1", "r1", "r1-a", "s1"), ("a-2", "r1", "r1-a", "s1"), ("a-3", "r1", "r1-a", "s2"),
    ("b-1", "r1", "r1-b", "s3"), ("c-1", "r2", "r2-a", "s4"), ("c-2", "r2", "r2-a", "s4"),
)


def write_echo_run(campaign_dir: Path, *, repetitions: int = 2, rounds: int = 2000, rate: float = 100.0,
                   warmup_rounds: int = 50, seed: int = 0, workload: str = "echo",
                   quorums: Sequence[Mapping[str, Any]] = ({"hosts": ["a-1", "a-2", "b-1", "c-1"], "k": [2, 3]},),
                   window: float = 2.0, step: tuple[str, str, int, float] | None = ("a-1", "c-1", 1200, 800.0),
                   hosts: Sequence[tuple[str, str, str, str]] = ECHO_TOPOLOGY, chunk_rounds: int = 700) -> RunDir:
    """A run of the echo workload with synthetic observations in today's Parquet layout.

    Every host sends ``rounds`` rounds to every host (itself included) at ``rate``;
    RTTs are lognormal with a median set by the pair's latency group, a slow tail
    (0.5 %), timeouts (0.3 %), rows missing (0.2 %: a connection lost), the first
    ``warmup_rounds`` flagged as warm-up, and ``step`` (src, dst, round, +µs): a
    level shift on one pair. Each host's records are ingested in chunks of
    ``chunk_rounds`` rounds as the controller ingests a worker's file.
    """
    rng = np.random.default_rng(seed)
    start = _BASE_TIME
    run_id = f"{start:%Y%m%dT%H%M%SZ}-e{seed:03x}"
    rd = RunDir(Path(campaign_dir) / run_id)
    (rd.path / workload).mkdir(parents=True, exist_ok=True)
    names = {i: h[0] for i, h in enumerate(hosts)}
    specs = [HostSpec(h, "netns", r, z, s, "local") for h, r, z, s in hosts]
    median_us = {g: 20.0 * (1 + 2 * i) for i, g in enumerate(GROUP_ORDER)}
    interval_ns = int(1e9 / rate)
    reps, trials, files = [], [], {}
    for rep in range(repetitions):
        t0 = 1_000_000_000_000 + rep * 10**12
        trial_id = f"r{rep:03d}-t00-{workload}"
        rel = f"{workload}/{trial_id}.parquet"
        meta = echo_schema_metadata({h[0]: 1_795_000_000_000_000 + rep * 600_000_000 + i * 1000
                                     for i, h in enumerate(hosts)}, run_id, trial_id)
        with ParquetStream(rd.path / rel, ECHO_SCHEMA.with_metadata(meta), "echo", 9, **ENCODINGS) as out:
            for src in specs:
                for c0 in range(0, rounds, chunk_rounds):
                    rnd = np.repeat(np.arange(c0, min(rounds, c0 + chunk_rounds), dtype=np.int64), len(hosts))
                    peer = np.tile(np.arange(len(hosts), dtype=np.int64), len(rnd) // len(hosts))
                    med = np.array([median_us[classify_pair(src, specs[p])] for p in peer])
                    rtt = rng.lognormal(np.log(med * 1000), 0.3)
                    rtt[rng.random(len(rnd)) < 0.005] += rng.uniform(2e6, 2e7, 1)[0]
                    if step is not None and src.name == step[0]:
                        rtt[(peer == _names_index(names, step[1])) & (rnd >= step[2])] += step[3] * 1000
                    # a round's sends leave back to back (5 µs apart), the round itself late by up to 1/4
                    lag = np.repeat(rng.integers(0, interval_ns // 4, len(rnd) // len(hosts)), len(hosts))
                    send = t0 + rnd * interval_ns + lag + peer * 5_000
                    timeout = rng.random(len(rnd)) < 0.003
                    keep = rng.random(len(rnd)) >= 0.002
                    rec = np.zeros(int(keep.sum()), dtype=[("round", "<u4"), ("peer", "<u2"), ("flags", "u1"),
                                                           ("send_ns", "<i8"), ("recv_ns", "<i8")])
                    rec["round"], rec["peer"], rec["send_ns"] = rnd[keep], peer[keep], send[keep]
                    rec["recv_ns"] = np.where(timeout, 0, send + rtt.astype(np.int64))[keep]
                    rec["flags"] = (np.where(timeout, FLAG_TIMEOUT, 0) | np.where(rnd < warmup_rounds, FLAG_WARMUP, 0)
                                    )[keep]
                    out.write(echo_host_table(src.name, t0, rec, names, rep, run_id=run_id, trial=trial_id,
                                              labels={h.name: h for h in specs}))
        files[rel] = out.sha256
        trials.append(TrialRecord(id=trial_id, repetition=rep, workload=workload, kind="echo",
                                  status="ok", rows=out.rows, files={rel: out.sha256},
                                  started_utc=utc_stamp(start + timedelta(minutes=10 * rep), micro=True)))
        reps.append(RepetitionRecord(index=rep, provider="netns", status="ok",
                                     hosts=[HostRecord(name=h.name, labels={
                                         "provider": h.provider, "region": h.region, "zone": h.zone,
                                         "subnet": h.subnet, "vm_type": h.vm_type}) for h in specs]))
    manifest = Manifest(campaign=Path(campaign_dir).name, run_id=run_id, status="complete",
                        spec={"name": Path(campaign_dir).name, "workloads": [
                            {"name": workload, "kind": "echo", "rate": rate, "window": window,
                             "quorums": [dict(q) for q in quorums]}]},
                        seed=seed, started_utc=utc_stamp(start, micro=True), repetitions=reps, trials=trials,
                        files=files)
    save_manifest(rd.manifest_path, manifest)

    rows = workload_kind("echo").summarize(rd, manifest, manifest.workloads()[0])
    manifest.files["summaries.parquet"] = write_summaries(rd, rows)
    save_manifest(rd.manifest_path, manifest)
    return rd


def _names_index(names: Mapping[int, str], name: str) -> int:
    return next(i for i, n in names.items() if n == name)
