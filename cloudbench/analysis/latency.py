"""Latency analysis of echo observations: groups, tails, quorums, windows, pairs.

All functions are pure: arrays in, numbers out. Percentiles use the linear
interpolation between order statistics of Hyndman & Fan's definition 7 (numpy's
default ``method="linear"``); warm-up rows are excluded and timeouts are counted
apart, never folded into the RTT distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cloudbench.core.topology import PairGroup

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


def distribution_row(rtt_us: np.ndarray, timeouts: int) -> dict[str, float | int]:
    """count, timeouts, mean, Table-1 percentiles and max of RTTs in µs."""
    xs = np.sort(rtt_us[~np.isnan(rtt_us)])
    row: dict[str, float | int] = {"count": int(len(xs) + timeouts), "timeouts": int(timeouts)}
    row["mean"] = float(xs.mean()) if len(xs) else float("nan")
    for p, v in zip(PERCENTILES, quantiles_sorted(xs, PERCENTILES), strict=True):
        row[pct_label(p)] = float(v)
    row["max"] = float(xs[-1]) if len(xs) else float("nan")
    return row


__all__ = ["PERCENTILES", "PairGroup", "distribution_row", "pct_label", "quantiles_sorted"]
