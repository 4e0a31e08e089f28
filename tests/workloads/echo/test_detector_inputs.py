"""The scan's inputs to the per-pair event detector: the same values as the plain numpy
expressions, written into the thread's scratch arrays whatever the pattern of missing rounds."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis import events_median
from cloudbench.workloads.echo.matrices import SEND_BASE
from cloudbench.workloads.echo.scan import MAX_INPUT_RUNS, _detector_inputs


@pytest.mark.parametrize("pattern", ["all", "first", "last", "ends", "adjacent", "few", "many", "one left"])
def test_the_detector_inputs_are_the_gathered_times_and_rtts(pattern: str) -> None:
    rng = np.random.default_rng(7)
    rounds = 5000
    stored = SEND_BASE - (1_000_003 + np.cumsum(rng.integers(9_990, 10_010, rounds)))
    snd = SEND_BASE - stored
    valid = np.ones(rounds, dtype=bool)
    missing = {"all": [], "first": [0], "last": [rounds - 1], "ends": [0, 1, rounds - 1],
               "adjacent": [10, 11, 12, 400], "few": rng.choice(rounds, MAX_INPUT_RUNS - 1, replace=False),
               "many": rng.choice(rounds, 3 * MAX_INPUT_RUNS, replace=False),
               "one left": np.arange(1, rounds)}[pattern]
    valid[np.asarray(missing, dtype=np.int64)] = False
    cells = rng.integers(20_000, 300_000, rounds).astype(np.uint32)
    v = cells[valid]
    # a longer pair first: the scratch arrays hold its values past this pair's end
    _detector_inputs(stored, np.ones(rounds, dtype=bool), cells)
    t_s, rtt_us = _detector_inputs(stored, valid, v)
    assert t_s.tolist() == (snd[valid] / 1e6).tolist()
    assert rtt_us.tolist() == (v / 1000.0).tolist()
    assert t_s.dtype == rtt_us.dtype == np.float64


def test_a_scratch_array_is_reused_by_a_slightly_longer_pair() -> None:
    """Pairs of a run differ by a few echoes: each longer one used to allocate (and zero) anew."""
    first = events_median.scratch_array("test_reuse", 100_000)
    longer = events_median.scratch_array("test_reuse", 100_000 + 100_000 // events_median.SCRATCH_HEADROOM)
    assert np.shares_memory(first, longer)
    beyond = events_median.scratch_array("test_reuse", 200_000)
    assert not np.shares_memory(first, beyond) and len(beyond) == 200_000
