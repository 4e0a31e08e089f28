"""The colocation audit: controller side.

One trial per repetition, on every selected host. A ``throughput.py serve`` server
starts on each host for the whole trial (stopped by PID in ``finally``); then
*probes* run one after another, chosen by
:class:`~cloudbench.analysis.colocation.AdaptiveAudit`: in each, every sender
runs ``throughput.py client`` at once (TCP, ``streams`` streams) to a distinct peer —
the next sender in host order, so each sender also receives one flow (a lone
sender sends to the first other host). The first probe is everyone at full
load; the rest find who shares a NIC. The clients' records are pulled, kept
under ``<workload>/raw/``, and parsed into one Parquet file per trial (kind
``colocation``): the throughput workload's interval rows (``throughput_table``)
plus ``probe`` int16, ``phase`` (full|split|pairs|verify|solo) and ``senders``
int16. A sender's rate in a probe is its mean over the report intervals after
the first (:mod:`.data`), which holds the few ms by which the senders' starts
differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from cloudbench.analysis.colocation import AdaptiveAudit
from cloudbench.core.blocks import Block
from cloudbench.core.cluster import HostAccess
from cloudbench.spec.model import Spec
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow
from cloudbench.workloads.base import PairSet, Trial, TrialContext, TrialOutcome, WorkloadKind, ticking
from cloudbench.workloads.colocation import report
from cloudbench.workloads.colocation.data import (
    PARQUET_KIND,
    nominal_rate,
    probe_rates,
    with_probe_columns,
)
from cloudbench.workloads.colocation.params import ColocationWorkload
from cloudbench.workloads.colocation.summaries import COLOCATION_BETTER, colocation_summaries
from cloudbench.workloads.throughput.controller import (
    OVERHEAD_S,
    run_client,
    start_server,
    stop_server,
    throughput_table,
)

PROBE_OVERHEAD_S = 1.5  # configs, SSH commands, pulls per probe


def ring(senders: list[str], hosts: list[str]) -> list[tuple[str, str]]:
    """(sender, receiver) of a probe: each sender to the next, a lone one to another host."""
    if len(senders) == 1:
        other = next(h for h in hosts if h != senders[0])
        return [(senders[0], other)]
    return [(s, senders[(i + 1) % len(senders)]) for i, s in enumerate(senders)]


class ColocationKind(WorkloadKind):
    """The ``colocation`` workload kind: the shared-NIC audit of hosts that may share a machine."""
    kind = "colocation"
    better = COLOCATION_BETTER
    params = ColocationWorkload
    worker_files = ("throughput.py",)
    report_tables = report.TABLES

    def expand(self, params: ColocationWorkload, spec: Spec) -> list[PairSet]:
        hosts = spec.resolve_hosts(params.hosts)
        return [(tuple(hosts), tuple(ring(hosts, hosts)))]

    def estimate_seconds(self, params: ColocationWorkload) -> float:
        # the plan does not know the host count here: budget for max_probes probes
        probes = params.max_probes - 1 if params.interference else 0
        return (OVERHEAD_S + params.duration + PROBE_OVERHEAD_S
                + probes * (params.probe + PROBE_OVERHEAD_S))

    def estimate_bytes(self, params: ColocationWorkload, trial: Trial) -> Mapping[tuple[str, str], float] | None:
        return None  # rates are what the audit measures; no estimate before it

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        return colocation_summaries(run, manifest, params)

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        return report.section(run, manifest, params)

    def section_views(self, name: str, section: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
        return report.views(name, section)

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        w: ColocationWorkload = ctx.params
        names = list(ctx.trial.hosts)
        hosts = {n: ctx.cluster.host(n) for n in names}
        nominal = {n: nominal_rate(h.spec.vm_type, h.spec.provider, h.facts.get("shaping"),
                                   w.nominal) for n, h in hosts.items()}
        audit = AdaptiveAudit(names, nominal, w.threshold, w.max_probes if w.interference else 1,
                              classes={n: h.spec.vm_type for n, h in hosts.items()})
        tag = ctx.trial.id
        outcome = TrialOutcome()
        servers = await ctx.remote.fan_out(lambda h: start_server(ctx, h, w.tool, w.port, tag),
                                           hosts.values())
        started = {r.host: int(r.value["pid"]) for r in outcome.succeeded(servers)}
        parts: list[pa.Table] = []
        try:
            if len(started) == len(names):
                await self._probes(ctx, w, audit, hosts, parts, outcome)
        finally:
            outcome.succeeded(await ctx.remote.fan_out(
                lambda h: stop_server(ctx, h, started[h.name], w.port), [hosts[n] for n in started]))
        if parts:
            table = pa.concat_tables(parts).combine_chunks()
            rel = f"{w.name}/{tag}.parquet"
            dest = ctx.run.path / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            outcome.files[rel] = write_parquet(dest, table, kind=PARQUET_KIND)
            outcome.rows = table.num_rows
        inf = audit.inference() if audit.probes else None
        outcome.stats["probes"] = len(audit.probes)
        if inf is not None:
            outcome.stats["groups"] = [list(g) for g in inf.groups if len(g) > 1]
            outcome.stats["undetermined"] = len(inf.undetermined)
        return outcome

    async def _probes(self, ctx: TrialContext, w: ColocationWorkload, audit: AdaptiveAudit,
                      hosts: dict[str, HostAccess], parts: list[pa.Table],
                      outcome: TrialOutcome) -> None:
        names = list(hosts)
        tag = ctx.trial.id
        while (nxt := audit.next_probe()) is not None:
            phase, members = nxt
            index = len(audit.probes)
            senders = [n for n in names if n in members]
            seconds = w.probe_seconds(phase)
            dst_of = dict(ring(senders, names))  # one flow per sender

            async def one(h: HostAccess, index: int = index, seconds: float = seconds,
                          dst_of: dict[str, str] = dst_of) -> tuple[Path, dict[str, Any]]:
                cfg = {"schema": formats.THROUGHPUT_RECORD.current, "host": h.name,
                       "target": hosts[dst_of[h.name]].address, "source": h.address,
                       **w.tool_config(seconds)}
                stem = f"{tag}-p{index:03d}-{h.name}"
                local = ctx.run.path / w.name / "raw" / f"{stem}.jsonl"
                return await run_client(ctx, h, cfg, stem, local, seconds)

            async with ticking(ctx, f"probe {index + 1} ({phase}, {len(senders)} senders) ",
                               seconds):
                got = await ctx.remote.fan_out(one, [hosts[s] for s in dst_of])
            records: list[tuple[str, Path, str, str]] = []
            for r in outcome.succeeded(got):
                path, summary = r.value
                records.append(("forward", path, r.host, dst_of[r.host]))
                outcome.files[str(path.relative_to(ctx.run.path))] = summary["sha256"]
            if len(records) < len(dst_of):
                # a probe with a sender missing says nothing reliable; keep what we have
                outcome.stats["stopped"] = f"probe {index + 1}: a sender failed"
                return
            table = with_probe_columns(
                throughput_table(records, ctx.trial.repetition, tag, w.tool, "tcp"),
                index, phase, len(senders))
            rates = probe_rates(table)
            missing = [s for s in senders if s not in rates]
            if missing:
                outcome.stats["stopped"] = (f"probe {index + 1}: no rate from "
                                            f"{', '.join(missing)}")
                return
            parts.append(table)
            audit.record(senders, rates, phase)
