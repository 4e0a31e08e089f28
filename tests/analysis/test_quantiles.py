"""The one table of percentile names: every name is the level's spelling, the constants are the
table's names, and the results that key values by percentile use them."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from cloudbench.analysis import quantiles as q
from cloudbench.analysis.latency import pct_label
from cloudbench.analysis.throughput import series_stats
from cloudbench.errors import AnalysisError


def test_the_table_names_each_level_and_the_constants_are_its_names() -> None:
    assert list(q.PERCENTILES.values()) == sorted(q.LEVELS) == list(q.LEVELS)
    for name, level in q.PERCENTILES.items():
        assert name == q.percentile_name(level) == pct_label(level * 100)
    constants = (q.P5, q.P25, q.P50, q.P75, q.P90, q.P95, q.P99, q.P99_9, q.P99_99, q.P99_999)
    assert constants == tuple(q.PERCENTILES)
    assert (q.P50, q.P99_9, q.P99_999) == ("p50", "p99.9", "p99.999")  # the spelling on disk and in reports
    assert q.quantile_name(0.5) == "median" and q.quantile_name(0.999) == q.P99_9
    with pytest.raises(AnalysisError):
        q.percentile_name(1.0)


def test_throughput_percentiles_are_keyed_by_the_table_s_names() -> None:
    rng = np.random.default_rng(0)
    st = series_stats(rng.uniform(1e6, 2e6, 50), np.full(50, 0.1))
    assert list(st.percentiles) == [q.P5, q.P25, q.P50, q.P75, q.P95]
    assert st.percentiles[q.P5] < st.percentiles[q.P50] < st.percentiles[q.P95]
    empty = series_stats(np.zeros(0), np.zeros(0))
    assert list(empty.percentiles) == list(st.percentiles)


def test_no_module_spells_a_percentile_s_name_itself() -> None:
    """Outside the table, a string that is exactly a percentile's name (``"p99"``) is a second
    spelling that can drift: the constants are used instead."""
    root = Path(q.__file__).resolve().parents[1]
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == Path(q.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in q.PERCENTILES:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.value!r}")
    assert not found, "percentile names spelled outside analysis/quantiles.py:\n" + "\n".join(found)
