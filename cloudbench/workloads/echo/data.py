"""A run's echo observations, aggregated in two streaming passes over its Parquet files.

Nothing here holds the run's rows: the files are read in record batches (Arrow;
host names stay dictionary indices, never Python strings), and each batch is
folded into small aggregates with vectorised numpy:

pass 1 — per latency group (overall and per repetition) and per pair: counts,
  timeouts, sums and fine histograms of the RTT (:mod:`cloudbench.analysis.orderstats`);
  windowed sums per group and per pair; and per trial file, a rounds × peers
  matrix of each sender's RTTs (4 bytes a cell) for the quorum latencies
  (k-th fastest reply per sender and round) and the per-pair window medians;
pass 2 — the values in the histogram bins that hold the wanted order statistics,
  from which the Table-1 percentiles come out exact.

Memory: the histograms, the windows and one trial's matrices (8 senders × 8
peers × 2.16 M rounds × 4 B = 553 MB for StormCloud's 6-hour trial). Time: two
reads of the files. bench/bench_scale.py measures both against DuckDB's exact
``quantile_cont`` on the same files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cloudbench.analysis import orderstats as ost
from cloudbench.analysis.events import Event, detect_pair_events, label_host_events
from cloudbench.analysis.latency import (
    BOX_PERCENTILES,
    CCDF_EXCEEDANCE,
    PERCENTILES,
    ccdf_levels,
    distribution_row,
    pct_label,
)
from cloudbench.analysis.levelshift import Series
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import check_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files

COLUMNS = ("repetition", "round", "src", "dst", "send_us", "rtt_ns", "timeout", "warmup")
BATCH_ROWS = 1 << 20
T0_UTC_KEY = b"cloudbench.t0_utc_us"
"""File metadata (schema 2): JSON {host: CLOCK_REALTIME µs of that host's round 0}."""

_MISSING = np.uint32(0xFFFFFFFF)  # no row for this (round, peer)
_TIMEOUT = np.uint32(0xFFFFFFFE)  # a row, but no reply in time
_MAX_RTT = 0xFFFFFFFD  # RTTs above (4.29 s) are clamped in the matrices only; quantiles stay exact
NG = len(GROUP_ORDER)
KEEP_BYTES = 1 << 30
"""Round matrices (4 B per measured row) kept in memory for pass 2 up to this size (268 M rows);
larger runs are read a second time instead."""

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
    max_round: int
    row_groups: int
    has_connect: bool = False  # written by echo worker 3 or later (connect_ns column)


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
        ri = pf.schema_arrow.get_field_index("round")
        max_round = -1
        for g in range(pf.metadata.num_row_groups):
            st = pf.metadata.row_group(g).column(ri).statistics
            if st is None or not st.has_min_max:
                max_round = -2
                break
            max_round = max(max_round, int(st.max))
        out.append(_File(path, path.stem, t0, max_round, pf.metadata.num_row_groups, "connect_ns" in schema.names))
    return out


def _read(f: _File, group: int, columns: Sequence[str]) -> pa.Table:
    try:
        return pq.ParquetFile(f.path, read_dictionary=["src", "dst"]).read_row_group(
            group, columns=list(columns), use_threads=False)
    except (pa.ArrowInvalid, OSError) as e:
        raise ResultError(str(f.path), f"not a readable Parquet file (truncated or corrupted?): {e}") from e


def _host_index(col: pa.ChunkedArray, index: dict[str, int], where: Path) -> np.ndarray:
    """Host indices of a dictionary column, through its (small) dictionaries."""
    parts = []
    for chunk in col.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        assert isinstance(chunk, pa.DictionaryArray)
        lut = np.array([index.get(str(s), -1) for s in chunk.dictionary.to_pylist()], dtype=np.int64)
        parts.append(lut[chunk.indices.to_numpy(zero_copy_only=False)] if len(lut)
                     else np.empty(0, dtype=np.int64))
    idx = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    if (idx < 0).any():
        raise ResultError(str(where), "names hosts that the manifest does not list")
    return idx


def _np(col: pa.ChunkedArray, dtype: Any) -> np.ndarray:
    out: np.ndarray = col.to_numpy().astype(dtype, copy=False)
    return out


class _Part:
    """What pass 1 learns from one row group (merged into the scan afterwards)."""

    def __init__(self, n_leaf: int) -> None:
        self.present = np.empty(0, dtype=np.int64)  # the leaves this part saw, and their histograms
        self.hist = np.zeros((0, ost.NBINS), dtype=np.int64)
        self.sums: np.ndarray = np.zeros(n_leaf)
        self.timeouts: np.ndarray = np.zeros(n_leaf, dtype=np.int64)
        self.measured: np.ndarray = np.zeros(n_leaf, dtype=np.int64)
        self.windows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.connect: list[tuple[np.ndarray, np.ndarray]] = []  # (leaf, handshake µs)
        self.rows = 0
        self.rep: int | None = None


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
        self.threads = threads or min(4, os.cpu_count() or 1)
        # leaves and the key families above them: [overall groups | groups per repetition | pairs]
        self.n_leaf = R * H * H
        leaf = np.arange(self.n_leaf)
        rp, src, dst = leaf // (H * H), (leaf // H) % H, leaf % H
        grp = self.group_lut[rp, src, dst]
        self.n_keys = NG + R * NG + H * H
        self.families = [np.where(grp >= 0, grp, -1), np.where(grp >= 0, NG + rp * NG + grp, -1),
                         NG + R * NG + src * H + dst]
        self.leaf = _Part(self.n_leaf)
        self.leaf.hist = np.zeros((self.n_leaf, ost.NBINS), dtype=np.int64)
        self.hist = np.zeros((0, ost.NBINS), dtype=np.int64)
        self.sums = np.zeros(0)
        self.timeouts = self.measured = np.zeros(0, dtype=np.int64)
        self.quorum_values: dict[tuple[int, int, int], list[np.ndarray]] = {}  # (quorum, k, rep) -> k-th
        self.pair_series: list[Series] = []
        self.file_reps: list[int] = []
        self.events: list[dict[str, Any]] = []
        self.round_interval_s = round_interval_s
        self.kept: list[tuple[int, np.ndarray]] | None = []  # (repetition position, round matrices)
        self.clamped = False  # an RTT above what a matrix cell holds: pass 2 reads the files
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

    def _keyed(self, t: pa.Table, f: _File) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(leaf, src, dst, rep_pos) of every row."""
        src = _host_index(t.column("src"), self.host_index, f.path)
        dst = _host_index(t.column("dst"), self.host_index, f.path)
        rp = self._rep_pos(_np(t.column("repetition"), np.int64), f.path)
        return (rp * self.H + src) * self.H + dst, src, dst, rp

    def pass1(self) -> None:
        H = self.H
        with ThreadPoolExecutor(self.threads) as pool:
            for fi, f in enumerate(self.files):
                rounds = max(f.max_round + 1, 0)
                if f.max_round == -2:  # no statistics: find the last round first
                    rounds = max((int(_np(_read(f, g, ["round"]).column("round"), np.int64).max(initial=-1))
                                  for g in range(f.row_groups)), default=-1) + 1
                # each sender's RTT to each peer, per round (4 B a cell), and each round's window
                mat = np.full((H, H, rounds), _MISSING, dtype=np.uint32)
                sends = np.full((H, rounds), -1, dtype=np.int64)  # each round's send time (µs)
                reps: set[int] = set()
                rows = 0
                # parts are merged as they arrive, so memory holds a few row groups' counts
                for p in pool.map(lambda g, f=f, fi=fi, mat=mat, sends=sends: self._pass1_group(f, fi, g, mat, sends),
                                  range(f.row_groups)):
                    if p.rep is not None:
                        reps.add(p.rep)
                    self.leaf.hist[p.present] += p.hist
                    self.leaf.sums += p.sums
                    self.leaf.timeouts += p.timeouts
                    self.leaf.measured += p.measured
                    self.win_parts.extend(p.windows)
                    self.leaf.connect.extend(p.connect)
                    rows += p.rows
                if len(reps) > 1:
                    raise ResultError(str(f.path), f"holds rows of repetitions {sorted(reps)}; one file is one trial")
                self.rows += rows
                rep = reps.pop() if reps else self.reps[0]
                self.file_reps.append(rep)
                if rows:
                    self._finish_file(f, rep, mat, sends)
                    self._keep(rep, mat)

    def _pass1_group(self, f: _File, fi: int, group: int, mat: np.ndarray, sends: np.ndarray) -> _Part:
        part = _Part(self.n_leaf)
        t = _read(f, group, (*COLUMNS, "connect_ns") if f.has_connect else COLUMNS)
        part.rows = n = t.num_rows
        if not n:
            return part
        leaf, src, dst, rp = self._keyed(t, f)
        part.rep = self.reps[int(rp[0])]
        if (rp != rp[0]).any():
            raise ResultError(str(f.path), "holds rows of several repetitions; one file is one trial")
        rtt_col = t.column("rtt_ns")
        has_rtt = ~_np(rtt_col.is_null(), bool)
        rtt = _np(rtt_col.fill_null(0), np.int64)
        timeout = _np(t.column("timeout"), bool)
        measured = ~_np(t.column("warmup"), bool)
        rnd = _np(t.column("round"), np.int64)
        send = _np(t.column("send_us"), np.int64)
        valid = measured & has_rtt
        if f.has_connect:  # handshake times of per-round connections (µs), per leaf
            cc = t.column("connect_ns")
            has_c = measured & ~_np(cc.is_null(), bool)
            if has_c.any():
                part.connect.append((leaf[has_c], _np(cc.fill_null(0), np.int64)[has_c] / 1000.0))
        lv, rv = leaf[valid], rtt[valid]
        if len(rv) and int(rv.max()) > _MAX_RTT:
            self.clamped = True
        rv_us = rv / 1000.0
        part.present, part.hist = _hist(lv, ost.value_bins(rv), self.n_leaf)
        part.sums = np.bincount(lv, weights=rv_us, minlength=self.n_leaf)
        part.timeouts = np.bincount(leaf[measured & timeout], minlength=self.n_leaf)
        part.measured = np.bincount(leaf[measured], minlength=self.n_leaf)
        # windowed sums per leaf: dense over the windows this row group spans
        w = send[valid] // self.window_us
        if len(w):
            w0, span = int(w.min()), int(w.max() - w.min()) + 1
            idx = lv * span + (w - w0)
            cnt = np.bincount(idx, minlength=self.n_leaf * span)
            nz = np.flatnonzero(cnt)
            sm = np.bincount(idx, weights=rv_us, minlength=self.n_leaf * span)
            key = (fi * self.n_leaf + nz // span) * (1 << 32) + (nz % span + w0)
            part.windows.append((key, sm[nz], cnt[nz]))
        # per sender: RTT (or timeout) per (peer, round), and the window of each round
        rounds = mat.shape[2]
        if len(rnd) and int(rnd.max()) >= rounds:
            raise ResultError(str(f.path), "holds a round beyond its footer's statistics")
        m = measured
        val = np.where(timeout[m] | ~has_rtt[m], _TIMEOUT, np.minimum(rtt[m], _MAX_RTT)).astype(np.uint32)
        mat.reshape(-1)[(src[m] * self.H + dst[m]) * rounds + rnd[m]] = val
        sends.reshape(-1)[src[m] * rounds + rnd[m]] = send[m]
        return part

    def _detect(self, jobs: list[tuple[tuple[str, str], np.ndarray, np.ndarray, np.ndarray]],
                by_pair: dict[tuple[str, str], list[Event]]) -> None:
        """Spikes and steps of each pair's raw RTTs, pairs in parallel (scipy and numpy release the GIL)."""
        if not jobs or not self.round_interval_s:
            return
        interval = self.round_interval_s
        with ThreadPoolExecutor(self.threads) as pool:
            found = pool.map(lambda j: detect_pair_events(j[1], j[2], interval, self.window_s, round_index=j[3]),
                             jobs)
            by_pair.update({j[0]: evs for j, evs in zip(jobs, found, strict=True)})

    def _keep(self, rep: int, mat: np.ndarray) -> None:
        """Keep a trial's round matrices for pass 2 while they fit in :data:`KEEP_BYTES`."""
        if self.kept is None:
            return
        if self.clamped or sum(m.nbytes for _, m in self.kept) + mat.nbytes > KEEP_BYTES:
            self.kept = None  # pass 2 reads the files again
            return
        self.kept.append((self.rep_pos[rep], mat))

    def _finish_file(self, f: _File, rep: int, mat: np.ndarray, sends: np.ndarray) -> None:
        """Quorum latencies, per-pair window medians and per-pair events of one trial file."""
        rp = self.rep_pos[rep]
        for qi, (_, idx, ks, _) in enumerate(self.quorums):
            cols = np.array(idx, dtype=np.int64)
            for s in idx:
                sub = mat[s][cols]  # members × rounds
                present = (sub != _MISSING).any(axis=0)
                if not present.any():
                    continue
                sub = sub[:, present]
                us = np.where(sub >= _TIMEOUT, np.inf, sub.astype(np.float64) / 1000.0)
                for k in ks:
                    if k > len(idx):
                        raise ResultError(str(f.path), f"quorum k={k} exceeds its {len(idx)} members")
                    kth = np.partition(us, k - 1, axis=0)[k - 1]
                    self.quorum_values.setdefault((qi, k, rp), []).append(kth)
        by_pair: dict[tuple[str, str], list[Event]] = {}
        jobs: list[tuple[tuple[str, str], np.ndarray, np.ndarray, np.ndarray]] = []
        for s in range(self.H):
            wins = np.where(sends[s] >= 0, sends[s] // self.window_us, -1)
            for d in range(self.H):
                if d == s:
                    continue
                col = mat[s, d]
                valid = col < _TIMEOUT
                if not valid.any():
                    continue
                rtt_us = col.astype(np.float64) / 1000.0
                ids, med = ost.window_medians(rtt_us, valid, wins)
                g = int(self.group_lut[rp, s, d])
                self.pair_series.append((rep, f.trial, f"{self.hosts[s]}>{self.hosts[d]}",
                                         GROUP_ORDER[g].value if g >= 0 else "",
                                         ids * self.window_s, med))
                if self.round_interval_s:
                    jobs.append(((self.hosts[s], self.hosts[d]), sends[s][valid] / 1e6, rtt_us[valid],
                                 np.flatnonzero(valid)))
            self._detect(jobs, by_pair)  # one sender's pairs at a time: memory holds only those
            jobs = []
        if self.round_interval_s:
            labelled = label_host_events(by_pair, self.round_interval_s, self.window_s)
            for (src, dst), evs in sorted(labelled.items()):
                t0 = f.t0_utc_us.get(src)
                for e in evs:
                    row = e.to_row(repetition=rep, trial=f.trial, series=f"{src}>{dst}")
                    row["time_utc"] = utc_of(t0, float(row["time_s"]))
                    self.events.append(row)

    def distribution(self, key: int, stats: dict[int, dict[int, int]]) -> dict[str, float | int]:
        """count, timeouts, mean, Table-1 percentiles and max (µs) of one key (after :meth:`pass2`)."""
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
        return row

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
            if self._kept_complete():
                assert self.kept is not None
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

    def _kept_complete(self) -> bool:
        """The kept matrices hold every valid RTT exactly once (no clamped value, no duplicate row)."""
        if self.kept is None or self.clamped:
            return False
        counts = np.zeros(self.n_leaf, dtype=np.int64)
        H = self.H
        for rp, m in self.kept:
            per = np.count_nonzero(m < _TIMEOUT, axis=2).reshape(-1)
            counts[rp * H * H:(rp + 1) * H * H] += per
        return bool(np.array_equal(counts, self.leaf.hist.sum(axis=1)))

    def _pass2_cell(self, rp: int, mat: np.ndarray, s: int, d: int, need_leaf: np.ndarray) -> tuple[np.ndarray, ...]:
        """Pass 2 from a kept matrix: the values of one (sender, peer) in the needed bins."""
        col = mat[s, d]
        v = col[col < _TIMEOUT].astype(np.int64)
        leaf = (rp * self.H + s) * self.H + d
        bins = ost.value_bins(v)
        keep = need_leaf[leaf, bins]
        return np.full(int(keep.sum()), leaf, dtype=np.int64), bins[keep], v[keep]

    def _pass2_group(self, f: _File, group: int, need_leaf: np.ndarray) -> tuple[np.ndarray, ...]:
        t = _read(f, group, ("repetition", "src", "dst", "rtt_ns", "warmup"))
        if not t.num_rows:
            return (np.empty(0, dtype=np.int64),) * 3
        leaf, _, _, _ = self._keyed(t, f)
        rtt_col = t.column("rtt_ns")
        valid = ~_np(rtt_col.is_null(), bool) & ~_np(t.column("warmup"), bool)
        leaf, rtt = leaf[valid], _np(rtt_col.fill_null(0), np.int64)[valid]
        bins = ost.value_bins(rtt)
        keep = need_leaf[leaf, bins]
        return leaf[keep], bins[keep], rtt[keep]


def _hist(keys: np.ndarray, bins: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys present, their histograms): counts of every (key, bin), for the keys present only."""
    present = np.flatnonzero(np.bincount(keys, minlength=n_keys))
    if not len(keys):
        return present, np.zeros((0, ost.NBINS), dtype=np.int64)
    local = np.searchsorted(present, keys) if len(present) > 1 else np.zeros(len(keys), dtype=np.int64)
    counts = np.bincount(local * ost.NBINS + bins, minlength=len(present) * ost.NBINS)
    return present, counts.reshape(len(present), ost.NBINS)


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
    windows, pair_windows = _windows(scan)
    quorums_all: list[dict[str, Any]] = []
    quorums_rep: dict[int, list[dict[str, Any]]] = {r: [] for r in scan.reps}
    for qi, (name, _, ks, n_members) in enumerate(scan.quorums):
        for k in ks:
            per_rep = {r: np.concatenate(scan.quorum_values.get((qi, k, rp), [np.empty(0)]))
                       for r, rp in scan.rep_pos.items()}
            label = {"quorum": f"Q{k}/{n_members}", "group": name}
            quorums_all.append({**label, **_quorum_row(np.concatenate([np.empty(0), *per_rep.values()]))})
            for r, q in per_rep.items():
                if len(q):
                    quorums_rep[r].append({**label, **_quorum_row(q)})
    quorum_values = {f"Q{k}/{n_members} {name}": np.concatenate(
        [np.empty(0), *(v for rp in scan.rep_pos.values() for v in scan.quorum_values.get((qi, k, rp), []))])
        for qi, (name, _, ks, n_members) in enumerate(scan.quorums) for k in ks}
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
    pair_rows = [{"repetition": int(rep_of[a]), "trial": scan.files[a].trial, "window": int(wi),
                  "start_s": float(wi * scan.window_s), "start_utc": utc_of(t0[a], wi * scan.window_s),
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
                     "start_s": float(wi * scan.window_s), "start_utc": utc_of(t0[a], wi * scan.window_s),
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
    return datetime.fromtimestamp(t0_us / 1e6 + offset_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
