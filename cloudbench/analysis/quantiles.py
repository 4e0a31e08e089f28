"""Quantile names and levels: the one table of the percentiles cloudbench reports.

A quantile's name is ``p`` and its level in percent (``p50``, ``p99``, ``p99.9``);
:data:`PERCENTILES` lists the ones the reports use, so a table's columns, a summary's
metric names and a figure's marks spell them the same way. ``confirm`` names any
quantile it is asked for (:func:`quantile_name`: ``median`` for 0.5). Code that names one
of the table's percentiles uses its constant (:data:`P50`, :data:`P99_9` ...), never the
string, so a key, a column and a label cannot drift apart.
"""

from __future__ import annotations

import math

from cloudbench.errors import AnalysisError


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


LEVELS: tuple[float, ...] = (0.05, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.999, 0.9999, 0.99999)
"""The levels of the percentiles in cloudbench's reports, in increasing order."""

PERCENTILES: dict[str, float] = {percentile_name(p): p for p in LEVELS}
"""Name -> level of the percentiles in cloudbench's reports, in increasing order."""

P5, P25, P50, P75, P90, P95, P99, P99_9, P99_99, P99_999 = PERCENTILES
"""The table's names (``p5`` ... ``p99.999``): the keys, columns and labels of those percentiles."""
