"""A run's echo observations, aggregated in two streaming passes over its Parquet files.

Nothing here holds the run's rows: the files are read row group by row group
(Arrow; host names stay dictionary indices, never Python strings; columns the
footer shows constant in a row group, such as its sender, are not read), and
each row group is scattered into its trial's round matrices: per sender, a
peers × rounds matrix of RTTs (ns, 4 bytes a cell; 8 when the footer shows an
RTT above 4.29 s) and each round's send time. Everything else comes from those
matrices, one sender at a time in threads, with vectorised numpy:

pass 1 — per (repetition, sender, peer): counts, timeouts, sums and fine
  histograms of the RTT (:mod:`cloudbench.analysis.orderstats`); per window the
  count, sum and median; the quorum latencies (k-th fastest reply per sender
  and round); rows and timeouts are counted as the row groups are read;
pass 2 — the values in the histogram bins that hold the wanted order statistics,
  from which the Table-1 percentiles come out exact: from the kept matrices, or
  from the files again when the run's matrices exceed :data:`KEEP_BYTES`.

A round's observations share the window of the round's first send, for the
windowed means as for the window medians and the quorums.

Memory: the histograms, the windows and one trial's matrices (8 senders × 8
peers × 2.16 M rounds × 4 B = 553 MB for StormCloud's 6-hour trial; twice that
when the footer shows an RTT above 4.29 s or has no RTT statistics). Time: one
read of the files. bench/bench_scale.py measures both against DuckDB's exact
``quantile_cont`` on the same files.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cloudbench.analysis import orderstats as ost
from cloudbench.analysis.events import Event, detect_pair_events, label_host_events
from cloudbench.analysis.latency import (
    BOX_PERCENTILES,
    CCDF_EXCEEDANCE,
    PERCENTILES,
    ccdf_levels,
    distribution_row,
    mask_unestimable,
    pct_label,
)
from cloudbench.analysis.levelshift import Series
from cloudbench.core.files import utc_stamp
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import check_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files

T0_UTC_KEY = b"cloudbench.t0_utc_us"
"""File metadata (schema 2): JSON {host: CLOCK_REALTIME µs of that host's round 0}."""

_U32_LAST = 0xFFFFFFFD  # the largest RTT (ns) a 4-byte matrix cell holds; above it cells take 8 bytes
_SEND_BASE = 1 << 62
"""Send times are stored as _SEND_BASE - µs (the first send is the largest; 0: no row), so new
matrices are zero pages that only the cells rows land in ever touch."""
NG = len(GROUP_ORDER)
KEEP_BYTES = 1 << 30
"""Round matrices (4 B a cell, 8 B in files with larger RTTs) kept in memory for pass 2 up to
this size (268 M 4-byte cells); larger runs are read a second time instead."""
CONSTANT_COLUMNS = ("repetition", "src", "warmup", "connect_ns")
"""Columns not read from a row group whose footer statistics show one value (or only nulls)."""

Quorum = tuple[str, list[str], list[int]]
"""(name, members, k values) of one quorum of the spec."""


@dataclass
class EchoAggregates:
    """What the echo report and the summaries need, computed from one run's files."""

    hosts: list[str]
    repetitions: list[int]
    groups: list[dict[str, Any]]
    groups_by_rep: dict[int, list[dict[str, Any]]]
    pairs: list[dict[str, Any]]
    windows: list[dict[str, Any]]
    pair_windows: list[dict[str, Any]]
    quorums: list[dict[str, Any]]
    quorums_by_rep: dict[int, list[dict[str, Any]]]
    trial_t0_utc_us: dict[str, float] = field(default_factory=dict)
    """Per trial: CLOCK_REALTIME µs of round 0 (the earliest host's), where the workers recorded it."""
    quorum_values: dict[str, np.ndarray] = field(default_factory=dict)
    """Every quorum latency (µs, inf for too few replies), by ``Qk/n name``."""
    group_hists: dict[str, np.ndarray] = field(default_factory=dict)
    """Per latency group: counts of RTTs in the bins of ``orderstats.bin_edges(1000.0)``."""
    connect: list[dict[str, Any]] = field(default_factory=list)
    """Per latency group: the handshake times of per-round connections (µs), as distribution rows."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Spikes and steps per pair on raw RTTs, host events labelled (with ``round_interval_s``)."""
    boxes: list[dict[str, Any]] = field(default_factory=list)
    """Per latency group: count of RTTs, the box plot's percentiles and the mean (µs)."""
    tails: list[dict[str, Any]] = field(default_factory=list)
    """Per latency group: CCDF points (exceedance, rtt_us) down to 1/n."""
    pair_series: list[Series] = field(default_factory=list)
    """(repetition, trial, "src>dst", group, window start s, window median µs) per pair."""
    rows: int = 0


@dataclass
class _File:
    path: Path
    trial: str
    t0_utc_us: dict[str, int]
    max_round: int  # -2: the footer has no statistics
    row_groups: int
    has_connect: bool = False  # written by echo worker 3 or later (connect_ns column)
    max_rtt: int | None = 0  # the largest RTT (ns) the footer shows; None: unknown
    constant: list[dict[str, Any]] = field(default_factory=list)
    """Per row group: each column of :data:`CONSTANT_COLUMNS` with a single value (see :func:`_constants`)."""
    footer: Any = None  # the file's parsed footer (pq.FileMetaData): each read skips parsing it again


def echo_files(run: RunDir, workload: str, trials: Collection[str] | None = None) -> list[_File]:
    """The workload's Parquet files (of ``trials`` only, when given) with what their footers say
    (versions checked, nothing read)."""
    out = []
    for path in iter_observation_files(run, workload):
        if trials is not None and path.stem not in trials:
            continue
        pf = check_parquet(path, kind="echo")
        schema = pf.schema_arrow
        meta = schema.metadata or {}
        t0 = {str(k): int(v) for k, v in json.loads(meta.get(T0_UTC_KEY, b"{}")).items()}
        f = _File(path, path.stem, t0, -1, pf.metadata.num_row_groups, "connect_ns" in schema.names,
                  footer=pf.metadata)
        ri, ti = schema.get_field_index("round"), schema.get_field_index("rtt_ns")
        for g in range(f.row_groups):
            rg = pf.metadata.row_group(g)
            rs, ts = rg.column(ri).statistics, rg.column(ti).statistics
            if f.max_round != -2:
                f.max_round = max(f.max_round, int(rs.max)) if rs is not None and rs.has_min_max else -2
            if f.max_rtt is not None and ts is not None and ts.has_min_max:
                f.max_rtt = max(f.max_rtt, int(ts.max))
            elif rg.num_rows and (ts is None or ts.null_count != rg.num_rows):  # RTTs it says nothing of
                f.max_rtt = None
            f.constant.append(_constants(rg, schema))
        out.append(f)
    return out


def _constants(rg: Any, schema: pa.Schema) -> dict[str, Any]:
    """The columns of :data:`CONSTANT_COLUMNS` that one row group's statistics show to hold one
    value (exactly, not a truncated bound), or, for ``connect_ns``, only nulls (None)."""
    out: dict[str, Any] = {}
    for name in CONSTANT_COLUMNS:
        i = schema.get_field_index(name)
        st = rg.column(i).statistics if i >= 0 else None
        if st is None:
            continue
        if st.null_count == rg.num_rows and name == "connect_ns":
            out[name] = None
        elif (st.has_min_max and st.null_count == 0 and st.min == st.max
              and getattr(st, "is_min_value_exact", True) and getattr(st, "is_max_value_exact", True)):
            out[name] = st.min
    return out


def _read(f: _File, group: int, columns: Sequence[str]) -> pa.Table:
    try:
        return pq.ParquetFile(f.path, read_dictionary=["src", "dst"], metadata=f.footer).read_row_group(
            group, columns=list(columns), use_threads=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(f.path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e


def _host_index(col: pa.ChunkedArray, index: dict[str, int], where: Path) -> np.ndarray:
    """Host indices of a dictionary column, through its (small) dictionaries."""
    codes, lut = _host_codes(col, index)
    return _known(lut[codes], where)


def _host_codes(col: pa.ChunkedArray, index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A host column's dictionary codes and the host index of each code (-1: a name the manifest
    does not list); the codes of a column in several chunks are offset to be distinct. Runs of
    one host are found on the small codes, without mapping every row."""
    luts, parts, offset = [], [], 0
    for chunk in col.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        assert isinstance(chunk, pa.DictionaryArray)
        codes = chunk.indices.to_numpy(zero_copy_only=False)
        parts.append(codes.astype(np.int64) + offset if offset else codes)
        luts.append(np.array([index.get(str(s), -1) for s in chunk.dictionary.to_pylist()], dtype=np.int64))
        offset += len(luts[-1])
    if len(parts) == 1:
        return parts[0], luts[0]
    return _cat(parts), _cat(luts)


def _known(hosts: np.ndarray, where: Path) -> np.ndarray:
    """``hosts`` (indices), or an error naming the file when one is a name the manifest does not list."""
    if (hosts < 0).any():
        raise ResultError(str(where), "names hosts that the manifest does not list")
    return hosts


MAX_RUNS = 256
"""A row group in at most this many runs of one peer and consecutive rounds is written by slices."""


def _runs(dst: np.ndarray, rnd: np.ndarray) -> np.ndarray | None:
    """Bounds (first row of each run, then the row count) of the runs of one peer and consecutive
    rounds; None beyond :data:`MAX_RUNS` runs."""
    if not len(rnd):
        return None
    cut = np.flatnonzero((np.diff(rnd) != 1) | (dst[1:] != dst[:-1]))
    if len(cut) >= MAX_RUNS:
        return None
    return np.concatenate([[0], cut + 1, [len(rnd)]])


def _np(col: pa.ChunkedArray, dtype: Any) -> np.ndarray:
    out: np.ndarray = col.to_numpy().astype(dtype, copy=False)
    return out


def _ints_and_nulls(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """An integer column's values as int64 (anything at a null) and the positions of its nulls,
    from Arrow's buffers: no filled copy and no conversion through float."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not arr.null_count:
        return _np(col, np.int64), np.empty(0, dtype=np.int64)
    if arr.type != pa.int64():
        return _np(arr.fill_null(0), np.int64), _true_at(arr.is_null())
    vals = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr), offset=arr.offset * 8)
    return vals, _true_at(arr.is_null())


def _true_at(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Positions of the true values of a boolean column (nulls are not true)."""
    out: np.ndarray = pc.indices_nonzero(col).to_numpy().astype(np.int64) if len(col) else np.empty(0, np.int64)
    return out


def _decoded(cells: np.ndarray) -> np.ndarray:
    """Matrix cells as stored (0: no row, 1: no reply, else RTT + 2; a new matrix is all zero
    pages, touched only where rows land) as RTTs in ns, no row and no reply wrapping round to
    the two largest values of the type (:func:`_sentinels`), above every RTT."""
    out: np.ndarray = cells - cells.dtype.type(2)
    return out


def _sentinels(dtype: np.dtype[Any]) -> tuple[int, int]:
    """(no row, no reply) in :func:`_decoded` cells: the two largest values of the type."""
    top = int(np.iinfo(dtype).max)
    return top - 1, top


@dataclass
class _Trial:
    """One trial file's round matrices (see the module docstring), filled row group by row group."""

    mat: np.ndarray  # (senders, peers, rounds): cells as _decoded reads them
    sends: np.ndarray  # (senders, rounds): _SEND_BASE - each round's first send (µs); 0 where none
    rows: np.ndarray  # (senders · peers,): measured rows
    timeouts: np.ndarray  # (senders · peers,): measured rows flagged timeout
    reps: set[int] = field(default_factory=set)
    connect: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # row group -> (leaf, µs)
    lock: threading.Lock = field(default_factory=threading.Lock)  # row groups in threads: the sums above


@dataclass
class _Leaves:
    """Counts per leaf — (repetition, sender, peer) — summed over the run's files."""

    hist: np.ndarray
    sums: np.ndarray
    timeouts: np.ndarray
    measured: np.ndarray
    connect: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (leaf, handshake µs)


@dataclass
class _Sender:
    """What one sender's matrix gives (merged by the scan in sender order)."""

    hist: dict[int, np.ndarray] = field(default_factory=dict)  # leaf -> histogram
    sums: dict[int, float] = field(default_factory=dict)  # leaf -> sum of RTTs (µs)
    windows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    quorums: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (quorum, k) -> k-th per round
    events: dict[tuple[str, str], list[Event]] = field(default_factory=dict)


class _Scan:
    """Pass 1 and pass 2 over one run's echo files.

    Counts are kept per leaf — (repetition, src, dst) — and summed into the key
    families the report needs: latency groups overall, groups per repetition, pairs.
    """

    def __init__(self, run: RunDir, manifest: Manifest, workload: str, window_s: float,
                 quorums: Sequence[Quorum], threads: int | None = None,
                 round_interval_s: float | None = None, trials: Collection[str] | None = None) -> None:
        self.files = echo_files(run, workload, trials)
        labels = {(rep, name): HostSpec(name, lab["provider"], lab["region"], lab["zone"], lab["subnet"],
                                        lab["vm_type"])
                  for (rep, name), lab in manifest.labels().items()}
        self.hosts = sorted({n for _, n in labels})
        self.host_index = {n: i for i, n in enumerate(self.hosts)}
        self.reps = sorted({r for r, _ in labels})
        self.rep_pos = {r: i for i, r in enumerate(self.reps)}
        H = self.H = len(self.hosts)
        R = len(self.reps)
        # group of every (repetition, src, dst); -1 where a host is absent in that repetition
        self.group_lut = np.full((R, H, H), -1, dtype=np.int64)
        for (r, a), la in labels.items():
            for (r2, b), lb in labels.items():
                if r2 == r:
                    self.group_lut[self.rep_pos[r], self.host_index[a], self.host_index[b]] = \
                        GROUP_ORDER.index(classify_pair(la, lb))
        self.window_us = int(window_s * 1e6)
        self.window_s = window_s
        self.quorums = [(name, [self.host_index[h] for h in members if h in self.host_index], ks,
                         len(members)) for name, members, ks in quorums]
        # one thread more than cores: a thread holding the GIL in glue code leaves no core idle
        self.threads = threads or min(4, (os.cpu_count() or 1) + 1)
        # leaves and the key families above them: [overall groups | groups per repetition | pairs]
        self.n_leaf = R * H * H
        leaf = np.arange(self.n_leaf)
        rp, src, dst = leaf // (H * H), (leaf // H) % H, leaf % H
        grp = self.group_lut[rp, src, dst]
        self.n_keys = NG + R * NG + H * H
        self.families = [np.where(grp >= 0, grp, -1), np.where(grp >= 0, NG + rp * NG + grp, -1),
                         NG + R * NG + src * H + dst]
        self.leaf = _Leaves(np.zeros((self.n_leaf, ost.NBINS), dtype=np.int64), np.zeros(self.n_leaf),
                            np.zeros(self.n_leaf, dtype=np.int64), np.zeros(self.n_leaf, dtype=np.int64))
        self.hist = np.zeros((0, ost.NBINS), dtype=np.int64)
        self.sums = np.zeros(0)
        self.timeouts = self.measured = np.zeros(0, dtype=np.int64)
        self.quorum_values: dict[tuple[int, int, int], list[np.ndarray]] = {}  # (quorum, k, rep) -> k-th
        self.pair_series: list[Series] = []
        self.file_reps: list[int] = []
        self.events: list[dict[str, Any]] = []
        self.round_interval_s = round_interval_s
        self.kept: list[tuple[int, np.ndarray]] | None = []  # (repetition position, round matrices)
        self.win_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (file, leaf, w) key, sum, count
        self.rows = 0

    def _rep_pos(self, rep: np.ndarray, where: Path) -> np.ndarray:
        lut = np.full(max(self.reps, default=0) + 2, -1, dtype=np.int64)
        for r, i in self.rep_pos.items():
            lut[r] = i
        pos: np.ndarray = lut[np.clip(rep, -1, len(lut) - 1)]
        if (pos < 0).any():
            raise ResultError(str(where), "holds a repetition that the manifest does not list")
        return pos

    def _leaves(self, t: pa.Table, f: _File) -> np.ndarray:
        """The leaf — (repetition, src, dst) — of every row."""
        src = _host_index(t.column("src"), self.host_index, f.path)
        dst = _host_index(t.column("dst"), self.host_index, f.path)
        rp = self._rep_pos(_np(t.column("repetition"), np.int64), f.path)
        out: np.ndarray = (rp * self.H + src) * self.H + dst
        return out

    def pass1(self) -> None:
        H = self.H
        with ThreadPoolExecutor(self.threads) as pool:
            for fi, f in enumerate(self.files):
                tr = self._trial(f)
                self.rows += sum(pool.map(lambda g, f=f, tr=tr: self._fill(f, g, tr), range(f.row_groups)))
                if len(tr.reps) > 1:
                    raise ResultError(str(f.path),
                                      f"holds rows of repetitions {sorted(tr.reps)}; one file is one trial")
                rep = tr.reps.pop() if tr.reps else self.reps[0]
                rp = self.rep_pos[rep]
                self.file_reps.append(rep)
                self.leaf.measured[rp * H * H:(rp + 1) * H * H] += tr.rows
                self.leaf.timeouts[rp * H * H:(rp + 1) * H * H] += tr.timeouts
                self.leaf.connect.extend(tr.connect[g] for g in sorted(tr.connect))  # file order, any threads
                if not tr.rows.any():
                    continue
                # senders in threads, each one's pairs in turn: events hold one pair's arrays per thread
                senders = list(pool.map(lambda s, f=f, fi=fi, rep=rep, tr=tr: self._sender(f, fi, rep, tr, s),
                                        range(H)))
                self._merge(f, rep, senders)
                self._keep(rep, tr.mat)

    def _trial(self, f: _File) -> _Trial:
        """Empty round matrices for a file, sized by its footer (or by reading its rounds)."""
        rounds = f.max_round + 1
        if f.max_round == -2:  # no statistics: find the last round first
            rounds = max((int(_np(_read(f, g, ["round"]).column("round"), np.int64).max(initial=-1))
                          for g in range(f.row_groups)), default=-1) + 1
        H = self.H
        dtype = np.dtype(np.uint32 if f.max_rtt is not None and f.max_rtt <= _U32_LAST else np.uint64)
        return _Trial(np.zeros((H, H, rounds), dtype=dtype), np.zeros((H, rounds), dtype=np.int64),
                      np.zeros(H * H, dtype=np.int64), np.zeros(H * H, dtype=np.int64))

    def _fill(self, f: _File, group: int, tr: _Trial) -> int:
        """Scatter one row group into the trial's matrices; its number of rows."""
        const = f.constant[group]
        n = int(f.footer.row_group(group).num_rows)
        if not n:
            return 0
        t = _read(f, group, ("round", "dst", "send_us", "rtt_ns", "timeout",
                             *(c for c in CONSTANT_COLUMNS if c not in const and (c != "connect_ns" or f.has_connect))))
        H = self.H
        rp = self._group_rep(f, const, t)
        src = self._src(f, const, t)
        dst, lut = _host_codes(t.column("dst"), self.host_index)  # host index = lut[dst]
        if (lut < 0).any():  # a name the manifest does not list: an error if any row (warm-up too) has it
            _known(lut[dst], f.path)
        rnd = _np(t.column("round"), np.int64)
        send = _np(t.column("send_us"), np.int64)
        rtt, no_rtt = _ints_and_nulls(t.column("rtt_ns"))  # no_rtt and timeout: positions (few)
        timeout = _true_at(t.column("timeout"))
        cc = t.column("connect_ns") if "connect_ns" in t.column_names else None
        warmup = const.get("warmup")
        if warmup is not False:  # some rows (or all: the footer says) are warm-up
            m = ~_np(t.column("warmup"), bool) if warmup is None else np.zeros(n, dtype=bool)
            if not m.all():
                src = src[m] if isinstance(src, np.ndarray) else src
                dst, rnd, send, rtt = dst[m], rnd[m], send[m], rtt[m]
                at = np.cumsum(m) - 1  # a kept row's new position
                no_rtt, timeout = at[no_rtt[m[no_rtt]]], at[timeout[m[timeout]]]
                cc = cc.filter(pa.array(m)) if cc is not None else None
        if len(timeout) and not np.isin(timeout, no_rtt).all():
            raise ResultError(str(f.path), "holds rows flagged timeout that carry an RTT "
                              "(cloudbench writes a timeout's rtt_ns as null)")
        rounds = tr.mat.shape[2]
        if len(rnd) and (int(rnd.min()) < 0 or int(rnd.max()) >= rounds):
            raise ResultError(str(f.path), f"holds a round outside 0..{rounds - 1}, the rounds its footer's "
                              "statistics give")
        val = rtt.astype(tr.mat.dtype)
        val += 2  # see _decoded
        val[no_rtt] = 1
        first = _SEND_BASE - send
        runs = _runs(dst, rnd) if isinstance(src, int) else None

        def cells(pos: np.ndarray | slice) -> np.ndarray:  # the (sender, peer) cell of some rows
            out: np.ndarray = (src[pos] if isinstance(src, np.ndarray) else src) * H + lut[dst[pos]]
            return out

        if runs is not None:  # a few runs of one peer and consecutive rounds (the ingest's order): slices
            peers = lut[dst[runs[:-1]]]
            spans = [(d, int(rnd[a]), a, b) for a, b, d in zip(runs[:-1].tolist(), runs[1:].tolist(),
                                                                peers.tolist(), strict=True)]
            for d, r0, a, b in spans:
                tr.mat[src, d, r0:r0 + b - a] = val[a:b]
            rows = np.bincount(src * H + peers, weights=np.diff(runs), minlength=H * H).astype(np.int64)
        else:
            cell = cells(slice(None))
            tr.mat.reshape(-1)[cell * rounds + rnd] = val  # distinct cells: row groups write in parallel
            rows = np.bincount(cell, minlength=H * H)
        timeouts = np.bincount(cells(timeout), minlength=H * H) if len(timeout) else None
        with tr.lock:  # the first send of each round
            if runs is not None:
                for _, r0, a, b in spans:
                    sends = tr.sends[src, r0:r0 + b - a]
                    np.maximum(sends, first[a:b], out=sends)
            else:
                np.maximum.at(tr.sends.reshape(-1), src * rounds + rnd, first)
            tr.rows += rows
            if timeouts is not None:
                tr.timeouts += timeouts
            tr.reps.add(self.reps[rp])
        if cc is not None and cc.null_count < len(cc):  # handshake times of per-round connections (µs)
            has = ~_np(cc.is_null(), bool)
            tr.connect[group] = (rp * H * H + cells(has), _np(cc.fill_null(0), np.int64)[has] / 1000.0)
        return n

    def _src(self, f: _File, const: dict[str, Any], t: pa.Table) -> np.ndarray | int:
        """Host indices of a row group's senders: the one index its footer shows, or its column's."""
        if "src" not in const:
            return _host_index(t.column("src"), self.host_index, f.path)
        return int(_known(np.array([self.host_index.get(str(const["src"]), -1)]), f.path)[0])

    def _group_rep(self, f: _File, const: dict[str, Any], t: pa.Table) -> int:
        """The repetition (position) of a row group's rows, from its footer or its column; rows of
        several repetitions are an error."""
        if "repetition" in const:
            return int(self._rep_pos(np.array([const["repetition"]], dtype=np.int64), f.path)[0])
        rps = self._rep_pos(_np(t.column("repetition"), np.int64), f.path)
        if (rps != rps[0]).any():
            raise ResultError(str(f.path), "holds rows of several repetitions; one file is one trial")
        return int(rps[0])

    def _sender(self, f: _File, fi: int, rep: int, tr: _Trial, s: int) -> _Sender:
        """Histograms, sums, windows (count, sum, median), quorum latencies and, when asked,
        events of one sender's pairs, from its matrix."""
        H, rp = self.H, self.rep_pos[rep]
        out = _Sender()
        missing, _ = _sentinels(tr.mat.dtype)
        stored = tr.sends[s]
        snd = _SEND_BASE - stored
        wins = np.where(stored != 0, snd // self.window_us, -1)
        for d in range(H):
            rows = int(tr.rows[s * H + d])
            if not rows:
                continue
            col = _decoded(tr.mat[s, d])
            cells = int(np.count_nonzero(col != missing))
            if cells != rows:
                raise ResultError(str(f.path), f"holds {rows - cells} row(s) of {self.hosts[s]}→{self.hosts[d]} "
                                  "for a round that already has one (one row per round and peer)")
            valid = col < missing
            v = col[valid]
            if not len(v):
                continue
            leaf = (rp * H + s) * H + d
            out.hist[leaf] = np.bincount(ost.value_bins(v), minlength=ost.NBINS)
            ids, counts, sums, med = ost.window_stats(v, wins[valid])
            out.sums[leaf] = int(sums.sum()) / 1000.0
            out.windows.append(((fi * self.n_leaf + leaf) * (1 << 32) + ids, sums / 1000.0, counts))
            if d == s:
                continue
            g = int(self.group_lut[rp, s, d])
            out.series.append((rep, f.trial, f"{self.hosts[s]}>{self.hosts[d]}",
                               GROUP_ORDER[g].value if g >= 0 else "", ids * self.window_s, med / 1000.0))
            if self.round_interval_s:
                out.events[(self.hosts[s], self.hosts[d])] = detect_pair_events(
                    snd[valid] / 1e6, v / 1000.0, self.round_interval_s, self.window_s,
                    round_index=np.flatnonzero(valid))
        for qi, (_, idx, ks, _) in enumerate(self.quorums):
            if s not in idx:
                continue
            if max(ks) > len(idx):
                raise ResultError(str(f.path), f"quorum k={max(ks)} exceeds its {len(idx)} members")
            sub = _decoded(tr.mat[s][np.array(idx, dtype=np.int64)])  # members × rounds
            kths = ost.column_order_stats(sub, sorted({1, *ks, len(idx)}))
            present = (kths[1] != missing) | (kths[len(idx)] != missing)  # sorted: a value other than no row
            if not present.any():
                continue
            for k in ks:
                kth = kths[k][present]
                out.quorums[(qi, k)] = np.where(kth >= missing, np.inf, kth / 1000.0)
        return out

    def _merge(self, f: _File, rep: int, senders: list[_Sender]) -> None:
        """Fold one file's senders into the scan (in sender order, quorums in member order)."""
        by_pair: dict[tuple[str, str], list[Event]] = {}
        for o in senders:
            for leaf, h in o.hist.items():
                self.leaf.hist[leaf] += h
            for leaf, sm in o.sums.items():
                self.leaf.sums[leaf] += sm
            self.win_parts.extend(o.windows)
            self.pair_series.extend(o.series)
            by_pair.update(o.events)
        rp = self.rep_pos[rep]
        for qi, (_, idx, ks, _) in enumerate(self.quorums):
            for s in idx:
                for k in ks:
                    if (qi, k) in senders[s].quorums:
                        self.quorum_values.setdefault((qi, k, rp), []).append(senders[s].quorums[(qi, k)])
        if self.round_interval_s:
            labelled = label_host_events(by_pair, self.round_interval_s, self.window_s)
            for (src, dst), evs in sorted(labelled.items()):
                t0 = f.t0_utc_us.get(src)
                for e in evs:
                    row = e.to_row(repetition=rep, trial=f.trial, series=f"{src}>{dst}")
                    row["time_utc"] = utc_of(t0, float(row["time_s"]))
                    self.events.append(row)

    def _keep(self, rep: int, mat: np.ndarray) -> None:
        """Keep a trial's round matrices for pass 2 while they fit in :data:`KEEP_BYTES`."""
        if self.kept is None:
            return
        if sum(m.nbytes for _, m in self.kept) + mat.nbytes > KEEP_BYTES:
            self.kept = None  # pass 2 reads the files again
            return
        self.kept.append((self.rep_pos[rep], mat))

    def distribution(self, key: int, stats: dict[int, dict[int, int]]) -> dict[str, float | int]:
        """count, timeouts, mean, Table-1 percentiles and max (µs) of one key (after :meth:`pass2`);
        NaN for the percentiles its RTTs cannot estimate (:data:`~cloudbench.analysis.latency.TAIL_K`)."""
        n = int(self.hist[key].sum())
        row: dict[str, float | int] = {"count": n + int(self.timeouts[key]), "timeouts": int(self.timeouts[key])}
        row["mean"] = float(self.sums[key] / n) if n else float("nan")
        if n:
            qs = ost.percentiles_from(stats[key], n, PERCENTILES, 1000.0)
            mx = stats[key][n - 1] / 1000.0
        else:
            qs, mx = [float("nan")] * len(PERCENTILES), float("nan")
        for p, q in zip(PERCENTILES, qs, strict=True):
            row[pct_label(p)] = q
        row["max"] = mx
        return mask_unestimable(row, n)

    def key_stats(self) -> None:
        """:attr:`hist`, :attr:`sums`, :attr:`timeouts` and :attr:`measured` (rows) per key of every
        family, summed from the leaves (after :meth:`pass1`)."""
        hist = np.zeros((self.n_keys, ost.NBINS), dtype=np.int64)
        sums, tmo, meas = np.zeros(self.n_keys), np.zeros(self.n_keys, dtype=np.int64), \
            np.zeros(self.n_keys, dtype=np.int64)
        for fam in self.families:
            ok = fam >= 0
            np.add.at(hist, fam[ok], self.leaf.hist[ok])
            np.add.at(sums, fam[ok], self.leaf.sums[ok])
            np.add.at(tmo, fam[ok], self.leaf.timeouts[ok])
            np.add.at(meas, fam[ok], self.leaf.measured[ok])
        self.hist, self.sums, self.timeouts, self.measured = hist, sums, tmo, meas

    def pass2(self) -> dict[int, dict[int, int]]:
        hist = self.hist
        # the figures' levels for the groups overall: box plot and CCDF down to p99.999
        n = hist.sum(axis=1)
        extra = {g: (*BOX_PERCENTILES, *ccdf_levels(int(n[g]))) for g in range(NG)}
        targets = ost.plan_selection(hist, PERCENTILES, extra=extra)
        need_leaf = np.zeros((self.n_leaf, ost.NBINS), dtype=bool)
        for fam in self.families:
            ok = fam >= 0
            need_leaf[ok] |= targets.need[fam[ok]]
        with ThreadPoolExecutor(self.threads) as pool:
            if self.kept is not None:
                H = self.H
                cells = [(rp, m, s, d) for rp, m in self.kept for s in range(H) for d in range(H)
                         if need_leaf[(rp * H + s) * H + d].any()]
                kept = list(pool.map(lambda c: self._pass2_cell(c[0], c[1], c[2], c[3], need_leaf), cells))
            else:
                jobs = [(f, g) for f in self.files for g in range(f.row_groups)]
                kept = list(pool.map(lambda j: self._pass2_group(j[0], j[1], need_leaf), jobs))
        leaf = _cat([k[0] for k in kept])
        bins = _cat([k[1] for k in kept])
        vals = _cat([k[2] for k in kept])
        keys, kbins, kvals = [], [], []
        for fam in self.families:
            fk = fam[leaf]
            ok = fk >= 0
            ok[ok] = targets.need[fk[ok], bins[ok]]
            keys.append(fk[ok])
            kbins.append(bins[ok])
            kvals.append(vals[ok])
        return ost.select(targets, _cat(keys), _cat(kbins), _cat(kvals))

    def _pass2_cell(self, rp: int, mat: np.ndarray, s: int, d: int, need_leaf: np.ndarray) -> tuple[np.ndarray, ...]:
        """Pass 2 from a kept matrix: the values of one (sender, peer) in the needed bins."""
        col = _decoded(mat[s, d])
        v = col[col < _sentinels(mat.dtype)[0]]
        leaf = (rp * self.H + s) * self.H + d
        bins = ost.value_bins(v)
        keep = need_leaf[leaf, bins]
        return np.full(int(keep.sum()), leaf, dtype=np.int64), bins[keep], v[keep].astype(np.int64)

    def _pass2_group(self, f: _File, group: int, need_leaf: np.ndarray) -> tuple[np.ndarray, ...]:
        t = _read(f, group, ("repetition", "src", "dst", "rtt_ns", "warmup"))
        if not t.num_rows:
            return (np.empty(0, dtype=np.int64),) * 3
        leaf = self._leaves(t, f)
        rtt, no_rtt = _ints_and_nulls(t.column("rtt_ns"))
        valid = ~_np(t.column("warmup"), bool)
        valid[no_rtt] = False
        leaf, rtt = leaf[valid], rtt[valid]
        bins = ost.value_bins(rtt)
        keep = need_leaf[leaf, bins]
        return leaf[keep], bins[keep], rtt[keep]


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    out: np.ndarray = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return out


def aggregate_echo(run: RunDir, manifest: Manifest, workload: str, window_s: float,
                   quorums: Sequence[Quorum] = (), threads: int | None = None,
                   round_interval_s: float | None = None, trials: Collection[str] | None = None) -> EchoAggregates:
    """Every aggregate of a run's echo workload the report and the summaries use (two passes).

    ``round_interval_s`` (1 / rate) turns on the per-pair event detection on raw RTTs
    (:mod:`cloudbench.analysis.events`); the summaries do without it.
    """
    scan = _Scan(run, manifest, workload, window_s, quorums, threads, round_interval_s, trials)
    scan.pass1()
    scan.key_stats()
    stats = scan.pass2()
    R = len(scan.reps)
    groups = [{"group": g.value, **scan.distribution(gi, stats)}
              for gi, g in enumerate(GROUP_ORDER) if scan.measured[gi]]
    by_rep: dict[int, list[dict[str, Any]]] = {}
    for r, rp in scan.rep_pos.items():
        by_rep[r] = [{"group": g.value, **scan.distribution(NG + rp * NG + gi, stats)}
                     for gi, g in enumerate(GROUP_ORDER) if scan.measured[NG + rp * NG + gi]]
    pairs = []
    base = NG + R * NG
    for a in range(scan.H):
        for b in range(scan.H):
            key = base + a * scan.H + b
            if not scan.measured[key]:
                continue
            d = scan.distribution(key, stats)
            grp = next((int(scan.group_lut[rp, a, b]) for rp in range(R) if scan.group_lut[rp, a, b] >= 0), -1)
            pairs.append({"src": scan.hosts[a], "dst": scan.hosts[b],
                          "group": GROUP_ORDER[grp].value if grp >= 0 else "",
                          "count": int(scan.measured[key]), "timeouts": d["timeouts"],
                          "mean": d["mean"], "p50": d["p50"], "p99": d["p99"], "max": d["max"]})
    with ThreadPoolExecutor(1) as pool:  # the quorums' selections (numpy) beside the windows' rows (Python)
        quorum_job = pool.submit(_quorum_tables, scan)
        windows, pair_windows = _windows(scan)
        quorums_all, quorums_rep, quorum_values = quorum_job.result()
    group_hists = {g.value: scan.hist[gi] for gi, g in enumerate(GROUP_ORDER) if scan.hist[gi].any()}
    connect: list[dict[str, Any]] = []
    if scan.leaf.connect:
        leaves = np.concatenate([lf for lf, _ in scan.leaf.connect])
        times = np.concatenate([c for _, c in scan.leaf.connect])
        fam = scan.families[0][leaves]
        for gi, g in enumerate(GROUP_ORDER):
            sel = fam == gi
            if sel.any():
                connect.append({"group": g.value, **distribution_row(times[sel], 0)})
    boxes, tails = [], []
    for gi, g in enumerate(GROUP_ORDER):
        n = int(scan.hist[gi].sum())
        if not scan.measured[gi] or not n:
            continue
        qs = ost.percentiles_from(stats[gi], n, BOX_PERCENTILES, 1000.0)
        boxes.append({"group": g.value, "count": n, **{pct_label(p): q for p, q in zip(BOX_PERCENTILES, qs,
                                                                                        strict=True)},
                      "mean": float(scan.sums[gi] / n)})
        levels = [e for e in CCDF_EXCEEDANCE if e >= 1.0 / n]
        xs = ost.percentiles_from(stats[gi], n, ccdf_levels(n), 1000.0)
        pts = [(float(e), float(x)) for e, x in zip(levels, xs, strict=True)]
        if not levels or levels[-1] > 1.0 / n:
            pts.append((1.0 / n, stats[gi][n - 1] / 1000.0))
        tails += [{"group": g.value, "exceedance": e, "rtt_us": x} for e, x in pts]
    t0s = {f.trial: t0 for f in scan.files if (t0 := _t0_utc(f)) is not None}
    return EchoAggregates(boxes=boxes, tails=tails, events=scan.events, quorum_values=quorum_values,
                          trial_t0_utc_us=t0s,
                          group_hists=group_hists, connect=connect, hosts=scan.hosts,
                          repetitions=scan.reps,
                          groups=groups, groups_by_rep=by_rep, pairs=pairs, windows=windows,
                          pair_windows=pair_windows, quorums=quorums_all, quorums_by_rep=quorums_rep,
                          pair_series=scan.pair_series, rows=scan.rows)


def _quorum_tables(scan: _Scan) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]], dict[str, np.ndarray]]:
    """Quorum rows overall and per repetition, and each quorum's latencies (µs, inf: too few replies)."""
    quorums_all: list[dict[str, Any]] = []
    quorums_rep: dict[int, list[dict[str, Any]]] = {r: [] for r in scan.reps}
    quorum_values: dict[str, np.ndarray] = {}
    for qi, (name, _, ks, n_members) in enumerate(scan.quorums):
        for k in ks:
            per_rep = {r: _cat(parts) for r, rp in scan.rep_pos.items()
                       if (parts := scan.quorum_values.get((qi, k, rp)))}
            label = {"quorum": f"Q{k}/{n_members}", "group": name}
            rows = {r: {**label, **_quorum_row(q)} for r, q in per_rep.items() if len(q)}
            for r, row in rows.items():
                quorums_rep[r].append(row)
            values = _cat([np.empty(0), *per_rep.values()]) if len(per_rep) != 1 else next(iter(per_rep.values()))
            quorum_values[f"Q{k}/{n_members} {name}"] = values
            # a single repetition's row is the overall one: its order statistics are not selected twice
            quorums_all.append(dict(*rows.values()) if len(rows) == 1 else {**label, **_quorum_row(values)})
    return quorums_all, quorums_rep, quorum_values


def _quorum_row(q: np.ndarray) -> dict[str, float | int]:
    finite = q[np.isfinite(q)]
    return distribution_row(finite, int((~np.isfinite(q)).sum()))


def _windows(scan: _Scan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Windowed means per (repetition, trial, window, group) and per (repetition, trial, pair, window)."""
    if not scan.win_parts:
        return [], []
    keys = np.concatenate([k for k, _, _ in scan.win_parts])
    uk, inv = np.unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=np.concatenate([s for _, s, _ in scan.win_parts]))
    counts = np.bincount(inv, weights=np.concatenate([c for _, _, c in scan.win_parts])).astype(np.int64)
    fi, leaf, w = (uk >> 32) // scan.n_leaf, (uk >> 32) % scan.n_leaf, uk & 0xFFFFFFFF
    rp, src, dst = leaf // (scan.H * scan.H), (leaf // scan.H) % scan.H, leaf % scan.H
    rep_of = np.array(scan.file_reps, dtype=np.int64)
    grp = scan.group_lut[rp, src, dst]
    t0 = [_t0_utc(f) for f in scan.files]

    @functools.cache
    def start_utc(a: int, wi: int) -> str | None:  # a window's start, formatted once for all its pairs
        return utc_of(t0[a], wi * scan.window_s)

    pair_rows = [{"repetition": int(rep_of[a]), "trial": scan.files[a].trial, "window": int(wi),
                  "start_s": float(wi * scan.window_s), "start_utc": start_utc(int(a), int(wi)),
                  "src": scan.hosts[s], "dst": scan.hosts[d], "group": GROUP_ORDER[g].value,
                  "count": int(c), "mean": float(sm / c)}
                 for a, wi, s, d, g, sm, c in zip(fi, w, src, dst, grp, sums, counts, strict=True)]
    gkey = (fi * (1 << 32) + w) * NG + grp
    ug, ginv = np.unique(gkey, return_inverse=True)
    gsum = np.bincount(ginv, weights=sums)
    gcnt = np.bincount(ginv, weights=counts).astype(np.int64)
    rows: list[dict[str, Any]] = []
    for key, sm, c in zip(ug, gsum, gcnt, strict=True):
        g = int(key % NG)
        a, wi = int((key // NG) >> 32), int((key // NG) & 0xFFFFFFFF)
        rows.append({"repetition": int(rep_of[a]), "trial": scan.files[a].trial, "window": wi,
                     "start_s": float(wi * scan.window_s), "start_utc": start_utc(a, wi),
                     "group": GROUP_ORDER[g].value, "count": int(c), "mean": float(sm / c)})
    order = {g.value: i for i, g in enumerate(GROUP_ORDER)}
    rows.sort(key=lambda r: (r["repetition"], r["trial"], r["window"], order[r["group"]]))
    return rows, pair_rows


def _t0_utc(f: _File) -> float | None:
    """CLOCK_REALTIME µs of round 0 (the earliest host's), when the file says."""
    return min(f.t0_utc_us.values()) if f.t0_utc_us else None


def utc_of(t0_us: float | None, offset_s: float) -> str | None:
    """ISO 8601 UTC of ``offset_s`` after ``t0_us`` (µs since the epoch); None when unknown."""
    if t0_us is None:
        return None
    return utc_stamp(t0_us / 1e6 + offset_s, micro=True)
