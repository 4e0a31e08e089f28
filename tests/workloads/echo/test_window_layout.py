"""WindowLayout: a steady sender's window statistics from its matrix rows (by the compiled
kernel, ``matrices_windows.c``, and by reshaped rows without a compiler) equal window_stats'
on the gathered RTTs, and irregular windows are left to window_stats."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cloudbench.analysis.orderstats import window_stats
from cloudbench.workloads.echo import matrices
from cloudbench.workloads.echo.matrices import WindowLayout


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[int] | None:
    """The path under test: a list that counts the kernel's calls, None on the numpy path."""
    calls: list[int] = []
    if request.param:
        fns = matrices._compiled()
        if fns is None:
            pytest.skip("no C compiler: the numpy path is all there is")

        def counted(name: str) -> Any:
            def call(*args: Any) -> Any:
                calls.append(1)
                return fns[name](*args)
            return call

        monkeypatch.setattr(matrices, "_compiled", lambda: {name: counted(name) for name in fns})
    else:
        monkeypatch.setattr(matrices, "_compiled", lambda: None)
        return None
    return calls


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


def test_layout_stats_equal_window_stats_and_irregular_windows_fall_back(compiled: list[int] | None) -> None:
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
    assert compiled is None or len(compiled) >= by_layout  # the kernel gave every layout's statistics


def _long_windows(rng: np.random.Generator, dtype: Any, values: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(window id per round, one peer's cells, rounds) of windows of up to 4,000 rounds, so the
    kernel's selection narrows by samples (not only sorts a few values): RTTs spread wide, all
    but a few alike, heavy with ties, or near the top of 8-byte cells (beyond float64's integers)."""
    length = int(rng.integers(50, 4000))
    k = int(rng.integers(1, 12))
    rounds = length * k - int(rng.integers(0, length))
    wins = (np.arange(rounds) + int(rng.integers(0, length))) // length
    n = rounds
    if values == "spread":
        rtt = rng.lognormal(12, 2, n)
    elif values == "outliers":  # a tight bulk and a few very slow replies: a wide range, a narrow middle
        rtt = rng.normal(80_000, 50, n)
        rtt[rng.random(n) < 0.01] = 3e9
    elif values == "ties":
        rtt = rng.integers(100, 100 + int(rng.integers(1, 4)), n).astype(np.float64)
    else:  # "top": 8-byte RTTs above 2**53, below the sentinels
        top = int(np.iinfo(np.uint64).max) - 2
        return wins, np.full(n, top, dtype=np.uint64) - rng.integers(0, 1 << 20, n).astype(np.uint64), rounds
    cells = (np.clip(rtt, 0, np.iinfo(np.uint32).max - 4).astype(np.int64) + 2).astype(dtype)
    cells[rng.random(n) < rng.choice([0.0, 0.001, 0.2])] = 1  # no reply
    cells[rng.random(n) < 0.01] = 0  # no row
    if rng.random() < 0.3:  # a window without any RTT
        cells[wins == int(rng.integers(0, k))] = 0
    return wins, cells, rounds


@pytest.mark.parametrize(("dtype", "values"), [(np.uint32, "spread"), (np.uint32, "outliers"),
                                               (np.uint32, "ties"), (np.uint64, "spread"), (np.uint64, "top")])
def test_long_windows_stats_equal_window_stats(compiled: list[int] | None, dtype: Any, values: str) -> None:
    rng = np.random.default_rng([np.dtype(dtype).itemsize, *map(ord, values)])
    done = 0
    for case in range(25):
        wins, cells, rounds = _long_windows(rng, dtype, values)
        valid = cells >= 2
        v = cells[valid] - cells.dtype.type(2)
        layout = WindowLayout.of(wins, rounds)
        assert layout is not None, case
        if not len(v):  # its one window without an RTT
            continue
        got = layout.stats(cells, valid, v)
        assert got is not None, case
        want = window_stats(v, wins[valid])
        for name, a, b in zip(("ids", "counts", "sums", "medians"), got, want, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), (case, name, a, b)
        done += 1
    assert done > 20
    assert compiled is None or len(compiled) == done  # the kernel gave each


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
