"""A run's traceroute tables: their layout, loading them, and the MDA graphs they describe.

    <workload>/links/<trial>.parquet   one row per MDA link:
        repetition int16, src, dst (host names), src_addr, dst_addr, method,
        from_node, to_node (addresses; anonymous hops ``*…``), ttl int16,
        probes int32, replies int32, rtt_min_us float64 (null: no reply timed)
    <workload>/traces/<trial>.parquet  one row per trace:
        repetition, src, dst, src_addr, dst_addr, method, confidence int16,
        start_s float64 (Unix time, scamper's clock), probes int32, nodes int32,
        reached bool, rtt_min_us float64 (destination's fastest reply)
"""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa

from cloudbench.analysis.paths import PathGraph, PrefixTable
from cloudbench.errors import ResultError
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.traceroute.reader import Trace

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


def load_tables(run: RunDir, workload: str) -> tuple[pa.Table, pa.Table]:
    """All trials' links and traces of a traceroute workload (empty tables if none)."""
    def cat(sub: str, kind: str, schema: pa.Schema) -> pa.Table:
        files = sorted((run.path / workload / sub).glob("*.parquet"))
        if not files:
            return schema.empty_table()
        return pa.concat_tables([read_parquet(p, kind=kind).cast(schema) for p in files])

    return cat("links", LINKS_KIND, LINKS_SCHEMA), cat("traces", TRACES_KIND, TRACES_SCHEMA)


def load_prefix_table(path: Path) -> PrefixTable:
    """An IP→AS table from a CSV of ``prefix,asn,name`` (a header line and ``#`` comments allowed)."""
    rows: list[tuple[str, int, str]] = []
    try:
        with Path(path).open(newline="") as f:
            for i, row in enumerate(csv.reader(f)):
                if not row or row[0].startswith("#") or (i == 0 and row[0].strip() == "prefix"):
                    continue
                try:
                    rows.append((row[0].strip(), int(row[1]), row[2].strip() if len(row) > 2 else ""))
                except (ValueError, IndexError) as e:
                    raise ResultError(f"{path}:{i + 1}", f"not `prefix,asn,name`: {row!r} ({e})") from e
        return PrefixTable.from_rows(rows)
    except OSError as e:
        raise ResultError(str(path), f"cannot read the IP→AS table: {e.strerror or e}") from e
    except ValueError as e:  # a malformed prefix
        raise ResultError(str(path), f"not an IP→AS table: {e}") from e


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


def trace_tables(traces: list[tuple[str, Trace]], by_addr: dict[str, str],
                 repetition: int) -> tuple[pa.Table, pa.Table]:
    """The links and traces tables of one trial (layout in the module docstring)."""
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
