"""WindowLayout: a steady sender's window statistics from reshaped matrix rows equal
window_stats' on the gathered RTTs, and irregular windows are left to window_stats."""

from __future__ import annotations

import numpy as np

from cloudbench.analysis.orderstats import window_stats
from cloudbench.workloads.echo.matrices import WindowLayout


def _sender(rng: np.random.Generator, steady: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """(window id per round, one peer's cells as stored, rounds) with silent rounds, rounds
    without reply, ties, empty windows and a partial last window."""
    rounds = int(rng.integers(1, 400))
    length = int(rng.integers(1, 40))
    offset = int(rng.integers(0, length))
    wins = (np.arange(rounds) + offset) // length + int(rng.integers(0, 5))
    if not steady:  # jitter moves rounds across window edges: unequal spans
        wins = np.maximum.accumulate(wins + (rng.random(rounds) < 0.1))
    silent = rng.random(rounds) < rng.choice([0.0, 0.1, 0.5])
    silent[: int(rng.integers(0, 3))] = True  # a sender that starts late
    wins = np.where(silent, -1, wins)
    cells = (rng.integers(0, rng.choice([3, 1000, 1 << 31]), rounds) + 2).astype(np.uint32)
    cells[rng.random(rounds) < rng.choice([0.0, 0.05, 0.3])] = 1  # no reply
    cells[rng.random(rounds) < 0.05] = 0  # no row for this peer
    cells[silent] = 0
    if rng.random() < 0.2:  # a window without any RTT of this peer
        w = wins[wins >= 0]
        if len(w):
            cells[wins == w[len(w) // 2]] = 0
    return wins, cells, rounds


def test_layout_stats_equal_window_stats_and_irregular_windows_fall_back() -> None:
    rng = np.random.default_rng(11)
    by_layout = fallback = 0
    for case in range(600):
        wins, cells, rounds = _sender(rng, steady=case % 3 != 0)
        valid = cells >= 2
        v = cells[valid] - np.uint32(2)
        layout = WindowLayout.of(wins, rounds)
        got = layout.stats(cells, valid, v) if layout is not None and len(v) else None
        if got is None:
            fallback += 1
            continue
        by_layout += 1
        want = window_stats(v, wins[valid])
        for name, a, b in zip(("ids", "counts", "sums", "medians"), got, want, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), (case, name, a, b)
    assert by_layout > 250 and fallback > 100, (by_layout, fallback)


def test_unequal_or_unordered_windows_have_no_layout() -> None:
    assert WindowLayout.of(np.array([0, 1, 1, 1, 2, 2, 2, 2]), 8) is None  # spans of 1, 3 and 4 rounds
    lay = WindowLayout.of(np.array([0, 0, 1, 1, 1, 2, 2]), 7)  # 2, 3, 2: spans of 3 from round -1
    assert lay is not None and (lay.first, lay.length) == (-1, 3)
    assert WindowLayout.of(np.array([0, 0, 2, 2, 1, 1]), 6) is None  # not in order
    assert WindowLayout.of(np.array([-1, -1]), 2) is None  # a sender that sent nothing
    lay = WindowLayout.of(np.array([-1, 3, 3, 4, 4, -1, 5]), 7)  # silent rounds; a partial last span
    assert lay is not None and (lay.first, lay.length, lay.ids.tolist()) == (1, 2, [3, 4, 5])
    lay = WindowLayout.of(np.array([3, 4, 4, 5, 5, -1, -1, 7]), 8)  # a window without rounds (6)
    assert lay is not None and (lay.first, lay.length, lay.ids.tolist()) == (-1, 2, [3, 4, 5, 6, 7])
