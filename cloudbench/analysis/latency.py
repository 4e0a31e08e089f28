"""Latency analysis of echo observations: groups, tails, quorums, windows, pairs.

All functions are pure: arrays in, numbers out. Percentiles use the linear
interpolation between order statistics of Hyndman & Fan's definition 7 (numpy's
default ``method="linear"``); warm-up rows are excluded and timeouts are counted
apart, never folded into the RTT distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cloudbench.core.topology import GROUP_ORDER, PairGroup

PERCENTILES: tuple[float, ...] = (5, 25, 50, 90, 95, 99, 99.9, 99.99, 99.999)


def pct_label(p: float) -> str:
    return "p" + (f"{p:g}".replace(".", "."))


def quantiles_sorted(xs: np.ndarray, ps: Sequence[float]) -> np.ndarray:
    """Quantiles (ps in [0, 100]) of an ascending array; Hyndman & Fan type 7.

    h = (n-1)·p; the result interpolates between xs[floor(h)] and xs[ceil(h)].
    """
    n = len(xs)
    if n == 0:
        return np.full(len(ps), np.nan)
    h = (n - 1) * (np.asarray(ps, dtype=float) / 100.0)
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    frac = h - lo
    out: np.ndarray = xs[lo] + (xs[hi] - xs[lo]) * frac
    return out


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


def distribution_row(rtt_us: np.ndarray, timeouts: int) -> dict[str, float | int]:
    """count, timeouts, mean, Table-1 percentiles and max of RTTs in µs."""
    xs = np.sort(rtt_us[~np.isnan(rtt_us)])
    row: dict[str, float | int] = {"count": int(len(xs) + timeouts), "timeouts": int(timeouts)}
    row["mean"] = float(xs.mean()) if len(xs) else float("nan")
    for p, v in zip(PERCENTILES, quantiles_sorted(xs, PERCENTILES), strict=True):
        row[pct_label(p)] = float(v)
    row["max"] = float(xs[-1]) if len(xs) else float("nan")
    return row


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


BOX_PERCENTILES: tuple[float, ...] = (5, 25, 50, 75, 95)
"""The box plot's levels (StormCloud Fig. 3): whiskers p5 and p95, box p25–p75, median."""

CCDF_EXCEEDANCE: tuple[float, ...] = tuple(float(10 ** (-k / 4)) for k in range(21))
"""Levels of the tail plot: P(RTT > x) from 1 down to 1e-5 (p99.999), four per decade."""


def box_stats(rtt_us: np.ndarray) -> dict[str, float]:
    """The five box-plot quantiles (:data:`BOX_PERCENTILES`, type 7) and the mean of the
    finite RTTs; NaN when there are none."""
    xs = np.sort(rtt_us[np.isfinite(rtt_us)])
    out = {pct_label(p): float(v) for p, v in zip(BOX_PERCENTILES, quantiles_sorted(xs, BOX_PERCENTILES),
                                                   strict=True)}
    out["mean"] = float(xs.mean()) if len(xs) else float("nan")
    return out


def ccdf_points(rtt_us: np.ndarray, exceedance: Sequence[float] = CCDF_EXCEEDANCE) -> list[tuple[float, float]]:
    """The empirical CCDF at fixed levels: (P(RTT > x), x) pairs, x the type-7 quantile
    at 1 − level; levels below 1/n (beyond what n replies can show) are left out,
    and the largest RTT closes the curve at 1/n. Timeouts are not RTTs (counted apart)."""
    xs = np.sort(rtt_us[np.isfinite(rtt_us)])
    n = len(xs)
    if n == 0:
        return []
    levels = [e for e in exceedance if e >= 1.0 / n]
    qs = quantiles_sorted(xs, [100.0 * (1.0 - e) for e in levels])
    pts = [(float(e), float(q)) for e, q in zip(levels, qs, strict=True)]
    if not levels or levels[-1] > 1.0 / n:
        pts.append((1.0 / n, float(xs[-1])))
    return pts


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


__all__ = ["BOX_PERCENTILES", "CCDF_EXCEEDANCE", "PERCENTILES", "EchoData", "PairGroup", "box_stats",
           "ccdf_points", "group_boxes", "group_table", "group_tails", "pair_table", "pair_windowed_means",
           "quantiles_sorted", "quorum_latencies", "quorum_table", "windowed_means"]
