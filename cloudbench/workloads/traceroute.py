"""MDA traceroute: controller side (configs, launch scamper, pull, Parquet, summaries).

Every source host runs ``workers/traceroute.py``, which runs one scamper
``tracelb`` per destination (concurrently, at ``pps`` probes per second) and
writes scamper's JSON. The raw files are pulled (checksummed) and kept under
``<workload>/raw/``; they are parsed into two tables per trial:

    <workload>/links/<trial>.parquet   one row per MDA link:
        repetition int16, src, dst (host names), src_addr, dst_addr, method,
        from_node, to_node (addresses; anonymous hops ``*…``), ttl int16,
        probes int32, replies int32, rtt_min_us float64 (null: no reply timed)
    <workload>/traces/<trial>.parquet  one row per trace:
        repetition, src, dst, src_addr, dst_addr, method, confidence int16,
        start_s float64 (Unix time, scamper's clock), probes int32, nodes int32,
        reached bool, rtt_min_us float64 (destination's fastest reply)

On the testbed with a ``wan:`` section the provider's IP→AS table is saved as
``<workload>/asn-table.csv`` (CSV ``prefix,asn,name``).
"""

from __future__ import annotations

import csv
import json
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from cloudbench.analysis.paths import PathGraph, diamonds
from cloudbench.errors import RemoteError, RemoteFailure
from cloudbench.providers.base import HostAccess
from cloudbench.results import RunDir, read_parquet, sha256_file, write_parquet
from cloudbench.spec import Spec, TracerouteWorkload
from cloudbench.workloads.base import TrialContext, TrialOutcome
from cloudbench.workloads.scamper import Trace, parse_output

LINKS_KIND = "traceroute-links"
TRACES_KIND = "traceroute-traces"
ASN_TABLE = "asn-table.csv"
_STR = pa.dictionary(pa.int16(), pa.string())
LINKS_SCHEMA = pa.schema([
    ("repetition", pa.int16()), ("src", _STR), ("dst", _STR), ("src_addr", pa.string()),
    ("dst_addr", pa.string()), ("method", _STR), ("from_node", pa.string()), ("to_node", pa.string()),
    ("ttl", pa.int16()), ("probes", pa.int32()), ("replies", pa.int32()), ("rtt_min_us", pa.float64()),
])
TRACES_SCHEMA = pa.schema([
    ("repetition", pa.int16()), ("src", _STR), ("dst", _STR), ("src_addr", pa.string()),
    ("dst_addr", pa.string()), ("method", _STR), ("confidence", pa.int16()), ("start_s", pa.float64()),
    ("probes", pa.int32()), ("nodes", pa.int32()), ("reached", pa.bool_()), ("rtt_min_us", pa.float64()),
])


class TracerouteKind:
    kind = "traceroute"
    worker_files: tuple[str, ...] = ("traceroute.py",)

    def expand(self, params: TracerouteWorkload,
               spec: Spec) -> list[tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
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
            cfg = {"schema": 1, "host": h.name, "destinations": dsts, "method": w.method,
                   "confidence": w.confidence, "gap_limit": w.gap_limit, "attempts": w.attempts,
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

    def summarize(self, run: RunDir, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        return path_summaries(run, manifest)


def trace_tables(traces: list[tuple[str, Trace]], by_addr: dict[str, str],
                 repetition: int) -> tuple[pa.Table, pa.Table]:
    """The links and traces tables of one trial (schemas in the module docstring)."""
    links: dict[str, list[Any]] = {f.name: [] for f in LINKS_SCHEMA}
    trs: dict[str, list[Any]] = {f.name: [] for f in TRACES_SCHEMA}
    for src_host, t in traces:
        dst_host = by_addr.get(t.dst, t.dst)
        for e in t.edges:
            for k, v in (("repetition", repetition), ("src", src_host), ("dst", dst_host),
                         ("src_addr", t.src), ("dst_addr", t.dst), ("method", t.method),
                         ("from_node", e.src), ("to_node", e.dst), ("ttl", e.ttl),
                         ("probes", e.probes), ("replies", e.replies),
                         ("rtt_min_us", None if e.rtt_min_ms is None else e.rtt_min_ms * 1000.0)):
                links[k].append(v)
        rtt = t.dst_rtt_min_ms
        for k, v in (("repetition", repetition), ("src", src_host), ("dst", dst_host),
                     ("src_addr", t.src), ("dst_addr", t.dst), ("method", t.method),
                     ("confidence", t.confidence), ("start_s", t.start_s), ("probes", t.probes),
                     ("nodes", len(t.nodes)), ("reached", t.reached),
                     ("rtt_min_us", None if rtt is None else rtt * 1000.0)):
            trs[k].append(v)
    return (_table(links, LINKS_SCHEMA), _table(trs, TRACES_SCHEMA))


def _table(cols: dict[str, list[Any]], schema: pa.Schema) -> pa.Table:
    arrays = []
    for f in schema:
        if pa.types.is_dictionary(f.type):
            arrays.append(pa.array(cols[f.name], pa.string()).dictionary_encode().cast(f.type))
        else:
            arrays.append(pa.array(cols[f.name], f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def load_tables(run: RunDir, workload: str) -> tuple[pa.Table, pa.Table]:
    """All trials' links and traces of a traceroute workload (empty tables if none)."""
    def cat(sub: str, kind: str, schema: pa.Schema) -> pa.Table:
        files = sorted((run.path / workload / sub).glob("*.parquet"))
        if not files:
            return schema.empty_table()
        return pa.concat_tables([read_parquet(p, kind=kind).cast(schema) for p in files])

    return cat("links", LINKS_KIND, LINKS_SCHEMA), cat("traces", TRACES_KIND, TRACES_SCHEMA)


def asn_table_path(run: RunDir, workload: str, params: dict[str, Any]) -> Path | None:
    """The IP→AS table of a traceroute workload: the user's, else the testbed's, else none."""
    user = params.get("asn_table")
    if user:
        return Path(user)
    p = run.path / workload / ASN_TABLE
    return p if p.exists() else None


def graphs(run: RunDir, workload: str) -> dict[tuple[int, str, str], PathGraph]:
    """One MDA graph per (repetition, source host, destination host)."""
    links, _ = load_tables(run, workload)
    rows: dict[tuple[int, str, str], list[tuple[str, str, int, float | None]]] = defaultdict(list)
    ends: dict[tuple[int, str, str], tuple[str, str]] = {}
    cols = links.to_pydict()
    for i in range(links.num_rows):
        key = (int(cols["repetition"][i]), str(cols["src"][i]), str(cols["dst"][i]))
        ends[key] = (str(cols["src_addr"][i]), str(cols["dst_addr"][i]))
        rows[key].append((cols["from_node"][i], cols["to_node"][i], int(cols["ttl"][i]),
                          cols["rtt_min_us"][i]))
    return {k: PathGraph.from_rows(*ends[k], rows[k]) for k in sorted(rows)}


def path_summaries(run: RunDir, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-repetition values for ``cloudbench confirm``: hops, diamonds, width, min RTT per pair."""
    rows: list[dict[str, Any]] = []
    for w in manifest.get("spec", {}).get("workloads", []):
        if w.get("kind") != "traceroute":
            continue
        for (rep, src, dst), g in graphs(run, w["name"]).items():
            ds = diamonds(g)
            rtt = g.rtt_min_us.get(g.dst)
            values = [("path_hops", float(g.hop_count()), "1"), ("path_diamonds", float(len(ds)), "1"),
                      ("path_max_width", float(max((d.width for d in ds), default=1)), "1")]
            if rtt is not None:
                values.append(("path_rtt_min_us", rtt, "us"))
            for metric, value, unit in values:
                rows.append({"run_id": run.run_id, "repetition": rep, "workload": w["name"],
                             "metric": metric, "group": f"{src}>{dst}", "value": value, "unit": unit,
                             "n_obs": len(g.edges)})
    return rows
