"""MDA traceroute: controller side (configs, launch scamper, pull, Parquet, summaries).

Every source host runs ``workers/traceroute.py``, which runs one scamper
``tracelb`` per destination (concurrently, at ``pps`` probes per second) and
writes scamper's JSON. The raw files are pulled (checksummed) and kept under
``<workload>/raw/``; they are parsed into two tables per trial (layout in
:mod:`.data`).

On the testbed with a ``wan:`` section the provider's IP→AS table is saved as
``<workload>/asn-table.csv`` (CSV ``prefix,asn,name``).
"""

from __future__ import annotations

import csv
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudbench.core.blocks import Block
from cloudbench.core.cluster import HostAccess
from cloudbench.core.files import sha256_file
from cloudbench.errors import RemoteError, RemoteFailure, ResultError
from cloudbench.spec.model import Spec
from cloudbench.store import formats
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow
from cloudbench.workloads.base import PairSet, TrialContext, TrialOutcome, WorkloadKind
from cloudbench.workloads.traceroute import report
from cloudbench.workloads.traceroute.data import ASN_TABLE, LINKS_KIND, TRACES_KIND, trace_tables
from cloudbench.workloads.traceroute.params import TracerouteWorkload
from cloudbench.workloads.traceroute.reader import Trace, parse_output
from cloudbench.workloads.traceroute.report import PATH_TABLES
from cloudbench.workloads.traceroute.summaries import PATH_BETTER, path_summaries


class TracerouteKind(WorkloadKind):
    """The ``traceroute`` workload kind: the paths between pairs, traced by the traceroute worker."""
    kind = "traceroute"
    better = PATH_BETTER
    params = TracerouteWorkload
    report_tables = PATH_TABLES
    worker_files = ("traceroute.py",)

    def expand(self, params: TracerouteWorkload, spec: Spec) -> list[PairSet]:
        srcs = spec.resolve_hosts(params.sources)
        dsts = spec.resolve_hosts(params.destinations)
        pairs = tuple((s, d) for s in srcs for d in dsts if s != d)
        hosts = tuple(dict.fromkeys([*srcs, *dsts]))
        return [(hosts, pairs)] if pairs else []

    def estimate_seconds(self, params: TracerouteWorkload) -> float:
        # An MDA trace over ~8 hops with one diamond takes ~60 probes at wait_probe each.
        return min(params.limit, 60 * params.wait_probe + params.wait_timeout)

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        w: TracerouteWorkload = ctx.params
        tag = ctx.trial.id
        outcome = TrialOutcome()
        by_addr = {h.address: h.name for h in ctx.cluster.hosts}
        sources = list(dict.fromkeys(s for s, _ in ctx.trial.pairs))
        raw_dir = ctx.run.path / w.name / "raw"
        raw_dir.mkdir(parents=True, exist_ok=True)

        async def one(h: HostAccess) -> dict[str, Any]:
            dsts = [ctx.cluster.host(d).address for s, d in ctx.trial.pairs if s == h.name]
            cfg = {"schema": formats.TRACEROUTE_OUTPUT.current, "host": h.name, "destinations": dsts,
                   "method": w.method, "confidence": w.confidence, "gap_limit": w.gap_limit, "attempts": w.attempts,
                   "wait_probe_s": w.wait_probe, "wait_timeout_s": w.wait_timeout, "pps": w.pps,
                   "limit_s": w.limit}
            conf, out = f"{h.workdir}/{tag}-tr.json", f"{h.workdir}/{tag}-tr.out.json"
            await ctx.remote.write_text(h, conf, json.dumps(cfg))
            cmd = (f"cd {shlex.quote(h.workdir)} && exec {h.python} traceroute.py "
                   f"{shlex.quote(conf)} {shlex.quote(out)}")
            r = await ctx.remote.run(h, cmd, timeout=w.limit + 30.0, check=False)
            try:
                summary: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError) as e:
                raise RemoteError(RemoteFailure(h.name, cmd, r.exit_code, r.stderr[-2000:],
                                                "worker printed no summary line")) from e
            rel = f"{w.name}/raw/{tag}-{h.name}.json"
            summary["sha256_local"] = await ctx.remote.get(h, out, ctx.run.path / rel,
                                                           sha256=summary.get("sha256"))
            summary["rel"] = rel
            if r.exit_code != 0:
                summary["failure"] = RemoteFailure(h.name, cmd, r.exit_code, summary.get("stderr", ""),
                                                   "scamper failed")
            return summary

        results = await ctx.remote.fan_out(one, [ctx.cluster.host(s) for s in sources])
        traces: list[tuple[str, Trace]] = []
        for res in outcome.succeeded(results):
            s = res.value
            outcome.files[s["rel"]] = s["sha256_local"]
            if "failure" in s:
                outcome.failures.append(s.pop("failure"))
            outcome.stats[res.host] = {k: v for k, v in s.items() if k not in ("rel", "sha256_local")}
            try:  # the worker's summary carries the version of the output it wrote
                formats.TRACEROUTE_OUTPUT.check(s.get("schema"), s["rel"])
            except ResultError as e:  # kept on disk, not parsed: costs this source only
                outcome.failures.append(RemoteFailure(res.host, "traceroute.py", None, "", str(e)))
                continue
            with (ctx.run.path / s["rel"]).open() as f:
                traces += [(res.host, t) for t in parse_output(f)]
        rep = ctx.trial.repetition
        if traces:
            links, trs = trace_tables(traces, by_addr, rep)
            for sub, table, kind in (("links", links, LINKS_KIND), ("traces", trs, TRACES_KIND)):
                rel = f"{w.name}/{sub}/{tag}.parquet"
                dest = ctx.run.path / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                outcome.files[rel] = write_parquet(dest, table, kind=kind)
            outcome.rows = links.num_rows
        table_rows = ctx.cluster.facts.get("wan", {}).get("asn_table")
        if table_rows:
            rel = f"{w.name}/{ASN_TABLE}"
            path = ctx.run.path / rel
            with path.open("w", newline="") as f:
                csv.writer(f).writerows([("prefix", "asn", "name"), *table_rows])
            outcome.files[rel] = sha256_file(path)
        return outcome

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        return path_summaries(run, params["name"])

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        return report.section(run, manifest, params)

    def section_views(self, name: str, section: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
        return report.views(name, section)

    def write_figures(self, run: RunDir, name: str, section: dict[str, Any], out: Path) -> list[Path]:
        return report.write_figures(run, name, section, out)


