"""Issue 16, point 5: every interval the report prints holds its nominal level.

Each check simulates at least 1,000 data sets with a known truth
(:mod:`cloudbench.testing.coverage`) and asserts that the achieved coverage is
at least the nominal level minus three binomial standard errors (a miss by
chance then has probability ≈ 0.1 %). ``bench/coverage_table.py`` prints the
same numbers as the README's table.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cloudbench.analysis.throughput import capacity_lower_bound
from cloudbench.testing import coverage as cv


def check(results: list[cv.Coverage], min_datasets: int = 1000) -> None:
    for c in results:
        print(f"{c.interval}: {c.achieved:.3f} of {c.datasets} (nominal {c.nominal}) {c.note}")
        assert c.datasets >= min_datasets, c
        assert c.achieved >= c.nominal - 3 * c.se, c


@pytest.mark.parametrize("fn", [cv.quantile_cis, cv.drains, cv.event_sizes, cv.event_size_intervals,
                                cv.capacity, cv.confirm_predictions, cv.confirm_slope_intervals],
                         ids=lambda f: f.__name__)
def test_interval_covers_at_its_nominal_level(fn: Callable[[], list[cv.Coverage]]) -> None:
    check(fn())


def test_the_check_fails_a_bound_that_does_not_hold() -> None:
    """The max of 5 s window means (Persico et al.), printed as "cap ≥", is not a
    95 % bound: byte counts jittering across interval edges lift it above the
    capacity in most runs. The check must reject it."""
    (old,) = cv.capacity(bound=capacity_lower_bound)
    print(f"{old.interval}: {old.achieved:.3f}")
    with pytest.raises(AssertionError):
        check([old])
