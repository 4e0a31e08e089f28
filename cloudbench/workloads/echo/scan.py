"""The echo scan: a run's echo observations aggregated in two streaming passes over its files.

Nothing here holds the run's rows: the files are read row group by row group
(:mod:`~cloudbench.workloads.echo.trial_files`) and each row group is scattered into
its trial's round matrices (:mod:`~cloudbench.workloads.echo.matrices`). Everything
else comes from those matrices, one sender at a time in threads, with vectorised
numpy, counted per leaf — (repetition, sender, peer) — and summed into the report's
keys (:mod:`~cloudbench.workloads.echo.keyspace`):

first pass (:meth:`EchoScan.first_pass`) — per leaf: counts, timeouts, sums and fine
  histograms of the RTT (:mod:`cloudbench.analysis.orderstats`); per window the
  count, sum and median; the quorum latencies (k-th fastest reply per sender
  and round); rows and timeouts are counted as the row groups are read;
second pass (:meth:`EchoScan.second_pass`, given the first's result) — the values in
  the histogram bins that hold the wanted order statistics, from which the Table-1
  percentiles come out exact: from the kept matrices, or from the files again when the
  run's matrices exceed :data:`KEEP_BYTES`.

A round's observations share the window of the round's first send, for the
windowed means as for the window medians and the quorums.

Memory: the histograms, the windows and one trial's matrices (8 senders × 8
peers × 2.16 M rounds × 4 B = 553 MB for StormCloud's 6-hour trial; twice that
when the footer shows an RTT above 4.29 s or has no RTT statistics). Time: one
read of the files. bench/bench_scale.py measures both against DuckDB's exact
``quantile_cont`` on the same files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from cloudbench.analysis import orderstats as ost
from cloudbench.analysis.events import Event, detect_pair_events, label_host_events
from cloudbench.analysis.events_median import scratch_array
from cloudbench.analysis.latency import BOX_PERCENTILES, PERCENTILES, ccdf_levels, mask_unestimable, pct_label
from cloudbench.analysis.levelshift import PairWindows
from cloudbench.core.topology import GROUP_ORDER
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.echo.keyspace import N_GROUPS, KeySpace
from cloudbench.workloads.echo.matrices import (
    SEND_BASE,
    RoundMatrices,
    WindowLayout,
    fill_row_group,
    sentinels,
)
from cloudbench.workloads.echo.params import Quorum
from cloudbench.workloads.echo.trial_files import (
    TrialFile,
    concat,
    host_index,
    ints_and_nulls,
    read_row_group,
    to_numpy,
    trial_files,
    utc_of,
)

KEEP_BYTES = 1 << 30
"""Round matrices (4 B a cell, 8 B in files with larger RTTs) kept in memory for the second pass
up to this size (268 M 4-byte cells); larger runs are read a second time instead."""


MAX_INPUT_RUNS = 256
"""A pair's echoes in at most this many runs of consecutive rounds are converted run by run."""


def _detector_inputs(stored: np.ndarray, valid: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``((SEND_BASE - stored)[valid] / 1e6, v / 1000.0)``: a pair's send times (s; ``stored``: its
    sender's first sends as stored) and RTTs (µs) for the event detector, the same values, written
    into this thread's scratch arrays (valid until its next pair): two fresh 17 MB arrays a 6-hour
    pair (and the gathered send times a third) were mapped and zeroed page by page. A pair with
    few missing rounds is converted run by run of consecutive rounds (no gather)."""
    n = len(v)
    t_s, rtt_us = scratch_array("input_t", n), scratch_array("input_rtt", n)
    np.divide(v, 1000.0, out=rtt_us)
    if n == len(valid):
        _seconds(stored, t_s)
        return t_s, rtt_us
    gaps = np.flatnonzero(~valid)
    if len(gaps) >= MAX_INPUT_RUNS:
        _seconds(stored[valid], t_s)
        return t_s, rtt_us
    at = 0
    for a, b in zip([0, *(gaps + 1).tolist()], [*gaps.tolist(), len(valid)], strict=True):
        if b > a:
            _seconds(stored[a:b], t_s[at:at + b - a])
            at += b - a
    return t_s, rtt_us


def _seconds(stored: np.ndarray, out: np.ndarray) -> None:
    """``out`` = the send times (s) of first sends as stored: the µs difference in integers, then
    divided (the values of ``(SEND_BASE - stored) / 1e6``)."""
    np.subtract(SEND_BASE, stored, out=out, casting="unsafe")
    np.divide(out, 1e6, out=out)


class QuorumMembers(NamedTuple):
    """One quorum of the spec, its members as host positions (those the run has)."""

    name: str
    members: list[int]
    ks: list[int]
    size: int  # members the spec lists


@dataclass
class LeafCounts:
    """Counts per leaf, summed over the run's files."""

    hist: np.ndarray
    sums: np.ndarray
    timeouts: np.ndarray
    measured: np.ndarray
    handshakes: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """(leaf, handshake µs) of per-round connections, in file and row-group order."""

    @classmethod
    def zeros(cls, n_leaves: int) -> LeafCounts:
        """No counts for ``n_leaves`` leaves."""
        return cls(np.zeros((n_leaves, ost.NBINS), dtype=np.int64), np.zeros(n_leaves),
                   np.zeros(n_leaves, dtype=np.int64), np.zeros(n_leaves, dtype=np.int64))


@dataclass
class KeyTotals:
    """Histograms, sums (µs), timeouts and measured rows per key of every family."""

    hist: np.ndarray
    sums: np.ndarray
    timeouts: np.ndarray
    measured: np.ndarray

    @classmethod
    def of_leaves(cls, leaves: LeafCounts, keys: KeySpace) -> KeyTotals:
        """The leaves' counts summed into the keys of every family."""
        hist = np.zeros((keys.n_keys, ost.NBINS), dtype=np.int64)
        sums, tmo, meas = np.zeros(keys.n_keys), np.zeros(keys.n_keys, dtype=np.int64), \
            np.zeros(keys.n_keys, dtype=np.int64)
        for fam in keys.leaf_keys:
            ok = fam >= 0
            np.add.at(hist, fam[ok], leaves.hist[ok])
            np.add.at(sums, fam[ok], leaves.sums[ok])
            np.add.at(tmo, fam[ok], leaves.timeouts[ok])
            np.add.at(meas, fam[ok], leaves.measured[ok])
        return cls(hist, sums, tmo, meas)


WindowPart = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(window keys, sums µs, counts) of one leaf's windows in one file."""


@dataclass
class FirstPass:
    """What the first pass gives: the counts, and the rows the report takes as they are."""

    leaves: LeafCounts
    totals: KeyTotals = field(init=False)
    """The leaves summed per key (set once the files are read)."""
    windows: list[WindowPart] = field(default_factory=list)
    pair_series: list[PairWindows] = field(default_factory=list)
    quorum_latencies: dict[tuple[int, int, int], list[np.ndarray]] = field(default_factory=dict)
    """(quorum, k, repetition position) -> the k-th fastest reply (µs) per round, per sender."""
    events: list[dict[str, Any]] = field(default_factory=list)
    file_reps: list[int] = field(default_factory=list)
    """The repetition of each file, in file order."""
    kept: list[tuple[int, np.ndarray]] | None = field(default_factory=list)
    """(repetition position, RTT matrices) of every trial; None when they outgrew KEEP_BYTES."""
    rows: int = 0


@dataclass
class SelectedRtts:
    """What the second pass gives: per key, the order statistics the report asks for."""

    totals: KeyTotals
    values: dict[int, dict[int, int]]
    """key -> {rank (0-based): RTT ns}."""

    def count(self, key: int) -> int:
        """The RTTs of a key (timeouts not counted)."""
        return int(self.totals.hist[key].sum())

    def percentiles(self, key: int, levels: Sequence[float]) -> list[float]:
        """Percentiles (µs) of a key's RTTs at ``levels`` (which the second pass selected)."""
        return ost.percentiles_from(self.values[key], self.count(key), levels, 1000.0)

    def max(self, key: int) -> float:
        """The largest RTT (µs) of a key with RTTs."""
        return self.values[key][self.count(key) - 1] / 1000.0

    def distribution(self, key: int) -> dict[str, float | int]:
        """count, timeouts, mean, Table-1 percentiles and max (µs) of one key; NaN for the
        percentiles its RTTs cannot estimate (:data:`~cloudbench.analysis.latency.TAIL_K`)."""
        n = self.count(key)
        tmo = int(self.totals.timeouts[key])
        row: dict[str, float | int] = {"count": n + tmo, "timeouts": tmo}
        row["mean"] = float(self.totals.sums[key] / n) if n else float("nan")
        if n:
            qs, mx = self.percentiles(key, PERCENTILES), self.max(key)
        else:
            qs, mx = [float("nan")] * len(PERCENTILES), float("nan")
        for p, q in zip(PERCENTILES, qs, strict=True):
            row[pct_label(p)] = q
        row["max"] = mx
        return mask_unestimable(row, n)


@dataclass
class _SenderPart:
    """What one sender's matrix gives (merged by the scan in sender order)."""

    hist: dict[int, np.ndarray] = field(default_factory=dict)  # leaf -> histogram
    sums: dict[int, float] = field(default_factory=dict)  # leaf -> sum of RTTs (µs)
    windows: list[WindowPart] = field(default_factory=list)
    series: list[PairWindows] = field(default_factory=list)
    quorums: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (quorum, k) -> k-th per round
    events: dict[tuple[str, str], list[Event]] = field(default_factory=dict)

    def add(self, pair: _PairPart) -> None:
        """One of the sender's pairs (added in peer order)."""
        self.hist[pair.leaf] = pair.hist
        self.sums[pair.leaf] = pair.sum_us
        self.windows.append(pair.windows)
        if pair.series is not None:
            self.series.append(pair.series)
        if pair.events is not None:
            self.events[pair.events[0]] = pair.events[1]


@dataclass
class _PairPart:
    """What one pair's row of its sender's matrix gives."""

    leaf: int
    hist: np.ndarray
    sum_us: float
    windows: WindowPart
    series: PairWindows | None = None  # None: a self-loop
    events: tuple[tuple[str, str], list[Event]] | None = None


@dataclass(frozen=True)
class _SenderClock:
    """One sender's first sends as stored (a view of its row), each round's window id and the
    windows' layout (None: not equal spans of rounds, :func:`~cloudbench.analysis.orderstats.window_stats`
    then, with ``wins``; empty otherwise: every sender's clock lives through the file's pairs)."""

    stored: np.ndarray
    wins: np.ndarray
    layout: WindowLayout | None

    @classmethod
    def of(cls, stored: np.ndarray, rounds: int, window_us: int) -> _SenderClock:
        """From the sender's row of the first sends as stored (0: none that round)."""
        wins = np.where(stored != 0, (SEND_BASE - stored) // window_us, -1)
        layout = WindowLayout.of(wins, rounds)  # windows as equal spans of rounds: no gather per peer
        if layout is not None:
            wins = wins[:0]
        elif len(wins) and int(wins.max()) < np.iinfo(np.int32).max:
            wins = wins.astype(np.int32)  # half the bytes to gather per peer
        return cls(stored, wins, layout)


class EchoScan:
    """The two passes over one run's echo files (:meth:`first_pass`, then :meth:`second_pass`)."""

    def __init__(self, run: RunDir, manifest: Manifest, workload: str, window_s: float,
                 quorums: Sequence[Quorum], threads: int | None = None,
                 round_interval_s: float | None = None, trials: Collection[str] | None = None) -> None:
        self.files = trial_files(run, workload, trials)
        self.keys = KeySpace.of_manifest(manifest)
        self.window_us = int(window_s * 1e6)
        self.window_s = window_s
        self.quorums = [QuorumMembers(name, [self.keys.host_position[h] for h in members
                                             if h in self.keys.host_position], ks, len(members))
                        for name, members, ks in quorums]
        # a thread per core: one more (so that glue code holding the GIL leaves no core idle) was
        # slower on 2 cores, the scan with events 6.18 s (CPU 11.8) against 5.84 s (CPU 10.9), median
        # of 5 alternated: the third thread's arrays crowd the caches the memory-bound passes use
        self.threads = threads or min(4, os.cpu_count() or 1)
        self.round_interval_s = round_interval_s

    def first_pass(self) -> FirstPass:
        """Every file read once: counts per leaf and key, windows, series, quorums, events."""
        keys = self.keys
        out = FirstPass(LeafCounts.zeros(keys.n_leaves))
        with ThreadPoolExecutor(self.threads) as pool:
            pending: Callable[[], None] | None = None  # the previous file's pairs, to be merged
            for fi, f in enumerate(self.files):
                m = RoundMatrices.for_file(f, keys.n_hosts)
                # queued behind the previous file's pairs: a core left idle by their last is not wasted
                fills = [pool.submit(fill_row_group, f, g, m, keys) for g in range(f.row_groups)]
                if pending is not None:
                    pending()
                    pending = None
                out.rows += sum(x.result() for x in fills)
                if len(m.repetitions) > 1:
                    raise ResultError(str(f.path),
                                      f"holds rows of repetitions {sorted(m.repetitions)}; one file is one trial")
                rep = m.repetitions.pop() if m.repetitions else keys.repetitions[0]
                rp = keys.rep_position[rep]
                out.file_reps.append(rep)
                out.leaves.measured[keys.rep_leaves(rp)] += m.measured
                out.leaves.timeouts[keys.rep_leaves(rp)] += m.timeouts
                out.leaves.handshakes.extend(m.handshakes[g] for g in sorted(m.handshakes))  # file order
                if m.measured.any():
                    pending = self._senders(pool, out, f, fi, rep, m)
            if pending is not None:
                pending()
        out.totals = KeyTotals.of_leaves(out.leaves, keys)
        return out

    def _senders(self, pool: ThreadPoolExecutor, out: FirstPass, f: TrialFile, fi: int, rep: int,
                 m: RoundMatrices) -> Callable[[], None]:
        """Queue every sender's part of one file: its send times and windows, then each pair (a
        task of its own: a pair with an event costs up to 10 times a quiet one, and one sender a
        task left a core idle for 0.4 s at the end of the 138 M run), then its quorums. Returns
        what merges them into ``out`` in sender order, waiting for them (called in file order)."""
        hosts = range(self.keys.n_hosts)
        clocks = [pool.submit(_SenderClock.of, m.first_sends[s], m.rounds, self.window_us) for s in hosts]
        # a pair's task starts after every clock's (the queue is first in, first out): it waits for
        # its sender's clock only while another thread works it out
        pairs = [(s, d, pool.submit(lambda s, d: self._pair(f, fi, rep, m, s, d, clocks[s].result()), s, d))
                 for s in hosts for d in hosts if m.measured[self.keys.cell(s, d)]]
        parts = [_SenderPart() for _ in hosts]
        quorums = [pool.submit(self._sender_quorums, f, m, s, parts[s]) for s in hosts]

        def merge() -> None:
            for s, _, pair in pairs:
                if (done := pair.result()) is not None:
                    parts[s].add(done)
            for q in quorums:
                q.result()
            self._merge(out, f, rep, parts)
            self._keep(out, self.keys.rep_position[rep], m.rtts)

        return merge

    def _pair(self, f: TrialFile, fi: int, rep: int, m: RoundMatrices, s: int, d: int,
              clock: _SenderClock) -> _PairPart | None:
        """Histogram, sum, windows (count, sum, median) and, when asked, events of one pair
        (None: no RTT), from its row of the sender's matrix."""
        keys = self.keys
        rp = keys.rep_position[rep]
        rows = int(m.measured[keys.cell(s, d)])
        cells = m.rtts[s, d]  # as stored (see sentinels): 0 no row, 1 no reply, else RTT + 2
        if (n_cells := int(np.count_nonzero(cells))) != rows:
            raise ResultError(str(f.path), f"holds {rows - n_cells} row(s) of {keys.hosts[s]}→{keys.hosts[d]} "
                              "for a round that already has one (one row per round and peer)")
        two = m.rtts.dtype.type(2)
        valid = cells >= two
        v = cells[valid]
        v -= two  # decoded, on the RTTs only
        if not len(v):
            return None
        leaf = int(keys.leaf(rp, s, d))
        by_span = clock.layout.stats(cells, valid, v) if clock.layout is not None else None
        ids, counts, sums, med = by_span if by_span is not None else ost.window_stats(v, clock.wins[valid])
        out = _PairPart(leaf, ost.histogram(v), int(sums.sum()) / 1000.0,
                        (keys.window_key(fi, leaf, ids), sums / 1000.0, counts))
        if d == s:
            return out
        g = int(keys.pair_group[rp, s, d])
        out.series = (rep, f.trial, f"{keys.hosts[s]}>{keys.hosts[d]}",
                      GROUP_ORDER[g].value if g >= 0 else "", ids * self.window_s, med / 1000.0)
        if self.round_interval_s:
            t_s, rtt_us = _detector_inputs(clock.stored, valid, v)
            out.events = ((keys.hosts[s], keys.hosts[d]), detect_pair_events(
                t_s, rtt_us, self.round_interval_s, self.window_s,
                round_index=lambda: np.flatnonzero(valid)))  # worked out only for an event
        return out

    def _sender_quorums(self, f: TrialFile, m: RoundMatrices, s: int, out: _SenderPart) -> None:
        """The k-th fastest reply per round of each quorum ``s`` is a member of (µs; inf: fewer replies)."""
        missing, _ = sentinels(m.rtts.dtype)
        for qi, q in enumerate(self.quorums):
            if s not in q.members:
                continue
            if max(q.ks) > len(q.members):
                raise ResultError(str(f.path), f"quorum k={max(q.ks)} exceeds its {len(q.members)} members")
            # the members' rows as views, decoded (see sentinels) as the network copies them: a
            # gathered members × rounds copy (43 MB for 5 members at 6 hours) was a fresh mapping
            # the kernel zeroed for every sender
            kths = ost.column_order_stats([m.rtts[s, d] for d in q.members],
                                          sorted({1, *q.ks, len(q.members)}), offset=2)
            # sorted: a value other than no row
            present = (kths[1] != missing) | (kths[len(q.members)] != missing)
            if not present.any():
                continue
            for k in q.ks:
                kth = kths[k][present]
                out.quorums[(qi, k)] = np.where(kth >= missing, np.inf, kth / 1000.0)

    def _merge(self, out: FirstPass, f: TrialFile, rep: int, senders: list[_SenderPart]) -> None:
        """Fold one file's senders into the first pass (in sender order, quorums in member order)."""
        by_pair: dict[tuple[str, str], list[Event]] = {}
        for o in senders:
            for leaf, h in o.hist.items():
                out.leaves.hist[leaf] += h
            for leaf, sm in o.sums.items():
                out.leaves.sums[leaf] += sm
            out.windows.extend(o.windows)
            out.pair_series.extend(o.series)
            by_pair.update(o.events)
        rp = self.keys.rep_position[rep]
        for qi, q in enumerate(self.quorums):
            for s in q.members:
                for k in q.ks:
                    if (qi, k) in senders[s].quorums:
                        out.quorum_latencies.setdefault((qi, k, rp), []).append(senders[s].quorums[(qi, k)])
        if self.round_interval_s:
            labelled = label_host_events(by_pair, self.round_interval_s, self.window_s)
            for (src, dst), evs in sorted(labelled.items()):
                t0 = f.t0_utc_us.get(src)
                for e in evs:
                    row = e.to_row(repetition=rep, trial=f.trial, series=f"{src}>{dst}")
                    row["time_utc"] = utc_of(t0, float(row["time_s"]))
                    out.events.append(row)

    @staticmethod
    def _keep(out: FirstPass, rp: int, rtts: np.ndarray) -> None:
        """Keep a trial's RTT matrices for the second pass while they fit in :data:`KEEP_BYTES`."""
        if out.kept is None:
            return
        if sum(m.nbytes for _, m in out.kept) + rtts.nbytes > KEEP_BYTES:
            out.kept = None  # the second pass reads the files again
            return
        out.kept.append((rp, rtts))

    def second_pass(self, first: FirstPass) -> SelectedRtts:
        """The order statistics of every key that the report needs, exact: the Table-1
        percentiles, and for the latency groups overall the box plot's and the CCDF's levels."""
        keys, hist = self.keys, first.totals.hist
        n = hist.sum(axis=1)
        extra = {g: (*BOX_PERCENTILES, *ccdf_levels(int(n[g]))) for g in range(N_GROUPS)}
        targets = ost.plan_selection(hist, PERCENTILES, extra=extra)
        need_leaf = np.zeros((keys.n_leaves, ost.NBINS), dtype=bool)
        for fam in keys.leaf_keys:
            ok = fam >= 0
            need_leaf[ok] |= targets.need[fam[ok]]
        with ThreadPoolExecutor(self.threads) as pool:
            if first.kept is not None:
                H = keys.n_hosts
                cells = [(rp, m, s, d) for rp, m in first.kept for s in range(H) for d in range(H)
                         if need_leaf[keys.leaf(rp, s, d)].any()]
                parts = list(pool.map(lambda c: self._values_in_matrix(c[0], c[1], c[2], c[3], need_leaf,
                                                                       targets.need, first.leaves.hist), cells))
            else:
                jobs = [(f, g) for f in self.files for g in range(f.row_groups)]
                parts = list(pool.map(lambda j: self._values_in_row_group(j[0], j[1], need_leaf, targets.need),
                                      jobs))
        # family by family, parts (cells, or row groups) in order
        fams = range(len(keys.leaf_keys))
        return SelectedRtts(first.totals, ost.select(
            targets, *(concat([part[fi][i] for fi in fams for part in parts]) for i in range(3))))

    def _by_family(self, leaf: np.ndarray | int, bins: np.ndarray, vals: np.ndarray,
                   need: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per family of keys: (key, bin, RTT ns) of the values (of ``leaf``: one, or each value's)
        in the bins their key there needs (``need[key, bin]``). One leaf's key is one 1-D lookup
        per family (``need[key].take(bins)``)."""
        out = []
        for fam in self.keys.leaf_keys:
            if isinstance(leaf, int):
                key = int(fam[leaf])
                sel = need[key].take(bins) if key >= 0 else np.zeros(len(bins), dtype=bool)
                n = int(np.count_nonzero(sel))
                out.append((np.full(n, key, dtype=fam.dtype), bins[sel], vals[sel]))
                continue
            fk = fam[leaf]
            sel = fk >= 0
            sel[sel] = need[fk[sel], bins[sel]]
            out.append((fk[sel], bins[sel], vals[sel]))
        return out

    def _values_in_matrix(self, rp: int, rtts: np.ndarray, s: int, d: int, need_leaf: np.ndarray,
                          need: np.ndarray, leaf_hist: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Second pass from a kept matrix: per family of keys, (key, bin, RTT ns) of one
        (sender, peer)'s RTTs in the bins its key there needs (:meth:`_by_family`); the leaf's
        first-pass histogram bounds how many its needed bins hold."""
        leaf = int(self.keys.leaf(rp, s, d))
        room = int(leaf_hist[leaf][need_leaf[leaf]].sum())
        bins, vals = ost.needed_values(rtts[s, d], need_leaf[leaf], room)  # see sentinels: cells hold RTT + 2
        return self._by_family(leaf, bins, vals, need)

    def _values_in_row_group(self, f: TrialFile, row_group: int, need_leaf: np.ndarray,
                             need: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Second pass from the file: per family of keys, (key, bin, RTT ns) of one row group's RTTs
        in the bins their key there needs (:meth:`_by_family`)."""
        t = read_row_group(f, row_group, ("repetition", "src", "dst", "rtt_ns", "warmup"))
        empty = np.empty(0, dtype=np.int64)
        if not t.num_rows:
            return [(empty, empty, empty)] * len(self.keys.leaf_keys)
        keys = self.keys
        src = host_index(t.column("src"), keys.host_position, f.path)
        dst = host_index(t.column("dst"), keys.host_position, f.path)
        rp = keys.rep_positions(to_numpy(t.column("repetition"), np.int64), f.path)
        leaf = np.asarray(keys.leaf(rp, src, dst))
        rtt, no_rtt = ints_and_nulls(t.column("rtt_ns"))
        valid = ~to_numpy(t.column("warmup"), bool)
        valid[no_rtt] = False
        leaf, rtt = leaf[valid], rtt[valid]
        bins = ost.value_bins(rtt)
        keep = need_leaf[leaf, bins]
        return self._by_family(leaf[keep], bins[keep], rtt[keep], need)
