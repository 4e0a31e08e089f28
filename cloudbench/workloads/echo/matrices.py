"""One trial's round matrices: its row groups scattered into (sender, peer, round) cells.

Per sender, a peers × rounds matrix of RTTs (ns, 4 bytes a cell; 8 when the footer
shows an RTT above 4.29 s or says nothing of them) and each round's first send time.
Cells hold the RTT + 2, 1 for a round without reply and 0 for no row, so a new matrix
is zero pages that only the cells rows land in ever touch (:func:`sentinels` reads
them back). Row groups are scattered in threads: they write distinct cells, and the
counts and send times they share are updated under the matrices' lock. A steady
sender's windows are equal spans of its rounds (:class:`WindowLayout`): its peers'
window statistics then come from their rows span by span (a compiled pass, ``matrices_windows.c``;
without a compiler, the rows reshaped to windows × rounds).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cloudbench.core import ckernels
from cloudbench.core.allocator import small_page_zeros
from cloudbench.errors import ResultError
from cloudbench.workloads.echo.keyspace import KeySpace
from cloudbench.workloads.echo.schema import CONSTANT_COLUMNS
from cloudbench.workloads.echo.trial_files import (
    NO_STATISTICS,
    TrialFile,
    host_codes,
    host_index,
    ints_and_nulls,
    known_hosts,
    read_row_group,
    to_numpy,
    true_at,
)

U32_LAST = 0xFFFFFFFD
"""The largest RTT (ns) a 4-byte cell holds; above it cells take 8 bytes."""
SEND_BASE = 1 << 62
"""Send times are stored as SEND_BASE - µs (the first send is the largest; 0: no row), so new
matrices are zero pages that only the cells rows land in ever touch."""
MAX_RUNS = 256
"""A row group in at most this many runs of one peer and consecutive rounds is written by slices."""


def sentinels(dtype: np.dtype[Any]) -> tuple[int, int]:
    """(no row, no reply) in decoded cells: the two largest values of the type. Cells are stored
    as 0 (no row), 1 (no reply) or RTT + 2; subtracting 2 decodes them to RTTs in ns with no row
    and no reply wrapping round to these two values, above every RTT."""
    top = int(np.iinfo(dtype).max)
    return top - 1, top


@dataclass
class RoundMatrices:
    """One trial file's round matrices, filled row group by row group (:func:`fill_row_group`)."""

    rtts: np.ndarray
    """(senders, peers, rounds): cells as :func:`sentinels` describes them."""
    first_sends: np.ndarray
    """(senders, rounds): SEND_BASE - each round's first send (µs); 0 where none."""
    measured: np.ndarray
    """Per cell (sender, peer): measured rows."""
    timeouts: np.ndarray
    """Per cell: measured rows flagged timeout."""
    repetitions: set[int] = field(default_factory=set)
    handshakes: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Per row group: (leaf, handshake µs) of its per-round connections."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Row groups fill in threads: held while they add to the counts and send times."""

    @classmethod
    def for_file(cls, f: TrialFile, n_hosts: int) -> RoundMatrices:
        """Empty matrices for a file, sized by its footer (or by reading its rounds)."""
        rounds = f.max_round + 1
        if f.max_round == NO_STATISTICS:  # find the last round first
            rounds = max((int(to_numpy(read_row_group(f, g, ["round"]).column("round"), np.int64).max(initial=-1))
                          for g in range(f.row_groups)), default=-1) + 1
        H = n_hosts
        dtype = np.dtype(np.uint32 if f.max_rtt is not None and f.max_rtt <= U32_LAST else np.uint64)
        return cls(small_page_zeros((H, H, rounds), dtype), small_page_zeros((H, rounds), np.int64),
                   np.zeros(H * H, dtype=np.int64), np.zeros(H * H, dtype=np.int64))

    @property
    def rounds(self) -> int:
        """The rounds the matrices hold."""
        return int(self.rtts.shape[2])


@dataclass
class WindowLayout:
    """One sender's windows as equal spans of its rounds (how a steady sender's rounds fall):
    window ``ids[i]`` holds rounds ``first + i·length`` to ``first + (i+1)·length - 1``, so a
    peer's windows are the rows of a reshaped slice of its matrix and its window medians
    need no gather of its RTTs into windows (:meth:`stats`)."""

    ids: np.ndarray
    """Consecutive window ids, one per span (int64)."""
    first: int
    """The first round of the first span (negative when the first window began before round 0)."""
    length: int
    """Rounds per span."""

    @classmethod
    def of(cls, wins: np.ndarray, rounds: int) -> WindowLayout | None:
        """The layout ``wins`` follows (each round's window id; -1: the sender sent nothing that
        round), or None when its windows are not equal spans of rounds in order (then
        :func:`~cloudbench.analysis.orderstats.window_stats` is the way)."""
        silent = wins < 0
        at = np.flatnonzero(~silent) if silent.any() else None  # None: every round
        w = wins if at is None else wins[at]
        if not len(w) or (w[1:] < w[:-1]).any():
            return None
        head = np.r_[0, np.flatnonzero(w[1:] != w[:-1]) + 1]
        tail = np.r_[head[1:] - 1, len(w) - 1]
        first_r, last_r = (head, tail) if at is None else (at[head], at[tail])
        length = int((last_r - first_r).max()) + 1  # the longest span seen
        row = (w[head] - w[0]).astype(np.int64)
        # each window's rounds must lie in its span: the first and the last of each tell
        lo, hi = int((first_r - row * length).min()), int((last_r - row * length).max())
        k = int(row[-1]) + 1
        if hi - lo >= length or k * length > rounds + 2 * length:
            return None
        return cls(np.arange(int(w[0]), int(w[0]) + k, dtype=np.int64), lo, length)

    def _rows(self, a: np.ndarray, fill: Any) -> np.ndarray:
        """The spans' rounds of one matrix row as (spans × length); rounds outside it ``fill``."""
        k, n = len(self.ids), len(self.ids) * self.length
        lo, hi = self.first, self.first + n
        part = a[max(lo, 0):min(hi, len(a))]
        if lo >= 0 and hi <= len(a):
            return part.reshape(k, self.length)
        out = np.full(n, fill, dtype=a.dtype)
        out[max(lo, 0) - lo:max(lo, 0) - lo + len(part)] = part
        return out.reshape(k, self.length)

    def stats(self, cells: np.ndarray, valid: np.ndarray,
              v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """What :func:`~cloudbench.analysis.orderstats.window_stats` gives for one peer's RTTs
        (ids, counts, sums, medians of the windows with an RTT): ``cells`` its matrix row as
        stored, ``valid`` the cells with an RTT, ``v`` their RTTs in round order. None when
        some RTT lies outside the spans. The medians are exact order statistics, selected by
        the compiled kernel (sample-bracketed selection, Floyd & Rivest 1975) or by numpy's
        partition of the reshaped rows: the same values."""
        fns = _compiled() if cells.dtype in _CELL_NAMES and cells.flags.c_contiguous else None
        if fns is not None:  # a compiled pass a window, its RTTs gathered in cache: no reshaped copy, no partition
            k = len(self.ids)
            every, all_sums, all_med = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64), np.empty(k)
            scratch = np.empty(3 * self.length, dtype=cells.dtype)
            fns[f"cb_window_stats_{_CELL_NAMES[cells.dtype]}"](
                cells.ctypes.data, len(cells), self.first, self.length, k, every.ctypes.data,
                all_sums.ctypes.data, all_med.ctypes.data, scratch.ctypes.data)
            has = every > 0
            if int(every.sum()) != len(v) or not len(v):
                return None
            return self.ids[has], every[has], all_sums[has], all_med[has]
        counts = np.count_nonzero(self._rows(valid, False), axis=1)
        has = counts > 0
        c = counts[has].astype(np.int64)
        if int(c.sum()) != len(v) or not len(v):
            return None
        sums = np.add.reduceat(v, np.r_[0, np.cumsum(c)[:-1]], dtype=np.int64 if v.dtype.kind in "iu" else np.float64)
        # decoded (see sentinels): no row and no reply wrap to the top, above every RTT, so each
        # row's c smallest cells are its RTTs and its order statistics below c are theirs
        block = self._rows(cells, 0)[has]
        block -= cells.dtype.type(2)
        med = np.empty(len(c))
        for n in np.unique(c).tolist():
            rows = np.flatnonzero(c == n)
            sub = block if len(rows) == len(c) else block[rows]
            hi = n // 2
            sub.partition(hi, axis=1)
            upper = sub[:, hi]
            lower = sub[:, :hi].max(axis=1) if n % 2 == 0 else upper
            med[rows] = (lower.astype(np.float64) + upper) / 2.0
        return self.ids[has], c, sums, med


_C_SOURCE = Path(__file__).resolve().with_name("matrices_windows.c")
_P, _I64 = ctypes.c_void_p, ctypes.c_int64
_SIGNATURES: dict[str, ckernels.Signature] = {
    f"cb_window_stats_{t}": (None, (_P, _I64, _I64, _I64, _I64, _P, _P, _P, _P)) for t in ("u32", "u64")}
_CELL_NAMES = {np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64"}


def _compiled() -> ckernels.Functions | None:
    """The window statistics' kernels (``matrices_windows.c``: one pass a window, the GIL released)
    by C name, from :func:`cloudbench.core.ckernels.load`; None without a compiler (then numpy runs)."""
    return ckernels.load(_C_SOURCE, _SIGNATURES)


def peer_runs(dst: np.ndarray, rnd: np.ndarray) -> np.ndarray | None:
    """Bounds (first row of each run, then the row count) of the runs of one peer and consecutive
    rounds; None beyond :data:`MAX_RUNS` runs."""
    if not len(rnd):
        return None
    cut = np.flatnonzero((np.diff(rnd) != 1) | (dst[1:] != dst[:-1]))
    if len(cut) >= MAX_RUNS:
        return None
    return np.concatenate([[0], cut + 1, [len(rnd)]])


@dataclass
class _MeasuredRows:
    """One row group's rows without its warm-up rows, as the scatter needs them."""

    rp: int  # the repetition's position
    src: np.ndarray | int  # the sender's host position per row, or the row group's one sender
    dst: np.ndarray  # dictionary codes of the peers
    host_of_code: np.ndarray  # host position of each code of dst
    rnd: np.ndarray
    send: np.ndarray
    rtt: np.ndarray
    no_rtt: np.ndarray  # positions (few)
    timeout: np.ndarray  # positions (few)
    connect: pa.ChunkedArray | None

    def cells(self, keys: KeySpace, pos: np.ndarray | slice) -> np.ndarray:
        """The (sender, peer) cells of some rows."""
        src = self.src[pos] if isinstance(self.src, np.ndarray) else self.src
        out: np.ndarray = keys.cell(src, self.host_of_code[self.dst[pos]])
        return out


def fill_row_group(f: TrialFile, row_group: int, m: RoundMatrices, keys: KeySpace) -> int:
    """Scatter one row group into the trial's matrices; its number of rows."""
    n = f.row_group_rows(row_group)
    if not n:
        return 0
    rows = _measured_rows(f, row_group, keys, n)
    if len(rows.timeout) and not np.isin(rows.timeout, rows.no_rtt).all():
        raise ResultError(str(f.path), "holds rows flagged timeout that carry an RTT "
                          "(cloudbench writes a timeout's rtt_ns as null)")
    rounds = m.rounds
    if len(rows.rnd) and (int(rows.rnd.min()) < 0 or int(rows.rnd.max()) >= rounds):
        raise ResultError(str(f.path), f"holds a round outside 0..{rounds - 1}, the rounds its footer's "
                          "statistics give")
    runs = peer_runs(rows.dst, rows.rnd) if isinstance(rows.src, int) else None
    if runs is not None:  # a few runs of one peer and consecutive rounds (the ingest's order): slices
        src = rows.src
        assert isinstance(src, int)
        peers = rows.host_of_code[rows.dst[runs[:-1]]]
        spans = [(d, int(rows.rnd[a]), a, b) for a, b, d in zip(runs[:-1].tolist(), runs[1:].tolist(),
                                                                 peers.tolist(), strict=True)]
        for d, r0, a, b in spans:  # RTT + 2 (see sentinels) straight into the cells: no copy of the column
            np.add(rows.rtt[a:b], 2, out=m.rtts[src, d, r0:r0 + b - a], casting="unsafe")
        if len(rows.no_rtt):
            m.rtts[src, rows.host_of_code[rows.dst[rows.no_rtt]], rows.rnd[rows.no_rtt]] = 1
        measured = np.bincount(keys.cell(src, peers), weights=np.diff(runs), minlength=keys.n_cells).astype(np.int64)
    else:
        val = rows.rtt.astype(m.rtts.dtype)
        val += 2  # see sentinels
        val[rows.no_rtt] = 1
        cell = rows.cells(keys, slice(None))
        m.rtts.reshape(-1)[cell * rounds + rows.rnd] = val  # distinct cells: row groups write in parallel
        measured = np.bincount(cell, minlength=keys.n_cells)
    timeouts = np.bincount(rows.cells(keys, rows.timeout), minlength=keys.n_cells) if len(rows.timeout) else None
    stored = SEND_BASE - rows.send  # outside the lock: only the maxima are shared
    with m.lock:  # the first send of each round
        if runs is not None:
            for _, r0, a, b in spans:
                sends = m.first_sends[src, r0:r0 + b - a]
                np.maximum(sends, stored[a:b], out=sends)
        else:
            np.maximum.at(m.first_sends.reshape(-1), rows.src * rounds + rows.rnd, stored)
        m.measured += measured
        if timeouts is not None:
            m.timeouts += timeouts
        m.repetitions.add(keys.repetitions[rows.rp])
    cc = rows.connect
    if cc is not None and cc.null_count < len(cc):  # handshake times of per-round connections (µs)
        has = ~to_numpy(cc.is_null(), bool)
        m.handshakes[row_group] = (keys.leaf_of_cell(rows.rp, rows.cells(keys, has)),
                                   to_numpy(cc.fill_null(0), np.int64)[has] / 1000.0)
    return n


def _measured_rows(f: TrialFile, row_group: int, keys: KeySpace, n: int) -> _MeasuredRows:
    """The columns of one row group the scatter needs, its warm-up rows dropped; the columns
    its footer shows constant are not read."""
    const = f.constant[row_group]
    t = read_row_group(f, row_group, (
        "round", "dst", "send_us", "rtt_ns", "timeout",
        *(c for c in CONSTANT_COLUMNS if c not in const and (c != "connect_ns" or f.has_connect))))
    rp = _row_group_rep(f, const, t, keys)
    src = _senders(f, const, t, keys)
    dst, lut = host_codes(t.column("dst"), keys.host_position)  # host position = lut[dst]
    if (lut < 0).any():  # a name the manifest does not list: an error if any row (warm-up too) has it
        known_hosts(lut[dst], f.path)
    rnd = to_numpy(t.column("round"))  # int32 as written (half the bytes to compare); int64 otherwise
    if rnd.dtype != np.int32:
        rnd = rnd.astype(np.int64)
    send = to_numpy(t.column("send_us"), np.int64)
    rtt, no_rtt = ints_and_nulls(t.column("rtt_ns"))  # no_rtt and timeout: positions (few)
    timeout = true_at(t.column("timeout"))
    cc = t.column("connect_ns") if "connect_ns" in t.column_names else None
    warmup = const.get("warmup")
    if warmup is not False:  # some rows (or all: the footer says) are warm-up
        m = ~to_numpy(t.column("warmup"), bool) if warmup is None else np.zeros(n, dtype=bool)
        if not m.all():
            src = src[m] if isinstance(src, np.ndarray) else src
            dst, rnd, send, rtt = dst[m], rnd[m], send[m], rtt[m]
            at = np.cumsum(m) - 1  # a kept row's new position
            no_rtt, timeout = at[no_rtt[m[no_rtt]]], at[timeout[m[timeout]]]
            cc = cc.filter(pa.array(m)) if cc is not None else None
    return _MeasuredRows(rp, src, dst, lut, rnd, send, rtt, no_rtt, timeout, cc)


def _senders(f: TrialFile, const: dict[str, Any], t: pa.Table, keys: KeySpace) -> np.ndarray | int:
    """Host positions of a row group's senders: the one its footer shows, or its column's."""
    if "src" not in const:
        return host_index(t.column("src"), keys.host_position, f.path)
    return int(known_hosts(np.array([keys.host_position.get(str(const["src"]), -1)]), f.path)[0])


def _row_group_rep(f: TrialFile, const: dict[str, Any], t: pa.Table, keys: KeySpace) -> int:
    """The repetition (position) of a row group's rows, from its footer or its column; rows of
    several repetitions are an error."""
    if "repetition" in const:
        return int(keys.rep_positions(np.array([const["repetition"]], dtype=np.int64), f.path)[0])
    rps = keys.rep_positions(to_numpy(t.column("repetition"), np.int64), f.path)
    if (rps != rps[0]).any():
        raise ResultError(str(f.path), "holds rows of several repetitions; one file is one trial")
    return int(rps[0])
