"""The echo analysis as it was before the engine: numpy over every row (the oracle of tests).

Copied from cloudbench 7ebcec0 (workloads/echo/data.py, analysis/latency.py,
analysis/levelshift.py, workloads/echo/summaries.py) when the report moved to the
streaming engine; tests compare the two on fixtures. Not for large runs: it holds
every row in memory.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cloudbench.analysis.events import Event, detect_pair_events, label_host_events
from cloudbench.analysis.latency import box_stats, ccdf_points, distribution_row, quantiles_sorted
from cloudbench.analysis.levelshift import detect
from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files
from cloudbench.store.summaries import SummaryRow, quorum_group, summary_row

Quorum = tuple[str, list[str], list[int]]

@dataclass
class EchoData:
    """Echo observations of one run as flat arrays (one element per row)."""

    repetition: np.ndarray  # int
    trial: np.ndarray  # int, index into trials
    round: np.ndarray
    src: np.ndarray  # int, index into hosts
    dst: np.ndarray
    send_us: np.ndarray
    rtt_us: np.ndarray  # float, nan on timeout
    timeout: np.ndarray  # bool
    warmup: np.ndarray  # bool
    group: np.ndarray  # int, index into GROUP_ORDER
    hosts: list[str]
    trials: list[str]

    def __len__(self) -> int:
        return len(self.round)

    def measured(self) -> np.ndarray:
        """Mask of rows that count (not warm-up)."""
        return ~self.warmup

def group_table(d: EchoData, mask: np.ndarray | None = None) -> list[dict[str, Any]]:
    """One row per latency group present (self … cross region)."""
    m = d.measured() if mask is None else mask & d.measured()
    out: list[dict[str, Any]] = []
    for gi, g in enumerate(GROUP_ORDER):
        sel = m & (d.group == gi)
        if not sel.any():
            continue
        out.append({"group": g.value, **distribution_row(d.rtt_us[sel], int(d.timeout[sel].sum()))})
    return out


def quorum_latencies(d: EchoData, members: Sequence[str], k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """k-th fastest reply among ``members`` for every (repetition, trial, sender, round).

    Senders are the members themselves; replies are those from members (a member's
    self-loop counts as one reply when present). A timeout is an infinitely late
    reply, so a round with fewer than k replies has an infinite quorum latency.
    """
    idx = np.array([d.hosts.index(h) for h in members if h in d.hosts], dtype=np.int64)
    m = (d.measured() if mask is None else mask & d.measured()) & np.isin(d.src, idx) & np.isin(d.dst, idx)
    if not m.any():
        return np.empty(0)
    rtt = np.where(d.timeout[m] | np.isnan(d.rtt_us[m]), np.inf, d.rtt_us[m])
    keys = np.stack([d.repetition[m], d.trial[m], d.src[m], d.round[m]])
    uniq, inverse = np.unique(keys, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    col = np.searchsorted(idx, d.dst[m]) if np.all(np.diff(idx) > 0) else np.array(
        [int(np.where(idx == x)[0][0]) for x in d.dst[m]])
    mat = np.full((uniq.shape[1], len(idx)), np.inf)
    mat[inverse, col] = rtt
    if k > len(idx):
        raise ValueError(f"k={k} exceeds the {len(idx)} members")
    return np.sort(mat, axis=1)[:, k - 1]


def quorum_table(d: EchoData, quorums: Sequence[tuple[str, Sequence[str], Sequence[int]]],
                 mask: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Rows ``Qk/n`` for each (name, members, ks) of the spec."""
    out: list[dict[str, Any]] = []
    for name, members, ks in quorums:
        for k in ks:
            q = quorum_latencies(d, members, k, mask)
            finite = q[np.isfinite(q)]
            out.append({"quorum": f"Q{k}/{len(members)}", "group": name,
                        **distribution_row(finite, int((~np.isfinite(q)).sum()))})
    return out


def windowed_means(d: EchoData, window_s: float) -> list[dict[str, Any]]:
    """Mean RTT per (repetition, trial, window, group), windows aligned to round 0."""
    m = d.measured() & ~np.isnan(d.rtt_us)
    w = (d.send_us // int(window_s * 1e6)).astype(np.int64)
    keys = np.stack([d.repetition[m], d.trial[m], w[m], d.group[m]])
    if keys.shape[1] == 0:
        return []
    uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    sums = np.bincount(inv, weights=d.rtt_us[m])
    counts = np.bincount(inv)
    return [
        {"repetition": int(r), "trial": d.trials[int(t)], "window": int(wi),
         "start_s": float(wi * window_s), "group": GROUP_ORDER[int(g)].value,
         "count": int(c), "mean": float(s / c)}
        for (r, t, wi, g), s, c in zip(uniq.T, sums, counts, strict=True)
    ]


def pair_table(d: EchoData) -> list[dict[str, Any]]:
    """Per (src, dst): group, count, timeouts, mean, p50, p99, max."""
    m = d.measured()
    keys = np.stack([d.src[m], d.dst[m]])
    if keys.shape[1] == 0:
        return []
    uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    rtt, tmo, grp = d.rtt_us[m], d.timeout[m], d.group[m]
    order = np.argsort(inv, kind="stable")
    bounds = np.searchsorted(inv[order], np.arange(uniq.shape[1] + 1))
    out = []
    for j, (s, t) in enumerate(uniq.T):
        sel = order[bounds[j]:bounds[j + 1]]
        xs = np.sort(rtt[sel][~np.isnan(rtt[sel])])
        q = quantiles_sorted(xs, (50, 99))
        out.append({"src": d.hosts[int(s)], "dst": d.hosts[int(t)],
                    "group": GROUP_ORDER[int(grp[sel][0])].value,
                    "count": len(sel), "timeouts": int(tmo[sel].sum()),
                    "mean": float(xs.mean()) if len(xs) else float("nan"),
                    "p50": float(q[0]), "p99": float(q[1]),
                    "max": float(xs[-1]) if len(xs) else float("nan")})
    return out


def pair_window_medians(d: EchoData, window_s: float) -> list[tuple[tuple[int, int, int, int], np.ndarray, np.ndarray]]:
    """Median RTT per window for each (repetition, trial, src, dst): (key, starts_s, medians)."""
    m = d.measured() & ~np.isnan(d.rtt_us)
    if not m.any():
        return []
    w = (d.send_us[m] // int(window_s * 1e6)).astype(np.int64)
    keys = np.stack([d.repetition[m], d.trial[m], d.src[m], d.dst[m], w])
    rtt = d.rtt_us[m]
    order = np.lexsort((rtt, *keys[::-1]))
    keys, rtt = keys[:, order], rtt[order]
    change = np.any(np.diff(keys, axis=1) != 0, axis=0)
    starts = np.concatenate([[0], np.flatnonzero(change) + 1])
    ends = np.concatenate([starts[1:], [keys.shape[1]]])
    lo, hi = (starts + ends - 1) // 2, (starts + ends) // 2
    med = (rtt[lo] + rtt[hi]) / 2.0
    series: dict[tuple[int, int, int, int], tuple[list[float], list[float]]] = {}
    for s, v in zip(starts, med, strict=True):
        r, tr, a, b, wi = (int(x) for x in keys[:, s])
        ts, vs = series.setdefault((r, tr, a, b), ([], []))
        ts.append(wi * window_s)
        vs.append(float(v))
    return [(k, np.array(ts), np.array(vs)) for k, (ts, vs) in sorted(series.items())]


def echo_level_shifts(d: EchoData, window_s: float, round_interval_s: float | None = None,
                      **params: Any) -> list[dict[str, Any]]:
    """Level shifts of every group's series (per window, the median of its pairs' window
    medians) and, per pair, its events on raw RTTs (:func:`pair_events`, when
    ``round_interval_s`` is given), not the pair's window medians again."""
    rows: list[dict[str, Any]] = []
    if round_interval_s:
        groups = {}
        for (r, tr, a, b), _ts, _vs in pair_window_medians(d, window_s):
            sel = (d.src == a) & (d.dst == b)
            groups[(r, d.trials[tr], f"{d.hosts[a]}>{d.hosts[b]}")] = (
                GROUP_ORDER[int(d.group[sel][0])].value if sel.any() else "")
        for e in pair_events(d, window_s, round_interval_s):
            rows.append({"repetition": e["repetition"], "trial": e["trial"], "series": e["series"],
                         "group": groups.get((e["repetition"], e["trial"], e["series"]), ""),
                         "statistic": "raw RTTs (the per-pair events)", "kind": e["kind"], "time_s": e["time_s"],
                         "size": e["size"], "before": e["before"], "after": e["after"], "windows": 1,
                         "p_value": e["p_value"]})
    by_group: dict[tuple[int, str, str], dict[float, list[float]]] = {}
    for (r, tr, a, b), ts, vs in pair_window_medians(d, window_s):
        if a == b:
            continue
        group = ""
        sel = (d.src == a) & (d.dst == b)
        if sel.any():
            group = GROUP_ORDER[int(d.group[sel][0])].value
        if group not in ("", "self"):
            for t, v in zip(ts, vs, strict=True):
                by_group.setdefault((r, d.trials[tr], group), {}).setdefault(float(t), []).append(float(v))
    for (r, tr_name, g), wins in sorted(by_group.items()):
        starts = sorted(wins)
        for s in detect(np.array(starts), np.array([np.median(wins[t]) for t in starts]), **params):
            rows.append(s.to_row(repetition=r, trial=tr_name, series=f"group:{g}", group=g,
                                 statistic="median of the pairs' window medians"))
    return rows


def load_echo(run: RunDir, manifest: Manifest, workload: str = "echo") -> EchoData:
    """Read a run's echo Parquet files and label every row with its latency group."""
    labels = {(rep, name): HostSpec(name, lab["provider"], lab["region"], lab["zone"], lab["subnet"],
                                    lab["vm_type"])
              for (rep, name), lab in manifest.labels().items()}
    host_names = sorted({n for _, n in labels})
    host_idx = {n: i for i, n in enumerate(host_names)}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in
                                         ("repetition", "trial", "round", "src", "dst", "send_us",
                                          "rtt_us", "timeout", "warmup", "group")}
    trials: list[str] = []
    for path in iter_observation_files(run, workload):
        t = read_parquet(path, kind="echo")
        trials.append(path.stem)
        n = t.num_rows
        rep = t.column("repetition").to_numpy().astype(np.int64)
        src_names = _strings(t.column("src"))
        dst_names = _strings(t.column("dst"))
        src = np.array([host_idx.get(s, -1) for s in src_names], dtype=np.int64)
        dst = np.array([host_idx.get(s, -1) for s in dst_names], dtype=np.int64)
        if (src < 0).any() or (dst < 0).any():
            raise ResultError(str(path), "names hosts that the manifest does not list")
        # Classify each distinct (repetition, src, dst) once, then broadcast to rows.
        keys, inv = np.unique(np.stack([rep, src, dst]), axis=1, return_inverse=True)
        codes = np.array([
            GROUP_ORDER.index(classify_pair(labels[(int(r), host_names[int(a)])],
                                            labels[(int(r), host_names[int(b)])]))
            for r, a, b in keys.T
        ], dtype=np.int64)
        grp = codes[inv.reshape(-1)] if n else np.empty(0, dtype=np.int64)
        rtt = t.column("rtt_ns")
        cols["repetition"].append(rep)
        cols["trial"].append(np.full(n, len(trials) - 1, dtype=np.int64))
        cols["round"].append(t.column("round").to_numpy().astype(np.int64))
        cols["src"].append(src)
        cols["dst"].append(dst)
        cols["send_us"].append(t.column("send_us").to_numpy().astype(np.int64))
        cols["rtt_us"].append(pc.divide(pc.cast(rtt, pa.float64()), 1000.0).to_numpy(zero_copy_only=False)
                              .astype(float))
        cols["timeout"].append(t.column("timeout").to_numpy(zero_copy_only=False).astype(bool))
        cols["warmup"].append(t.column("warmup").to_numpy(zero_copy_only=False).astype(bool))
        cols["group"].append(grp)
    arrays = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in cols.items()}
    return EchoData(
        repetition=arrays["repetition"].astype(np.int64),
        trial=arrays["trial"].astype(np.int64),
        round=arrays["round"].astype(np.int64),
        src=arrays["src"].astype(np.int64),
        dst=arrays["dst"].astype(np.int64),
        send_us=arrays["send_us"].astype(np.int64),
        rtt_us=arrays["rtt_us"].astype(float),
        timeout=arrays["timeout"].astype(bool),
        warmup=arrays["warmup"].astype(bool),
        group=arrays["group"].astype(np.int64),
        hosts=host_names,
        trials=trials,
    )


def _strings(col: pa.ChunkedArray) -> list[str]:
    if pa.types.is_dictionary(col.type):
        col = col.cast(pa.string())
    return [str(x) for x in col.to_pylist()]

def echo_summaries(run: RunDir, d: EchoData, workload: str, quorums: list[Quorum]) -> list[SummaryRow]:
    """Per repetition: p50, p99, mean and timeout share per latency group; quorum p50 and p99."""
    rows: list[SummaryRow] = []
    for rep in sorted(set(d.repetition.tolist())):
        mask = d.repetition == rep
        for g in group_table(d, mask):
            for metric, key in (("rtt_p50_us", "p50"), ("rtt_p99_us", "p99"), ("rtt_mean_us", "mean")):
                rows.append(summary_row(run, rep, workload, metric, g["group"], g[key], "us", g["count"]))
            rows.append(summary_row(run, rep, workload, "timeout_frac", g["group"],
                                    g["timeouts"] / max(g["count"], 1), "1", g["count"]))
        for q in quorum_table(d, quorums, mask):
            k, n = q["quorum"][1:].split("/")
            for metric, key in ((f"quorum_q{k}of{n}_p50_us", "p50"), (f"quorum_q{k}of{n}_p99_us", "p99")):
                rows.append(summary_row(run, rep, workload, metric, quorum_group(q["group"]), q[key],
                                        "us", q["count"]))
    return rows


def group_boxes(d: EchoData) -> list[dict[str, Any]]:
    """Per latency group present: ``group``, ``count`` of RTTs, p5, p25, p50, p75, p95, mean (µs)."""
    m = d.measured()
    out: list[dict[str, Any]] = []
    for gi, g in enumerate(GROUP_ORDER):
        sel = m & (d.group == gi)
        if sel.any():
            rtt = d.rtt_us[sel]
            out.append({"group": g.value, "count": int(np.isfinite(rtt).sum()), **box_stats(rtt)})
    return out


def group_tails(d: EchoData) -> list[dict[str, Any]]:
    """Per latency group present, the CCDF points of :func:`ccdf_points`:
    rows ``group``, ``exceedance`` (P(RTT > rtt_us)), ``rtt_us``."""
    m = d.measured()
    out: list[dict[str, Any]] = []
    for gi, g in enumerate(GROUP_ORDER):
        sel = m & (d.group == gi)
        if sel.any():
            out += [{"group": g.value, "exceedance": e, "rtt_us": x} for e, x in ccdf_points(d.rtt_us[sel])]
    return out


def pair_windowed_means(d: EchoData, window_s: float) -> list[dict[str, Any]]:
    """Mean RTT per (repetition, trial, src, dst, window), windows of ``window_s`` aligned to
    the sender's round 0 (as :func:`windowed_means`); self-loops included."""
    m = d.measured() & ~np.isnan(d.rtt_us)
    w = (d.send_us // int(window_s * 1e6)).astype(np.int64)
    keys = np.stack([d.repetition[m], d.trial[m], d.src[m], d.dst[m], w[m]])
    if keys.shape[1] == 0:
        return []
    uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    sums = np.bincount(inv, weights=d.rtt_us[m])
    counts = np.bincount(inv)
    grp = np.zeros(uniq.shape[1], dtype=np.int64)
    grp[inv] = d.group[m]
    return [
        {"repetition": int(r), "trial": d.trials[int(t)], "src": d.hosts[int(a)], "dst": d.hosts[int(b)],
         "group": GROUP_ORDER[int(g)].value, "window": int(wi), "start_s": float(wi * window_s),
         "count": int(c), "mean": float(sm / c)}
        for (r, t, a, b, wi), g, sm, c in zip(uniq.T, grp, sums, counts, strict=True)
    ]


def pair_events(d: EchoData, window_s: float, round_interval_s: float) -> list[dict[str, Any]]:
    """Spikes and steps of every ordered pair's raw RTTs, host events labelled.

    Times are seconds after the source worker's start (as ``send_us``), so the
    pairs of one source, which :func:`label_host_events` compares, share a clock.
    """
    m = d.measured() & ~np.isnan(d.rtt_us) & (d.src != d.dst)
    if not m.any():
        return []
    keys = np.stack([d.repetition[m], d.trial[m], d.src[m], d.dst[m]])
    uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    inv = inv.reshape(-1)
    t_all, y_all, r_all = d.send_us[m] / 1e6, d.rtt_us[m], d.round[m]
    runs: dict[tuple[int, int], dict[tuple[str, str], list[Event]]] = {}
    for k in range(uniq.shape[1]):
        rep, tr, a, b = (int(x) for x in uniq[:, k])
        sel = inv == k
        runs.setdefault((rep, tr), {})[(d.hosts[a], d.hosts[b])] = detect_pair_events(
            t_all[sel], y_all[sel], round_interval_s, window_s, round_index=r_all[sel])
    rows: list[dict[str, Any]] = []
    for (rep, tr), by_pair in sorted(runs.items()):
        for (src, dst), evs in sorted(label_host_events(by_pair, round_interval_s, window_s).items()):
            rows += [e.to_row(repetition=rep, trial=d.trials[tr], series=f"{src}>{dst}") for e in evs]
    return rows
