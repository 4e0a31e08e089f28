"""Throughput and token-bucket drain workloads: controller side.

One trial measures one pair (sender, receiver) and, with ``direction: both``,
both directions one after the other. For every trial cloudbench starts the
tool's server on the receiver (``workers/throughput.py serve``), runs the client on
the first host of the pair (``throughput.py client``; reverse is the tool's own
reverse mode, so connections always open from the pair's first host), and
stops the server by PID in ``finally``. The worker's record (the raw tool
output, line by line, with monotonic arrival times) is pulled back, checked
against the checksum the worker printed, kept under ``<workload>/raw/``, and
parsed into one Parquet file per trial (kind ``throughput``), one row per
report interval:

    repetition int16, trial, src, dst (data sender and receiver), direction,
    tool, protocol, side (where bytes were counted: receiver|sender) — dictionary
    strings; burst int16 (on/off burst or drain number); t_start_us, t_end_us int64
    (µs on the worker's monotonic clock since its record began; data time, so the
    gap between bursts is the real pause); bytes int64; rate_bps float64;
    retrans int32, lost int64, packets int64, loss_pct float64 (null when the tool
    does not report them); derived bool (the tail computed from nuttcp's total).

``tokenbucket`` uses the same worker and file format: burst 0 is the drain, burst 1
(optional) the second drain after ``rest``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from cloudbench.core.blocks import Block
from cloudbench.core.cluster import HostAccess
from cloudbench.core.pairs import select_pairs
from cloudbench.errors import RemoteError, RemoteFailure
from cloudbench.spec.model import Spec
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow
from cloudbench.workloads.base import PairSet, TrialContext, TrialOutcome, WorkloadKind, ticking
from cloudbench.workloads.throughput import report
from cloudbench.workloads.throughput.params import PairWorkloadModel, ThroughputWorkload
from cloudbench.workloads.throughput.reader import data_start_ns, parse_throughput_record, parse_tool
from cloudbench.workloads.throughput.summaries import THROUGHPUT_BETTER, throughput_summaries

# Beyond the measured time: server start, connections, pulls, the worker's slack.
OVERHEAD_S = 3.0
WORKER_SLACK_S = 20.0
SERVER_TIMEOUT_S = 20.0

THROUGHPUT_SCHEMA = pa.schema(
    [
        ("repetition", pa.int16()),
        ("trial", pa.dictionary(pa.int16(), pa.string())),
        ("src", pa.dictionary(pa.int16(), pa.string())),
        ("dst", pa.dictionary(pa.int16(), pa.string())),
        ("direction", pa.dictionary(pa.int8(), pa.string())),
        ("tool", pa.dictionary(pa.int8(), pa.string())),
        ("protocol", pa.dictionary(pa.int8(), pa.string())),
        ("side", pa.dictionary(pa.int8(), pa.string())),
        ("burst", pa.int16()),
        ("t_start_us", pa.int64()),
        ("t_end_us", pa.int64()),
        ("bytes", pa.int64()),
        ("rate_bps", pa.float64()),
        ("retrans", pa.int32()),
        ("lost", pa.int64()),
        ("packets", pa.int64()),
        ("loss_pct", pa.float64()),
        ("derived", pa.bool_()),
    ]
)
_DICT_COLS = ("trial", "src", "dst", "direction", "tool", "protocol", "side")

def directions(w: PairWorkloadModel) -> list[str]:
    """The directions a pair workload measures: forward, reverse or both."""
    return ["forward", "reverse"] if w.direction == "both" else [w.direction]


def client_config(w: PairWorkloadModel, client: HostAccess, server: HostAccess,
                  direction: str) -> dict[str, Any]:
    """The tput worker's client configuration for one pair and direction."""
    return {
        "schema": formats.THROUGHPUT_RECORD.current, "host": client.name, "tool": w.tool,
        "target": server.address, "source": client.address, "port": w.port,
        "interval_s": w.interval, "length": w.length, "streams": w.streams,
        "reverse": direction == "reverse", "bursts": w.bursts(), **w.tool_options(),
    }


def direction_seconds(w: PairWorkloadModel) -> float:
    """Upper bound of one direction's sending and pausing time."""
    return sum(float(b["seconds"]) + float(b.get("pause_after_s", 0.0)) for b in w.bursts())


class PairKind(WorkloadKind):
    """A workload that runs ``workers/throughput.py`` on one pair per trial (throughput, tokenbucket).

    A subclass names its spec model and the functions of its own ``summaries`` and
    ``report`` modules; the rest is shared.
    """

    worker_files = ("throughput.py",)
    summaries: Callable[[RunDir, Manifest, dict[str, Any]], list[SummaryRow]]
    section: Callable[[RunDir, Manifest, dict[str, Any]], dict[str, Any]]
    views: Callable[[str, dict[str, Any]], list[Block]]

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        return self.summaries(run, manifest, params)

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        return self.section(run, manifest, params)

    def section_views(self, name: str, section: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
        return self.views(name, section)

    def expand(self, params: PairWorkloadModel, spec: Spec) -> list[PairSet]:
        hosts = spec.resolve_hosts(params.hosts)
        pairs = select_pairs(spec.topology(), hosts, params.pairs,
                             unordered=params.direction == "both")
        return [((a, b), ((a, b),)) for a, b in pairs]

    def estimate_seconds(self, params: PairWorkloadModel) -> float:
        return len(directions(params)) * (direction_seconds(params) + OVERHEAD_S)

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        w: PairWorkloadModel = ctx.params
        (a, b), = ctx.trial.pairs
        client, server = ctx.cluster.host(a), ctx.cluster.host(b)
        tag = ctx.trial.id
        outcome = TrialOutcome()
        records: list[tuple[str, Path, str, str]] = []  # (direction, path, sender, receiver)
        srv = await start_server(ctx, server, w.tool, w.port, tag)
        outcome.stats["server"] = {k: v for k, v in srv.items() if k != "pid"}
        try:
            for d in directions(w):
                try:
                    path, summary = await self._direction(ctx, w, client, server, d, tag)
                except RemoteError as e:
                    outcome.failures.append(e.failure)
                    continue
                sender, receiver = (a, b) if d == "forward" else (b, a)
                records.append((d, path, sender, receiver))
                outcome.stats[d] = summary
                outcome.files[str(path.relative_to(ctx.run.path))] = summary["sha256"]
        finally:
            try:
                stopped = await stop_server(ctx, server, int(srv["pid"]), w.port)
                outcome.stats["server"]["stopped"] = stopped
            except RemoteError as e:
                outcome.failures.append(e.failure)
        if records:
            table = throughput_table(records, ctx.trial.repetition, tag, w.tool,
                                     w.tool_options()["protocol"])
            rel = f"{w.name}/{tag}.parquet"
            dest = ctx.run.path / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            outcome.files[rel] = write_parquet(dest, table, kind="throughput")
            outcome.rows = table.num_rows
        return outcome

    async def _direction(self, ctx: TrialContext, w: PairWorkloadModel, client: HostAccess,
                         server: HostAccess, direction: str,
                         tag: str) -> tuple[Path, dict[str, Any]]:
        cfg = client_config(w, client, server, direction)
        local = ctx.run.path / w.name / "raw" / f"{tag}-{direction}.jsonl"
        async with ticking(ctx, f"{direction} ", direction_seconds(w)):
            return await run_client(ctx, client, cfg, f"{tag}-{direction}", local,
                                    direction_seconds(w))


async def run_client(ctx: TrialContext, client: HostAccess, cfg: dict[str, Any], stem: str,
                     local: Path, seconds: float) -> tuple[Path, dict[str, Any]]:
    """Run ``throughput.py client`` with ``cfg`` on ``client`` and pull its record to ``local``.

    ``stem`` names the remote config and record; ``seconds`` is the sending and
    pausing time the bursts take (the command's time limit is twice that plus
    slack). Returns the local record and the worker's summary; raises RemoteError
    when the worker printed no summary or the tool failed in every burst.
    """
    remote_cfg = f"{client.workdir}/{stem}.json"
    remote_out = f"{client.workdir}/{stem}.jsonl"
    await ctx.remote.write_text(client, remote_cfg, json.dumps(cfg))
    cmd = (f"cd {shlex.quote(client.workdir)} && exec {client.python} throughput.py client "
           f"{shlex.quote(remote_cfg)} {shlex.quote(remote_out)}")
    limit = 2 * seconds + WORKER_SLACK_S * len(cfg["bursts"]) + 10.0
    r = await ctx.remote.run(client, cmd, timeout=limit)
    summary = last_json(r.stdout)
    if summary is None:
        raise RemoteError(RemoteFailure(client.name, cmd, r.exit_code, r.stderr[-2000:],
                                        "worker printed no summary line"))
    await ctx.remote.get(client, remote_out, local, sha256=summary.get("sha256"))
    failed = [x for x in summary.get("bursts", []) if x.get("stop") == "failed"]
    if failed and len(failed) == len(summary.get("bursts", [])):
        tail = parse_throughput_record(local.read_text(), str(local)).bursts
        err = tail[-1].stderr if tail else ""
        raise RemoteError(RemoteFailure(client.name, cmd, int(failed[-1].get("rc", -1)), err,
                                        f"{cfg['tool']} failed in every burst"))
    return local, summary


class ThroughputKind(PairKind):
    """The ``throughput`` workload kind: bulk transfers between pairs with nuttcp or iperf3."""
    kind = "throughput"
    better = THROUGHPUT_BETTER
    params = ThroughputWorkload
    report_tables = report.TABLES
    summaries = staticmethod(throughput_summaries)
    section = staticmethod(report.section)
    views = staticmethod(report.views)


async def start_server(ctx: TrialContext, host: HostAccess, tool: str, port: int,
                       tag: str) -> dict[str, Any]:
    """Start the tool's server on ``host`` through the tput worker; its reply names the pid."""
    cfg = {"tool": tool, "port": port, "listen": host.address,
           "log": f"{host.workdir}/{tag}-server.log"}
    path = f"{host.workdir}/{tag}-server.json"
    await ctx.remote.write_text(host, path, json.dumps(cfg))
    cmd = f"cd {shlex.quote(host.workdir)} && exec {host.python} throughput.py serve {shlex.quote(path)}"
    r = await ctx.remote.run(host, cmd, timeout=SERVER_TIMEOUT_S)
    info = last_json(r.stdout)
    if info is None or "pid" not in info:
        raise RemoteError(RemoteFailure(host.name, cmd, r.exit_code, r.stderr[-2000:],
                                        "server did not report its pid"))
    return info


async def stop_server(ctx: TrialContext, host: HostAccess, pid: int, port: int) -> dict[str, Any]:
    """Stop the tool's server that ``start_server`` started (the worker checks it is ours)."""
    cmd = f"cd {shlex.quote(host.workdir)} && exec {host.python} throughput.py stop {pid} {port}"
    r = await ctx.remote.run(host, cmd, timeout=SERVER_TIMEOUT_S)
    return last_json(r.stdout) or {}


def last_json(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object, or None."""
    for line in reversed(text.strip().splitlines()):
        try:
            v = json.loads(line)
        except json.JSONDecodeError:
            continue
        return v if isinstance(v, dict) else None
    return None


def throughput_table(records: list[tuple[str, Path, str, str]], repetition: int, trial: str,
                     tool: str, protocol: str) -> pa.Table:
    """Rows of every report interval of a trial's worker records (see the module doc)."""
    cols: dict[str, list[Any]] = {f.name: [] for f in THROUGHPUT_SCHEMA}
    for direction, path, sender, receiver in records:
        rec = parse_throughput_record(path.read_text(), str(path))
        for b in rec.bursts:
            run = parse_tool(tool, b.text, reverse=direction == "reverse")
            anchor = data_start_ns(b, run)
            for iv in run.intervals:
                cols["repetition"].append(repetition)
                cols["trial"].append(trial)
                cols["src"].append(sender)
                cols["dst"].append(receiver)
                cols["direction"].append(direction)
                cols["tool"].append(tool)
                cols["protocol"].append(protocol)
                cols["side"].append(run.side)
                cols["burst"].append(b.index)
                cols["t_start_us"].append((anchor + round(iv.start_s * 1e9)) // 1000)
                cols["t_end_us"].append((anchor + round(iv.end_s * 1e9)) // 1000)
                cols["bytes"].append(iv.bytes)
                cols["rate_bps"].append(iv.rate_bps)
                cols["retrans"].append(iv.retrans)
                cols["lost"].append(iv.lost)
                cols["packets"].append(iv.packets)
                cols["loss_pct"].append(iv.loss_pct)
                cols["derived"].append(iv.derived)
    arrays = []
    for f in THROUGHPUT_SCHEMA:
        if f.name in _DICT_COLS:
            arrays.append(pa.array(cols[f.name], pa.string()).dictionary_encode().cast(f.type))
        else:
            arrays.append(pa.array(cols[f.name], f.type))
    return pa.Table.from_arrays(arrays, schema=THROUGHPUT_SCHEMA)
