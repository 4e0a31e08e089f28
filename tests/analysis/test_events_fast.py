"""The per-pair event detector's fast path equals the full detector (``events_reference``),
event for event, on generated pairs that break its shortcuts' comfort: spikes near the size
threshold, steps, RTTs quantized to 1 µs, timeouts (NaN), AR(1) jitter, heavy tails, short series."""

from __future__ import annotations

import numpy as np
import pytest

from cloudbench.analysis.events import detect_pair_events
from cloudbench.analysis.events_jitter import RestPercentile as _RestPercentile
from tests.analysis.events_reference import detect_pair_events as reference

DT = 0.01


def generated(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Send times, RTTs in µs (1 µs quantum, NaN for timeouts) and round numbers of one pair."""
    rng = np.random.default_rng(seed)
    rounds = np.arange(n)
    t = rounds * DT + rng.uniform(0, 2e-4, n)
    t[rng.random(n) < 0.01] += 0.004  # late rounds
    e = rng.standard_t(3, n) * 1.5
    jitter = np.empty(n)
    acc = 0.0
    for i in range(n):  # AR(1) 0.6
        acc = 0.6 * acc + e[i]
        jitter[i] = acc
    y = 80.0 + np.abs(jitter) + rng.exponential(6.0, n)
    y[rng.random(n) < 2e-3] += rng.uniform(200, 2000)  # retransmission-like single echoes
    for _ in range(rng.integers(0, 8)):  # spikes from well below to well above the size threshold
        a = int(rng.integers(0, n))
        y[a:a + int(rng.integers(2, 60))] += rng.choice([10.0, 20.0, 30.0, 50.0, 100.0, 400.0])
    if rng.random() < 0.5:  # a step
        y[int(rng.integers(n // 4, 3 * n // 4)):] += rng.choice([5.0, 15.0, 40.0])
    y = np.round(y)
    y[rng.random(n) < 0.005] = np.nan  # timeouts
    return t, y, rounds


CASES = [(s, n) for s, n in enumerate([5, 12, 13, 40, 200, 1500, 3000, 6000, 12000, 24000] * 3)]


@pytest.mark.parametrize(("seed", "n"), CASES)
def test_the_fast_path_gives_the_full_detectors_events(seed: int, n: int) -> None:
    t, y, rounds = generated(seed, n)
    for window in (1.0, 5.0):
        fast = detect_pair_events(t, y, DT, window, round_index=rounds)
        full = reference(t, y, DT, window, round_index=rounds)
        assert repr(fast) == repr(full)  # repr: every float to the last bit, NaNs equal


def test_pelt_before_the_gate_gives_the_gate_first_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """_steps runs PELT first and the gate's bootstrap only when PELT found a change point; the
    gate first (as before, and as the oracle's own _steps did) gives the same steps: here PELT
    only sees what the gate lets through, as it did then, on pairs with and without steps."""
    from cloudbench.analysis import events
    from cloudbench.analysis.levelshift import step_p

    real_pelt = events.pelt
    pairs = [generated(s, n) for s, n in CASES if n >= 6000]
    new = [repr(detect_pair_events(t, y, DT, 1.0, round_index=r)) for t, y, r in pairs]

    def gated_pelt(med: np.ndarray, penalty: float, min_segment: int = 2) -> list[int]:
        return real_pelt(med, penalty, min_segment) if step_p(med, 1e-3, 2, seed=len(med), gate=True) < 1e-3 else []

    monkeypatch.setattr(events, "pelt", gated_pelt)
    assert [repr(detect_pair_events(t, y, DT, 1.0, round_index=r)) for t, y, r in pairs] == new
    assert sum("'step'" in e for e in new) >= 2 and sum("'step'" not in e for e in new) >= 2


def test_the_generated_pairs_have_events_of_both_kinds() -> None:
    """The comparison above is not vacuous: the generator makes spikes and steps that are found."""
    kinds = [e.kind for s, n in CASES if n >= 3000
             for e in detect_pair_events(*generated(s, n)[:2], DT, 1.0, round_index=generated(s, n)[2])]
    assert kinds.count("spike") >= 5 and kinds.count("step") >= 2


@pytest.mark.parametrize("seed", range(20))
def test_rest_percentile_bounds_hold_for_any_subset(seed: int) -> None:
    """Where the bounds decide, the exact percentile of the subset agrees; a value at the
    percentile itself is left undecided."""
    rng = np.random.default_rng(seed)
    x = np.round(np.abs(rng.standard_t(2, int(rng.integers(20, 3000)))) * 10) / 10  # ties, heavy tail
    bounds = _RestPercentile(x, 99.0, len(x) - max(2, len(x) // 5))  # the top alone sorted
    # the top is the sorted order statistics from its start on, and gives the whole series' percentile
    for m_min in (len(x) - max(2, len(x) // 5), len(x), len(x) // 2, 3):
        top = _RestPercentile(x, 99.0, m_min)
        assert top.top.tolist() == np.sort(x)[top.start:].tolist()
        for q in (99.0, 50.0, 99.9):
            assert _RestPercentile(x, q, m_min).whole().hex() == np.percentile(x, q).hex()
    floor = float(rng.choice([0.0, 1.0, 30.0]))
    n_decided = 0
    for _ in range(30):
        keep = np.ones(len(x), dtype=bool)
        a = int(rng.integers(0, len(x)))
        keep[a:a + int(rng.integers(1, max(2, len(x) // 5)))] = False
        exact = max(float(np.percentile(x[keep], 99)), floor)
        m = int(keep.sum())
        assert bounds.exceeds(exact, m, floor) is None
        for v in (exact * rng.uniform(0, 2), exact / 2, exact * 2 + 1, 0.0, float(x.max()) * 3):
            decided = bounds.exceeds(v, m, floor)
            if decided is not None:
                assert decided == (v >= exact)
                n_decided += 1
    assert n_decided > 0  # bounds that never decide would pass the loop above unchecked


@pytest.mark.parametrize("seed", range(6))
def test_the_running_median_equals_scipys_median_filter(seed: int) -> None:
    """bottleneck over the mirrored series (levelshift's) and the compiled sorted blocks (the
    events' level) give scipy's mirrored median filter, value for value (ties at the 1 µs
    quantum, widths from 1 to wider than the series, series of many blocks)."""
    from scipy import ndimage

    from cloudbench.analysis import events_median, levelshift

    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 4, 7, 100, 2001, 20000):
        y = np.round(rng.lognormal(4.0, 0.6, n))
        y[n // 3:] += 40.0  # a step: the cursors move far within a block
        for width in (1, 2, 3, 5, 9, 101, 1001, 6001):
            half = max(0, min(width // 2, (n - 1) // 2))
            want = ndimage.median_filter(y, size=2 * half + 1, mode="mirror").tolist()
            assert levelshift.running_median(y, width).tolist() == want
            assert events_median.running_median(y, width).tolist() == want, (n, width)


@pytest.mark.parametrize("seed", range(4))
def test_the_sorted_blocks_median_equals_bottlenecks_on_ties_and_block_edges(seed: int) -> None:
    """Every full window's median, for lengths that end mid-block and on a block's edge, on
    values with many ties (a tie between the two blocks' lists decides the cursors' moves)."""
    import bottleneck as bn

    from cloudbench.analysis.events_median import sliding_median

    rng = np.random.default_rng(seed)
    for k in (1, 3, 5, 11, 63):
        for n in (k, k + 1, 2 * k - 1, 2 * k, 5 * k + 3, 40 * k):
            for x in (rng.integers(0, 3, n).astype(float), np.round(rng.standard_t(2, n), 1), np.ones(n)):
                assert sliding_median(x, k).tolist() == bn.move_median(x, k)[k - 1:].tolist(), (k, n)
    with pytest.raises(ValueError, match="odd"):
        sliding_median(np.ones(10), 4)


def _counted_level(y: np.ndarray, half: int, scale: float) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel ``cb_level`` called directly: (its return code, level, residuals, |residuals|)."""
    from cloudbench.analysis import events_median

    lib = events_median.kernel()
    if lib is None:
        pytest.skip("no C compiler: no counting kernel")
    y = np.ascontiguousarray(y, dtype=np.float64)
    out = [np.full(len(y), np.nan) for _ in range(3)]
    key = np.empty(len(y), dtype=np.int32)
    rc = lib.level(y.ctypes.data, len(y), half, scale, *(o.ctypes.data for o in out), key.ctypes.data)
    return rc, out[0], out[1], out[2]


@pytest.mark.parametrize("seed", range(4))
def test_the_counted_level_equals_scipys_median_filter_on_grids(seed: int) -> None:
    """``cb_level`` (the level by counting, for RTTs on a grid) gives scipy's mirrored median
    filter and numpy's residuals, value for value: whole units, µs in ms and µs in s, ties
    (three values only), negative values, outliers a million keys above the rest (past the keys
    counted one by one), steps, odd and even lengths, and windows up to the whole series."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    for n in (3, 4, 5, 8, 13, 100, 2001, 20000):
        for scale, k in ((1.0, np.round(rng.lognormal(4.0, 0.6, n))),
                         (1e3, np.round(rng.lognormal(4.0, 0.6, n) * 1e3)),
                         (1e6, np.round(rng.lognormal(-3.0, 0.6, n) * 1e6)),
                         (1.0, rng.integers(0, 3, n).astype(float)),
                         (1e3, np.round(rng.normal(0.0, 2.0, n) * 1e3))):
            k[n // 3:] += 40.0 if scale == 1 else 4e4  # a step (40 ms at µs): the cursor moves far at once
            far = np.arange(3, n - 3, 7)  # isolated (never a median): beyond the keys counted one by one
            k[far[rng.random(len(far)) < 0.3]] += 2e6
            y = k / scale  # as the scan hands RTTs in: whole µs / 1000
            for half in sorted({1, 2, 4, 50, 500, 3000, (n - 1) // 2} - {0}):
                if half > (n - 1) // 2:
                    continue
                rc, level, resid, absr = _counted_level(y, half, scale)
                assert rc == 0, (n, scale, half)
                want = ndimage.median_filter(y, size=2 * half + 1, mode="mirror")
                assert level.tolist() == want.tolist(), (n, scale, half)
                assert resid.tolist() == (y - want).tolist() and absr.tolist() == np.abs(y - want).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_the_counted_level_follows_a_median_across_empty_lines_and_groups_of_keys(seed: int) -> None:
    """The cursor finds the next key with a value in its own word or the words either side without a
    search; further away it skips lines of 512 keys and groups of 32,768 by their flags, which stay
    set over lines emptied since (cleared by the search that finds them empty). Modes 0.1–0.2 M
    keys apart, the median switching between them every few windows, sparse values in the gaps
    (flags left set as they leave), keys right at word, line and group edges: scipy's level."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    n = 30000
    modes = np.array([1000.0, 120_000.0, 330_000.0])
    which = np.repeat(rng.integers(0, 3, n // 150 + 1), 150)[:n]
    k = np.round(modes[which] + rng.normal(0.0, 40.0, n))
    gaps = rng.random(n) < 0.05
    k[gaps] = np.round(rng.uniform(2000.0, 330_000.0, gaps.sum()))
    edges = rng.random(n) < 0.02  # 64 · 8 · 64 keys a group: its first and last key, a line's, a word's
    k[edges] = rng.choice([32768.0, 32767.0, 65536.0, 512.0 * 7, 512.0 * 7 - 1, 64.0 * 9, 64.0 * 9 - 1], edges.sum())
    y = k / 1e3
    for half in (1, 3, 40, 101, 700):
        rc, level, resid, _ = _counted_level(y, half, 1e3)
        assert rc == 0, half
        want = ndimage.median_filter(y, size=2 * half + 1, mode="mirror")
        assert level.tolist() == want.tolist(), half
        assert resid.tolist() == (y - want).tolist()


def test_the_counted_level_declines_what_it_cannot_count_and_the_level_is_the_same() -> None:
    """Off the grid (1), a median among values counted together, far above the smallest (2),
    and a window too wide or too long for the series (3): the kernel declines, and
    ``level_and_residuals`` then gives the sorted-blocks walk's level, the same numbers."""
    from scipy import ndimage

    from cloudbench.analysis.events_median import level_and_residuals

    rng = np.random.default_rng(3)
    keys = np.round(rng.lognormal(4.0, 0.6, 5000) * 1e3)
    y = keys / 1e3
    assert _counted_level(y, 100, 1.0)[0] == 1  # thousandths are not whole
    off = y + 1e-4
    assert _counted_level(off, 100, 1e3)[0] == 1
    far = (keys + np.where(np.arange(5000) >= 2000, 5e6, 0.0)) / 1e3  # 5 s later, at the µs grid
    assert _counted_level(far, 100, 1e3)[0] == 2
    assert _counted_level(y, 2500, 1e3)[0] == 3  # wider than the series allows
    assert _counted_level(np.round(rng.lognormal(4.0, 0.6, 70000)), 33000, 1.0)[0] == 3  # counts of 16 bits
    for x in (y, off, far):
        level, resid, absr = level_and_residuals(x, 201)
        want = ndimage.median_filter(x, size=201, mode="mirror")
        assert level is not None and level.tolist() == want.tolist()
        assert resid.tolist() == (x - want).tolist() and absr.tolist() == np.abs(x - want).tolist()
    for n in (1, 2):  # no window wider than one value fits: the series itself
        assert np.array_equal(level_and_residuals(y[:n], 6001)[0], y[:n])


@pytest.mark.parametrize("seed", range(4))
def test_the_echoes_in_order_and_their_late_rounds_equal_the_plain_sort(seed: int) -> None:
    """``_in_time_order`` (a series already finite and in order as it is, its late rounds worked
    out on the first slice asked for) against the oracle's way (the finite echoes, a stable
    sort, ``late_rounds`` of everything): in order or not (a swap, equal times), NaN and inf in
    either array, round numbers of 32 and 64 bits or none, short and empty series."""
    from cloudbench.analysis.events import _in_time_order, late_rounds

    rng = np.random.default_rng(seed)
    cases: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
    for n in (0, 1, 2, 5, 1000):
        rounds = np.arange(n)
        t = rounds * 0.01 + rng.uniform(0, 2e-4, n)
        t[rng.random(n) < 0.1] += rng.choice([0.0005, 0.003, 0.02])  # late (and past the next round)
        t = np.maximum.accumulate(t)  # in order, with equal times
        y = np.round(rng.lognormal(4, 0.5, n), 3)
        cases += [(t, y, rounds), (t, y, rounds.astype(np.int32)), (t, y, None)]
        if n >= 2:
            swapped = t.copy()
            swapped[[0, 1]] = swapped[[1, 0]] + [0.0, 1.0]
            cases.append((swapped, y, rounds))
            for bad in (np.nan, np.inf):
                for which in (0, 1):
                    arrs = [t.copy(), y.copy()]
                    arrs[which][n // 2] = bad
                    cases.append((arrs[0], arrs[1], rounds))
    for t, y, r in cases:
        got_t, got_y, got_late = _in_time_order(t, y, r, 0.01)
        ok = np.isfinite(y) & np.isfinite(t)
        order = np.argsort(t[ok], kind="stable")
        assert got_t.tolist() == t[ok][order].tolist() and got_y.tolist() == y[ok][order].tolist()
        if r is None:
            assert got_late is None
            continue
        assert got_late is not None
        want = late_rounds(t, r, 0.01)[ok][order]
        assert got_late[0:len(got_t)].tolist() == want.tolist()
        if len(t) == 1000 and ok.all():  # late rounds to find
            assert 0 < want.sum() < len(t)


@pytest.mark.parametrize("seed", range(4))
def test_the_quiet_residuals_equal_numpys_dilated_mask(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_quiet`` (the kernel ``cb_quiet``: one pass) against scipy's binary dilation of the rough
    echoes and boolean indexing, and its numpy fallback: rough echoes at either end, next to each
    other, none, all; values equal to the cut (not over it); fewer than 10 quiet (then all);
    series of 1 to 5,000."""
    from scipy import ndimage

    from cloudbench.analysis import events_median
    from cloudbench.analysis.events import _quiet

    rng = np.random.default_rng(seed)
    cases = []
    for n in (1, 2, 3, 11, 12, 100, 5000):
        r = np.round(rng.standard_t(2, n), 1)
        for cut in (0.0, 1.0, 3.0, 100.0, float(np.abs(r).max())):
            cases.append((r, cut))
        ends = r.copy()
        ends[[0, -1]] = 50.0
        cases.append((ends, 10.0))
    for kernel_too in (True, False):
        if not kernel_too:
            monkeypatch.setattr(events_median, "kernel", lambda: None)
        for r, cut in cases:
            a = np.abs(r)
            rough = a > cut
            quiet = ~np.asarray(ndimage.binary_dilation(rough)) if rough.any() else ~rough
            want = (r[quiet], a[quiet]) if quiet.sum() >= 10 else (r, a)
            got = _quiet(r, cut)
            assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist(), (len(r), cut)
            assert not np.shares_memory(got[0], r)  # copies: the detector partitions them in place


def test_the_compiled_walk_is_what_runs_where_a_compiler_is() -> None:
    """The comparisons above test the C walk, not bottleneck's fallback, on a machine with cc."""
    import shutil

    from cloudbench.analysis import events_median

    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler: bottleneck's move_median runs (the same values)")
    assert events_median.kernel() is not None


def test_without_the_compiled_walk_bottleneck_gives_the_same_medians(monkeypatch: pytest.MonkeyPatch) -> None:
    from cloudbench.analysis import events_median

    x = np.round(np.random.default_rng(1).lognormal(4.0, 0.6, 5000))
    compiled = events_median.running_median(x, 101)
    monkeypatch.setattr(events_median, "kernel", lambda: None)
    assert events_median.running_median(x, 101).tolist() == compiled.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_the_markov_chain_from_whole_counts_equals_the_run_test_on_its_rest(seed: int) -> None:
    """``MarkovChain.p`` (the whole series' counts less what touches the ranges left out) gives
    ``markov_run_p`` on the rest as a mask, bit for bit: ranges at either end, next to each other,
    one echo long, overlapping transitions, none; sparse and dense exceedances; short series."""
    from cloudbench.analysis.events_jitter import MarkovChain, markov_run_p

    rng = np.random.default_rng(seed)
    for n in (4, 5, 12, 100, 5000):
        for share in (0.01, 0.2, 0.6):
            above = rng.random(n) < share
            chain = MarkovChain(above)
            for _ in range(15):
                k = min(2 * int(rng.integers(1, 4)), (n + 1) // 2 * 2)  # an even count of cut points
                cuts = np.sort(rng.choice(np.arange(n + 1), size=k, replace=False))
                out = [(int(a), int(b)) for a, b in zip(cuts[::2], cuts[1::2], strict=True)]
                if rng.random() < 0.3 and len(out) > 1:  # two ranges touching
                    out[1] = (out[0][1], max(out[1][1], out[0][1] + 1))
                if rng.random() < 0.2:
                    out.append((n - 1, n) if out[-1][1] < n - 1 else (0, 0))
                a, b = out[0]
                run = above[a:b].copy() if b - a >= 3 else np.array([True, False, True])
                run[0] = run[-1] = True
                rest = np.ones(n, dtype=bool)
                for lo, hi in out:
                    rest[lo:hi] = False
                if not rest.any():
                    continue
                assert chain.p(run, out).hex() == markov_run_p(run, above, rest).hex(), (n, out)


@pytest.mark.parametrize("seed", range(6))
def test_median_and_dilation_helpers_equal_numpy_and_scipy(seed: int) -> None:
    from scipy import ndimage

    from cloudbench.analysis.events_jitter import dilate as _dilate
    from cloudbench.analysis.events_jitter import median

    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 4, 5, 10, 101, 1000):
        x = np.round(rng.standard_t(2, n), 1)  # ties, heavy tails, negative values
        assert median(x) == float(np.median(x))
        mine = x.copy()
        assert median(mine, inplace=True) == float(np.median(x)) and sorted(mine) == sorted(x)
        mask = rng.random(n) < rng.choice([0.0, 0.05, 0.5])
        for k in (1, 2):
            want = ndimage.binary_dilation(mask, iterations=k) if mask.any() else mask
            assert _dilate(mask, k).tolist() == np.asarray(want).tolist()


@pytest.mark.parametrize("seed", range(6))
def test_the_percentile_helper_equals_numpys_to_the_last_bit(seed: int) -> None:
    """``_percentile`` (one single-point partition) gives ``np.percentile``'s value, bit for bit:
    its virtual index and its interpolation from the nearer end, on ties, heavy tails, sizes
    where (n − 1)·q/100 is whole or ends in .5, and the levels the detector and its neighbours use."""
    from cloudbench.analysis.events_jitter import percentile as _percentile

    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 4, 5, 10, 99, 100, 101, 201, 1000, 4097):
        for x in (np.round(rng.standard_t(2, n), 1), np.abs(rng.standard_t(1, n)) * 1e3, rng.random(n)):
            for q in (0, 1, 10, 50, 90, 99, 99.9, 100, 12.5):
                got, want = _percentile(x.copy(), q), float(np.percentile(x, q))
                # == for the value (−0.0 and 0.0 tie in any selection), hex for the last bit
                assert got == want and (got == 0 or got.hex() == want.hex()), (n, q)
                mine = x.copy()
                assert _percentile(mine, q, inplace=True) == want and sorted(mine) == sorted(x)


@pytest.mark.parametrize("seed", range(2))
def test_a_high_percentile_of_a_long_series_from_its_top_equals_numpys(seed: int) -> None:
    """From 2^16 values on, a percentile in the top 1/50 is selected among the values at or over
    a threshold guessed from every 64th value: numpy's value, bit for bit, where the guess is
    good (heavy tails, ties, a level shift, the top at either end) and where it is misled (the
    sample falls on the smallest of a period of 64, or on one value repeated: the whole is
    partitioned then, or more of it gathered)."""
    from cloudbench.analysis import events_jitter
    from cloudbench.analysis.events_jitter import percentile as _percentile

    rng = np.random.default_rng(seed)
    n = events_jitter.TAIL_MIN + 1000
    period = np.where(np.arange(n) % 64 == 0, 0.0, rng.random(n) + 1.0)  # every 64th is the smallest
    peaks = np.where(np.arange(n) % 64 == 0, 1e6 + rng.random(n), rng.random(n))  # every 64th a peak
    shifted = rng.standard_t(3, n) + np.where(np.arange(n) < n // 3, 50.0, 0.0)
    for x in (np.abs(rng.standard_t(1, n)), np.round(rng.normal(0, 1, n), 1), np.ones(n), np.sort(rng.random(n)),
              np.sort(rng.random(n))[::-1].copy(), period, peaks, shifted):
        for q in (98.5, 99, 99.5, 99.9, 100, 97, 50):
            want = float(np.percentile(x, q))
            for got in (_percentile(x.copy(), q), _percentile(x.copy(), q, inplace=True)):
                assert got == want and (got == 0 or got.hex() == want.hex()), q  # −0.0 and 0.0 tie
    # the guess is used (not only the whole partition): a top a few % of the values, far under n
    x = np.abs(rng.standard_t(1, n))
    v = (n - 1) * 0.99
    top = events_jitter._top_from(x, int(v))
    assert top is not None and 0.01 * n <= len(top) <= 0.03 * n


@pytest.mark.parametrize("seed", range(4))
def test_the_window_medians_and_each_echos_window_equal_the_plain_bookkeeping(seed: int,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """events._window_medians (the kernel ``cb_windows``: windows' edges by bisection, each
    median selected in a scratch copy; and its numpy fallback) against the masked
    window_medians, np.median per window and each echo's window by division: with and without
    empty windows, windows of one or two echoes, odd and even counts, ties, equal send times,
    echoes exactly on a window's edge, a window width that is no binary fraction, one echo;
    and the Markov run test counted in place against its first form."""
    from cloudbench.analysis import events_median
    from cloudbench.analysis.events import _window_medians, markov_run_p
    from cloudbench.analysis.orderstats import window_medians
    from tests.analysis.events_reference import markov_run_p as plain_markov

    rng = np.random.default_rng(seed)
    cases = []
    for gap in (False, True):
        t = np.sort(rng.uniform(0, 600, 20000))
        if gap:  # two empty windows
            t = t[(t < 100) | (t >= 160)]
        cases.append((t, np.round(rng.lognormal(4, 0.5, len(t))), 30.0))
    sparse = np.sort(np.concatenate([rng.uniform(0, 50, 40), np.arange(0, 50, 5.0), [7.0, 7.0, 7.0]]))
    cases += [(sparse, rng.integers(0, 3, len(sparse)).astype(float), 5.0),  # edges on echoes, ties
              (sparse, np.round(rng.normal(0, 1, len(sparse)), 1), 0.1),  # many windows of 0-2 echoes
              (np.arange(0, 30, 0.01), np.round(rng.lognormal(4, 0.5, 3000), 3), 0.3),
              (np.array([5.0]), np.array([2.5]), 30.0)]
    for kernel_too in (True, False):
        if not kernel_too:
            monkeypatch.setattr(events_median, "kernel", lambda: None)
        for t, y, width in cases:
            starts, med, bounds = _window_medians(t, y, width)
            w = np.floor((t - t[0]) / width).astype(np.int64)
            keys, want = window_medians(y, np.ones(len(y), dtype=bool), w)
            assert starts.tolist() == (t[0] + keys * width).tolist() and med.tolist() == want.tolist()
            assert med.tolist() == [float(np.median(y[w == k])) for k in keys]
            at = np.repeat(np.arange(len(keys)), np.diff(bounds))
            assert bounds[-1] == len(t) and at.tolist() == np.searchsorted(keys, w).tolist()
    for n in (5, 50, 1000, 50000):
        for _ in range(10):
            above = rng.random(n) < rng.choice([0.01, 0.2, 0.6])
            rest = rng.random(n) < rng.choice([0.5, 0.95, 1.0])
            a = int(rng.integers(0, n - 3))
            run = above[a:a + int(rng.integers(3, min(n - a, 60) + 1))].copy()
            run[0] = run[-1] = True
            assert markov_run_p(run, above, rest).hex() == plain_markov(run, above, rest).hex()


def test_the_gated_step_p_decides_as_the_full_one() -> None:
    """``step_p(gate=True)`` stops counting once the p-value cannot end under alpha: the same
    decision on flat, wandering (AR(1) 0.9) and stepped series, and the same value when under."""
    from cloudbench.analysis.levelshift import step_p

    rng = np.random.default_rng(5)
    under = 0
    for i in range(40):
        n = int(rng.integers(20, 300))
        e = rng.standard_t(3, n)
        y = np.empty(n)
        acc = 0.0
        phi = (0.0, 0.5, 0.9)[i % 3]
        for j in range(n):
            acc = phi * acc + e[j]
            y[j] = acc
        if i % 4 == 0:
            y[n // 2:] += rng.choice([1.0, 3.0, 8.0])
        full, gated = step_p(y, 1e-3, seed=n), step_p(y, 1e-3, seed=n, gate=True)
        assert (full < 1e-3) == (gated < 1e-3)
        if full < 1e-3:
            under += 1
            assert gated == full
        else:
            assert gated >= 1e-3
    assert 0 < under < 40


def test_the_group_detector_with_the_gated_step_p_equals_the_full_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """``levelshift.detect`` (the groups' level shifts) gives the same shifts and p-values with its
    gate counted in full: flat, AR(1) and stepped window series, values at a 0.001 quantum."""
    from cloudbench.analysis import levelshift

    rng = np.random.default_rng(11)
    series = []
    for i in range(24):
        n = int(rng.integers(14, 400))
        y = 70.0 + rng.standard_t(3, n) * 0.5
        if i % 3 == 0:
            y[n // 3:] += rng.choice([0.5, 2.0, 5.0])
        if i % 5 == 0:
            y = np.cumsum(rng.normal(0, 0.2, n)) + 70.0
        series.append((np.arange(n) * 30.0, np.round(y, 3)))
    fast = [repr(levelshift.detect(t, y)) for t, y in series]
    full_step_p = levelshift.step_p
    monkeypatch.setattr(levelshift, "step_p", lambda *a, gate=False, **k: full_step_p(*a, **k))
    assert [repr(levelshift.detect(t, y)) for t, y in series] == fast
    assert sum("step" in f for f in fast) >= 3


@pytest.mark.parametrize("seed", range(3))
def test_the_residuals_outside_ranges_and_the_long_runs_are_the_masks_values(seed: int) -> None:
    """The detector's rest of a series (``|resid|`` outside the spikes accepted and the run
    tested) and its candidate runs (those of a spike's length) without full-length masks: the
    values, in order, of ``np.abs(resid[rest])`` and the runs of ``_runs`` that are long enough,
    for ranges at either end, adjacent, unsorted, empty and covering everything."""
    from cloudbench.analysis.events import _abs_outside, _runs

    rng = np.random.default_rng(seed)
    n = 5000
    resid = rng.normal(0.0, 1.0, n)
    edges = np.sort(rng.choice(np.arange(1, n), 12, replace=False)).tolist()
    spans = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    for ranges in ([], spans, spans[::-1], [(0, 7), (7, 9), (n - 3, n)], [(0, n)], [(10, 10), (20, 30)]):
        rest = np.ones(n, dtype=bool)
        for a, b in ranges:
            rest[a:b] = False
        _abs_outside(resid, [(0, n // 2)])  # the scratch holds another call's values first
        assert _abs_outside(resid, ranges).tolist() == np.abs(resid[rest]).tolist(), ranges
    flag = rng.random(n) < 0.3
    for min_len in (1, 2, 3, 5):
        assert _runs(flag, min_len=min_len) == [(a, b) for a, b in _runs(flag) if b - a >= min_len]
