"""All-pairs TCP echo RTT: controller side (configs, launch, pull, Parquet, summaries).

Every host of the trial runs ``workers/echo.py``: an echo server and a sender
that, in rounds at ``rate``/s, sends to every peer (itself included through a real
socket unless ``self_loop: false``). The raw per-host files are pulled back,
checked against the checksum the worker printed, and merged into one Parquet
file per trial, in the layout of :mod:`cloudbench.workloads.echo.schema`.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cloudbench.core.blocks import Block
from cloudbench.core.cluster import HostAccess
from cloudbench.core.files import is_disk_full, sha256_file
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import DISK_FULL_REASON, DiskFullError, RemoteError, RemoteFailure, ResultError
from cloudbench.spec.model import Spec
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import ParquetStream, read_parquet_rows
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow
from cloudbench.workloads.base import (
    PairSet,
    Trial,
    TrialContext,
    TrialOutcome,
    WorkloadKind,
    sweep_product,
    ticking,
    trial_params,
)
from cloudbench.workloads.echo import report, sweeps, views
from cloudbench.workloads.echo.params import SWEPT, EchoWorkload
from cloudbench.workloads.echo.reader import FLAG_CONN_LOST, FLAG_TIMEOUT, FLAG_WARMUP, EchoFile, open_echo_file
from cloudbench.workloads.echo.schema import ECHO_SCHEMA, ENCODINGS, ZSTD_LEVEL, echo_schema_metadata
from cloudbench.workloads.echo.summaries import ECHO_BETTER

CONNECT_TIMEOUT_S = 10.0
LINGER_S = 3.0

# Bytes on disk per observation, for the plan's disk estimate (cloudbench.space): the worker's
# record (schema 2, exact) and the Parquet row: measured 3.53-3.81 B/row on quickstart trials
# (473,821 to 512,380 B for 134,400 rows; more jitter compresses worse), 3.45 B/row on
# bench_scale's StormCloud-size file, 4.27 B/row on 3,960-row trials of a loaded testbed
# (tests/integration/test_disk_full.py, which checks the estimate bounds what a run keeps).
RAW_BYTES_PER_RECORD = 32
PARQUET_BYTES_PER_ROW = 4.5
PARQUET_FILE_BYTES = 7_000  # schema, metadata, dictionaries and footer: 6,861 B for a 44-row trial


class EchoKind(WorkloadKind):
    """``kind: echo``: all-pairs TCP echo RTT, run by ``workers/echo.py`` on every host of a trial."""

    kind = "echo"
    better = ECHO_BETTER
    params = EchoWorkload
    worker_files = ("echo.py", "echo_connections.py", "echo_protocol.py")
    report_tables = (*report.TABLES, *views.TABLES)

    def expand(self, params: EchoWorkload, spec: Spec) -> list[PairSet]:
        hosts = tuple(spec.resolve_hosts(params.hosts))
        pairs = tuple((a, b) for a in hosts for b in hosts if params.self_loop or a != b)
        return [(hosts, pairs)]

    def sweep(self, params: EchoWorkload) -> list[dict[str, Any]]:
        return sweep_product(params, SWEPT)

    def estimate_seconds(self, params: EchoWorkload) -> float:
        return params.warmup + params.duration + params.timeout + 1.0

    def estimate_disk(self, params: EchoWorkload, trial: Trial) -> tuple[float, float]:
        # One record per (sender, peer, round), warm-up rounds included.
        rows = len(trial.pairs) * params.one_rate() * (params.warmup + params.duration)
        return rows * RAW_BYTES_PER_RECORD, rows * PARQUET_BYTES_PER_ROW + PARQUET_FILE_BYTES

    def estimate_bytes(self, params: EchoWorkload, trial: Trial) -> dict[tuple[str, str], float]:
        # One payload out and one echoed back per round, for every ordered pair.
        params = trial_params(params, trial) if isinstance(params.payload, list) or isinstance(
            params.rate, list) else params
        each_way = params.one_rate() * params.one_payload() * (params.duration + params.warmup)
        out: dict[tuple[str, str], float] = {}
        for a, b in trial.pairs:
            if a != b:
                out[(a, b)] = out.get((a, b), 0.0) + each_way
                out[(b, a)] = out.get((b, a), 0.0) + each_way
        return out

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        w: EchoWorkload = ctx.params
        hosts = [ctx.cluster.host(n) for n in ctx.trial.hosts]
        ids = {h.name: i for i, h in enumerate(hosts)}
        outcome = TrialOutcome()
        tag = ctx.trial.id

        def config(h: HostAccess) -> dict[str, Any]:
            peers = [
                {"id": ids[p.name], "name": p.name, "addr": p.address, "port": w.port}
                for p in hosts
                if w.self_loop or p.name != h.name
            ]
            return {
                "schema": formats.ECHO_RAW.current, "host": h.name, "host_id": ids[h.name], "listen": h.address,
                "port": w.port, "token": ctx.token, "peers": peers, "rate": w.one_rate(),
                "payload": w.one_payload(), "duration_s": w.duration, "warmup_s": w.warmup,
                "timeout_s": w.timeout, "connect_timeout_s": CONNECT_TIMEOUT_S, "linger_s": LINGER_S,
                "rx_stamp": w.rx_timestamp, "connection": w.connection, "idle_s": w.idle or 0.0,
            }

        limit = CONNECT_TIMEOUT_S + w.warmup + w.duration + w.timeout + LINGER_S + 30.0

        async def one(h: HostAccess) -> dict[str, Any]:
            cfg = f"{h.workdir}/{tag}.json"
            out = f"{h.workdir}/{tag}.bin"
            await ctx.remote.write_text(h, cfg, json.dumps(config(h)))
            cmd = (f"cd {shlex.quote(h.workdir)} && exec {h.python} echo.py run "
                   f"{shlex.quote(cfg)} {shlex.quote(out)}")
            r = await ctx.remote.run(h, cmd, timeout=limit, check=False)
            try:
                summary: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError) as e:
                raise RemoteError(RemoteFailure(h.name, cmd, r.exit_code, r.stderr[-2000:],
                                                "worker printed no summary line")) from e
            # A worker that printed its summary has flushed its rows, whatever its exit
            # code (e.g. 3 when interrupted): pull them, and report the exit as well.
            local = Path(ctx.run.path) / "raw" / f"{tag}-{h.name}.bin"
            await ctx.remote.get(h, out, local, sha256=summary.get("sha256"))
            summary["local"] = str(local)
            summary["exit_code"] = r.exit_code
            summary["stderr_tail"] = r.stderr[-2000:]
            summary["command"] = cmd
            return summary

        async with ticking(ctx, "", limit - 30):
            results = await ctx.remote.fan_out(one, hosts)
        if any(r.failure is not None and r.failure.reason == DISK_FULL_REASON for r in results):
            # A host's rows could not be pulled: the trial has no complete data and runs again.
            raise DiskFullError(str(ctx.run.path / "raw"), f"pulling the workers' files of trial {tag}: "
                                f"{DISK_FULL_REASON} (the trial runs again on resume)")
        opened: list[tuple[str, EchoFile]] = []
        kept: dict[str, str] = {}
        for r in outcome.succeeded(results):
            info = r.value
            local = Path(info.pop("local"))
            cmd, tail = info.pop("command"), info.pop("stderr_tail")
            try:
                opened.append((r.host, open_echo_file(local)))
            except ResultError as e:  # one bad file costs that host only
                outcome.failures.append(RemoteFailure(r.host, cmd, info["exit_code"], tail, str(e)))
                continue
            kept[str(local.relative_to(ctx.run.path))] = str(info.get("sha256") or sha256_file(local))
            if info["exit_code"] != 0:
                outcome.failures.append(RemoteFailure(
                    r.host, cmd, info["exit_code"], tail, "worker exited early; its rows are kept"))
            outcome.stats[r.host] = info
        try:
            self._ingest(ctx.run, ctx.cluster.topology.hosts, ctx.trial, w.name, opened, outcome)
        except OSError as e:
            if not is_disk_full(e):
                raise
            full = DiskFullError(str(ctx.run.path / w.name / f"{tag}.parquet"),
                                 f"ingesting trial {tag}: {DISK_FULL_REASON}", kept=kept)
            full.outcome = outcome
            raise full from None
        return outcome

    def ingest(self, run: RunDir, spec: Spec, trial: Trial, raw: Mapping[str, str],
               stats: dict[str, Any]) -> TrialOutcome:
        outcome = TrialOutcome(stats=dict(stats))
        hosts = {Path(rel).stem.removeprefix(f"{trial.id}-"): rel for rel in raw}
        order = sorted(hosts, key=lambda h: (trial.hosts.index(h) if h in trial.hosts else len(trial.hosts), h))
        opened = [(h, open_echo_file(run.path / hosts[h])) for h in order]  # the order a live run ingests
        self._ingest(run, spec.topology().hosts, trial, trial.workload, opened, outcome)
        return outcome

    @staticmethod
    def _ingest(run: RunDir, topology_hosts: Any, trial: Trial, workload: str,
                opened: list[tuple[str, EchoFile]], outcome: TrialOutcome) -> None:
        """The pulled files of ``trial`` into its Parquet file; the raw files go once it holds every row."""
        if not opened:
            return
        tag = trial.id
        ids = {name: i for i, name in enumerate(trial.hosts)}
        rel = f"{workload}/{tag}.parquet"
        dest = run.path / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        names = {i: n for n, i in ids.items()}
        t0_utc = {host: int(f.header["t0_utc_ns"]) // 1000 for host, f in opened if "t0_utc_ns" in f.header}
        meta = echo_schema_metadata(t0_utc, run.run_id, tag)
        labels = {h.name: h for h in topology_hosts}
        with ParquetStream(dest, ECHO_SCHEMA.with_metadata(meta), "echo", ZSTD_LEVEL, **ENCODINGS) as out:
            for host, f in opened:  # host by host, chunk by chunk: memory bounded by a chunk
                for chunk in f.chunks():
                    out.write(echo_host_table(host, int(f.header["t0_ns"]), chunk, names,
                                              trial.repetition, run_id=run.run_id, trial=tag,
                                              labels=labels))
        outcome.files[rel] = out.sha256
        outcome.rows = out.rows
        # The raw files go only once the Parquet file is on disk and holds every row.
        expected, written = sum(f.records for _, f in opened), read_parquet_rows(dest)
        if written == out.rows == expected:
            for _, f in opened:
                f.path.unlink(missing_ok=True)
        else:
            outcome.failures.append(RemoteFailure(
                "*", f"ingest {rel}", None, "", f"the Parquet file holds {written} rows, the workers' "
                f"files {expected}; the raw files are kept under raw/"))

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        return sweeps.stratified(run, manifest, params)

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        return report.section(run, manifest, params)

    def section_views(self, name: str, section: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
        return report.views(name, section, options)


def echo_host_table(host: str, t0_ns: int, rec: np.ndarray, names: Mapping[int, str], repetition: int,
                    *, run_id: str = "", trial: str = "", labels: Mapping[str, HostSpec] | None = None) -> pa.Table:
    """One host's records (any order) as rows of :data:`ECHO_SCHEMA`, sorted by (dst, round).

    Vectorised: host names enter only as the dictionaries of ``src`` and ``dst``
    (the campaign's names in id order, then ``#<id>`` for peer ids it does not know);
    the latency group of each peer (from ``labels``; empty where a host is unknown)
    is computed once per peer and broadcast.
    """
    ids = np.array(sorted(names), dtype=np.int64)
    order = np.lexsort((rec["round"], rec["peer"]))
    rec = rec[order]
    peer = rec["peer"].astype(np.int64)
    pos = np.searchsorted(ids, peer)
    known = ids[np.minimum(pos, len(ids) - 1)] == peer if len(ids) else np.zeros(len(peer), dtype=bool)
    unknown = np.unique(peer[~known])
    names_list = [names[int(i)] for i in ids] + [f"#{int(p)}" for p in unknown]
    if host not in names_list:
        names_list.append(host)
    dictionary = pa.array(names_list, pa.string())
    dst = np.where(known, pos, len(ids) + np.searchsorted(unknown, peer)).astype(np.int16)
    src = np.full(len(rec), names_list.index(host), dtype=np.int16)
    labels = labels or {}
    me = labels.get(host)
    groups = [GROUP_ORDER.index(classify_pair(me, labels[n])) if me is not None and n in labels else len(GROUP_ORDER)
              for n in names_list]
    group_names = pa.array([g.value for g in GROUP_ORDER] + [""], pa.string())
    timeout = (rec["flags"] & FLAG_TIMEOUT) != 0
    rtt = rec["recv_ns"].astype(np.int64) - rec["send_ns"].astype(np.int64)
    n = len(rec)
    names_of = rec.dtype.names or ()
    connect = rec["connect_ns"].astype(np.int64) if "connect_ns" in names_of else np.full(n, -1, dtype=np.int64)
    arrays = [
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int16)), pa.array([run_id], pa.string())),
        pa.array(np.full(n, repetition, dtype=np.int16)),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int16)), pa.array([trial], pa.string())),
        pa.array(rec["round"].astype(np.int32)),
        pa.DictionaryArray.from_arrays(pa.array(src), dictionary),
        pa.DictionaryArray.from_arrays(pa.array(dst), dictionary),
        pa.DictionaryArray.from_arrays(pa.array(np.asarray(groups, dtype=np.int8)[dst]), group_names),
        pa.array((rec["send_ns"].astype(np.int64) - t0_ns) // 1000),
        pa.array(np.where(timeout, 0, np.maximum(rtt, 0)), mask=timeout),
        pa.array(timeout),
        pa.array((rec["flags"] & FLAG_WARMUP) != 0),
        pa.array((rec["flags"] & FLAG_CONN_LOST) != 0),
        pa.array(connect, mask=connect < 0),
    ]
    return pa.Table.from_arrays(arrays, schema=ECHO_SCHEMA)


def echo_table(parts: list[tuple[str, dict[str, Any], np.ndarray]], names: Mapping[int, str],
               repetition: int, labels: Mapping[str, HostSpec] | None = None) -> pa.Table:
    """Per-host worker records merged into one table, sorted by (src, dst, round) (small trials, tests)."""
    tables = [echo_host_table(host, int(header["t0_ns"]), rec, names, repetition, labels=labels)
              for host, header, rec in parts]
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()
