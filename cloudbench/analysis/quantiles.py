"""Quantile names and levels: the one table of the percentiles cloudbench reports.

A quantile's name is ``p`` and its level in percent (``p50``, ``p99``, ``p99.9``);
:data:`PERCENTILES` lists the ones the reports use, so a table's columns, a summary's
metric names and a figure's marks spell them the same way. ``confirm`` names any
quantile it is asked for (:func:`quantile_name`: ``median`` for 0.5).
"""

from __future__ import annotations

import math

from cloudbench.errors import AnalysisError

PERCENTILES: dict[str, float] = {
    "p5": 0.05, "p25": 0.25, "p50": 0.50, "p75": 0.75, "p90": 0.90, "p95": 0.95,
    "p99": 0.99, "p99.9": 0.999, "p99.99": 0.9999, "p99.999": 0.99999,
}
"""Name -> level of the percentiles in cloudbench's reports, in increasing order."""


def percentile_name(p: float) -> str:
    """``p50`` for 0.5, ``p99.9`` for 0.999: ``p`` and the level in percent (6 digits)."""
    if not 0.0 < p < 1.0:
        raise AnalysisError(f"a quantile's level must be in (0, 1), got {p}")
    return "p" + f"{p * 100:.6g}"


def quantile_name(p: float) -> str:
    """``median`` for 0.5, else the percentile's name (``p90``, ``p99``, ``p99.9`` ...)."""
    if math.isclose(p, 0.5):
        return "median"
    return percentile_name(p)
