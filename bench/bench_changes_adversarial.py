"""An independent adversarial check of `compare DIR --changes`: flat series give a change in at most 5 %.

Flat scheduled-campaign series (no lasting change) generated here, apart from
:mod:`cloudbench.testing` and ``bench/bench_changes.py``, in ways the search was not tuned on:

- ``regime``: Markov two-state level flips of 0.5 run SD that return (mean dwell 12 runs), 168 runs;
- ``ar1_t3``: AR(1) across runs (φ 0.5) driven by Student-t(3) innovations, 168 runs;
- ``coarse``: RTT repetitions rounded to 0.1 ms, 5 run SDs (run medians on the grid: nearly all tied), 168 runs;
- ``coarse_mid``: rounded to 40 µs, 2 run SDs (run medians on 3-5 levels), 168 runs;
- ``coarse_ar``: rounded to 0.1 ms with AR(1) run effects (φ 0.4), 96 runs;
- ``sine_drift``: a daily sine whose amplitude drifts from 0.3 to 2 run SDs over the week, random phase;
- ``gaps``: 168 hourly slots, 20 % of runs missing at random plus a 12-hour hole, AR(1) φ 0.3;
- ``short24`` / ``short48``: 24 hourly runs of per-run effects / 48 runs of AR(1) φ 0.4, t(5) innovations;
- ``outlier``: per-run effects with a run-level outlier (+6 run SDs) in 2 % of runs, 168 runs;
- ``outlier48``: the same over 48 runs;
- ``semidiurnal``: a 12-hour sine of 1 run SD (the search removes a 24-hour sinusoid only), 168 runs;
- ``bizhours``: +1.5 run SDs during 8 busy hours a day (a square wave: its harmonics stay), AR(1) φ 0.3;
- ``mixed``: a daily sine drifting from 1.5 to 0.5 run SDs, AR(1) φ 0.5 t(3) runs, 15 % of runs missing.

Each run has 3 repetitions (within-run noise on top of the run's effect), reduced to one value per
run by :func:`cloudbench.analysis.diurnal.run_values`, and searched as the command searches one series:
:func:`cloudbench.analysis.changes.find_changes_holm` with the daily period when the runs span a day
(as :func:`cloudbench.report.changes.changes_result` does). Printed per kind: the share of flat series
with a significant change (``false``) with its binomial SE, the share that would also be listed past
compare's default 5 % threshold (``listed``), and ``OVER`` when ``false`` > 5 % + 3 SE.

Then the family-wise rate: campaigns of 10 flat series (two each of ar1_t3, sine_drift, gaps, outlier,
coarse_mid) searched together as the command does (Holm over the series), the share with any change.

Then a clear step: 3 run SDs half-way through 168 runs (per-run effects and AR(1) φ 0.5): the share
found within one run of it, and the share of those whose 95 % intervals of the difference and of the
size cover the true step (flagged when more than 3 SEs under 95 %). The AR(1) row's interval covered
about 93 % (92.7 % of 1,422 steps found over four seeds, 4 SEs of 0.6 % under 95 %) until the interval
also held the fits with the change one run either side: at seed 12 it now covers 96.2 % (difference)
and 95.8 % (size) of 600 series' steps found, per-run effects 96.0 %.

Full run: about 12-15 min of CPU at the defaults (each kind about 30 s, the campaigns 2 min, the
steps 2 min); ``--kinds`` and ``--steps 0 --campaigns 0`` for parts. Reproduce the README's figures
with ``--steps 300`` at seeds 8, 9 and 10.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_changes_adversarial.py [--series 500]
[--steps 800] [--campaigns 200] [--seed 8] [--kinds regime,coarse]``; exits 1 when any kind's
false rate is over 5 % + 3 SE, any search raised (``errors``: the command would show a traceback), the step in
per-run effects is found in under 90 % of series (AR(1): power not judged), or a step interval's
coverage is > 3 SE under 95 %.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.changes import Change, find_changes_holm
from cloudbench.analysis.diurnal import run_values

ALPHA = 0.05
DAY = 86400.0
HOUR = 3600.0
LEVEL = 1000.0  # µs: an RTT median
RUN_SD = 20.0  # µs: the run-to-run SD (the unit that varies)
REP_SD = 15.0  # µs: within a run, between its repetitions
REPS = 3

Arr = NDArray[np.float64]

Gen = Callable[[np.random.Generator], tuple[Arr, Arr]]  # (slot hours, run effects)


def _ar1(rng: np.random.Generator, n: int, phi: float, innov: Arr | None = None) -> Arr:
    """AR(1) of unit marginal SD (for Gaussian innovations), from its stationary start."""
    u = rng.standard_normal(n) if innov is None else innov
    x = np.empty(n)
    x[0] = u[0] / math.sqrt(1 - phi * phi)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + u[i]
    return x * math.sqrt(1 - phi * phi)


def _t(rng: np.random.Generator, df: float, n: int) -> Arr:
    """Student-t innovations scaled to unit SD."""
    return rng.standard_t(df, n) / math.sqrt(df / (df - 2))


def regime(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n, stay = 168, 1 - 1 / 12
    s = np.empty(n, dtype=int)
    s[0] = rng.integers(2)
    for i in range(1, n):
        s[i] = s[i - 1] if rng.random() < stay else 1 - s[i - 1]
    return np.arange(n, dtype=float), RUN_SD * (0.5 * s + rng.standard_normal(n))


def ar1_t3(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    return np.arange(n, dtype=float), RUN_SD * _ar1(rng, n, 0.5, _t(rng, 3, n))


def coarse(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    return np.arange(n, dtype=float), RUN_SD * rng.standard_normal(n)


def coarse_ar(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 96
    return np.arange(n, dtype=float), RUN_SD * _ar1(rng, n, 0.4)


def sine_drift(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    h = np.arange(n, dtype=float)
    amp = RUN_SD * np.linspace(0.3, 2.0, n)
    return h, amp * np.sin(2 * np.pi * h / 24 + rng.uniform(0, 2 * np.pi)) + RUN_SD * rng.standard_normal(n)


def gaps(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    h = np.arange(n, dtype=float)
    e = RUN_SD * _ar1(rng, n, 0.3)
    keep = rng.random(n) >= 0.2
    hole = int(rng.integers(12, n - 24))
    keep[hole:hole + 12] = False
    return h[keep], e[keep]


def short24(rng: np.random.Generator) -> tuple[Arr, Arr]:
    return np.arange(24, dtype=float), RUN_SD * rng.standard_normal(24)


def short48(rng: np.random.Generator) -> tuple[Arr, Arr]:
    return np.arange(48, dtype=float), RUN_SD * _ar1(rng, 48, 0.4, _t(rng, 5, 48))


def _outliers(rng: np.random.Generator, n: int) -> tuple[Arr, Arr]:
    e = RUN_SD * rng.standard_normal(n)
    e[rng.random(n) < 0.02] += 6 * RUN_SD
    return np.arange(n, dtype=float), e


def outlier(rng: np.random.Generator) -> tuple[Arr, Arr]:
    return _outliers(rng, 168)


def outlier48(rng: np.random.Generator) -> tuple[Arr, Arr]:
    return _outliers(rng, 48)


def semidiurnal(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    h = np.arange(n, dtype=float)
    return h, RUN_SD * (np.sin(2 * np.pi * h / 12 + rng.uniform(0, 2 * np.pi)) + rng.standard_normal(n))


def bizhours(rng: np.random.Generator) -> tuple[Arr, Arr]:
    n = 168
    h = np.arange(n, dtype=float)
    start = rng.uniform(0, 24)
    busy = np.mod(h - start, 24) < 8  # 8 busy hours a day: a square wave, not a sinusoid
    return h, RUN_SD * (1.5 * busy + _ar1(rng, n, 0.3))


def mixed(rng: np.random.Generator) -> tuple[Arr, Arr]:
    """Everything at once: a drifting daily sine, AR(1) t(3) runs, 15 % of runs missing."""
    n = 168
    h = np.arange(n, dtype=float)
    amp = RUN_SD * np.linspace(1.5, 0.5, n)
    e = amp * np.sin(2 * np.pi * h / 24 + rng.uniform(0, 2 * np.pi)) + RUN_SD * _ar1(rng, n, 0.5, _t(rng, 3, n))
    keep = rng.random(n) >= 0.15
    return h[keep], e[keep]


KINDS: dict[str, tuple[Gen, float | None]] = {  # generator, grain of the repetitions (µs; None: none)
    "regime": (regime, None),
    "ar1_t3": (ar1_t3, None),
    "coarse": (coarse, 100.0),
    "coarse_mid": (coarse, 40.0),
    "coarse_ar": (coarse_ar, 100.0),
    "sine_drift": (sine_drift, None),
    "gaps": (gaps, None),
    "short24": (short24, None),
    "short48": (short48, None),
    "outlier": (outlier, None),
    "outlier48": (outlier48, None),
    "semidiurnal": (semidiurnal, None),
    "bizhours": (bizhours, None),
    "mixed": (mixed, None),
}


def campaign(rng: np.random.Generator, hours: Arr, effects: Arr,
             grain: float | None = None) -> tuple[Arr, Arr]:
    """Run values as the command sees them: each run's repetitions (a few seconds apart, within-run
    noise, rounded to ``grain``) reduced by run_values to their median at their mean time."""
    start = 1_790_000_000.0 + float(rng.integers(0, 86400))  # a random UTC time of day
    n = hours.size
    t = start + HOUR * np.repeat(hours, REPS) + np.tile(np.arange(REPS) * 5.0, n) + rng.uniform(0, 30, n * REPS)
    y = LEVEL + np.repeat(effects, REPS) + REP_SD * rng.standard_normal(n * REPS)
    if grain is not None:
        y = np.round(y / grain) * grain
    tr, yr, _ = run_values(t, y, np.repeat(np.arange(n), REPS))
    return tr, yr


def search(t: Arr, y: Arr) -> list[Change]:
    """One series through the command's search (the daily period when the runs span a day)."""
    period = DAY if float(t.max() - t.min()) >= DAY else None
    return find_changes_holm([(t, y)], period=period, alpha=ALPHA)[0].changes


def flat(kind: str, n: int, seed: int) -> tuple[int, int, int]:
    """(series with a change, ... listed past 5 %, series whose search raised) of ``n`` flat series."""
    gen, grain = KINDS[kind]
    rng = np.random.default_rng([seed, zlib.crc32(kind.encode())])  # a kind's draws do not depend on the others
    hits = listed = errors = 0
    for i in range(n):
        t, y = campaign(rng, *gen(rng), grain)
        try:
            found = search(t, y)
        except Exception as exc:  # the command would print a traceback: count it, show the first
            errors += 1
            if errors == 1:
                path = f"/tmp/changes_adversarial_{kind}_{seed}_{i}.npz"
                np.savez(path, t=t, y=y)
                print(f"  {kind} series {i} raised {type(exc).__name__}: {exc} (its runs: {path})", file=sys.stderr)
            continue
        hits += bool(found)
        listed += any(c.size is not None and abs(c.size) > 0.05 for c in found)
    return hits, listed, errors


def family(n: int, seed: int, kinds: tuple[str, ...] = ("ar1_t3", "sine_drift", "gaps", "outlier", "coarse_mid")
           ) -> tuple[int, int]:
    """(campaigns with any change, campaigns whose search raised) of ``n`` flat campaigns of two series
    of each of ``kinds``, searched together as the command does (Holm over the series)."""
    rng = np.random.default_rng([seed, 7])
    hits = errors = 0
    for _ in range(n):
        series = [campaign(rng, *KINDS[k][0](rng), KINDS[k][1]) for k in kinds for _ in range(2)]
        span = max(float(t.max() - t.min()) for t, _ in series)
        try:
            found = find_changes_holm(series, period=DAY if span >= DAY else None, alpha=ALPHA)
        except Exception:  # the command would print a traceback
            errors += 1
            continue
        hits += any(s.changes for s in found)
    return hits, errors


def steps(phi: float, n: int, seed: int, runs: int = 168, sds: float = 3.0) -> tuple[int, int, int]:
    """(found within one run, diff interval covers, size interval covers) over ``n`` stepped series."""
    rng = np.random.default_rng([seed, 99, int(phi * 10)])
    k = runs // 2
    step = sds * RUN_SD
    found = cov_d = cov_s = 0
    for _ in range(n):
        e = RUN_SD * (_ar1(rng, runs, phi) if phi > 0 else rng.standard_normal(runs))
        e[k:] += step
        t, y = campaign(rng, np.arange(runs, dtype=float), e)
        near = [c for c in search(t, y) if abs(c.index - k) <= 1]
        if near:
            c = near[0]
            found += 1
            cov_d += c.diff_ci[0] <= step <= c.diff_ci[1]
            cov_s += c.size_ci is not None and c.size_ci[0] <= step / LEVEL <= c.size_ci[1]
    return found, cov_d, cov_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series", type=int, default=500, help="flat series per kind")
    ap.add_argument("--steps", type=int, default=800, help="stepped series per noise (0: none)")
    ap.add_argument("--campaigns", type=int, default=200, help="flat campaigns of 10 series (0: none)")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of: " + ",".join(KINDS))
    a = ap.parse_args()
    bad = False
    print(f"flat series: false-change rate at alpha {ALPHA} (limit 5 % + 3 SE), {a.series} series per kind")
    print(f"{'kind':<11} {'runs':>5} {'false':>7} {'SE':>6} {'listed':>7} {'errors':>7} {'cpu s':>6}")
    for kind in a.kinds.split(","):
        if kind not in KINDS:
            print(f"unknown kind {kind!r} (known: {', '.join(KINDS)})", file=sys.stderr)
            return 2
        c0 = time.process_time()
        hits, listed, errors = flat(kind, a.series, a.seed)
        rate = hits / a.series
        se = math.sqrt(max(rate * (1 - rate), ALPHA * (1 - ALPHA)) / a.series)
        over = rate > ALPHA + 3 * se
        bad |= over or errors > 0
        runs = KINDS[kind][0](np.random.default_rng(0))[0].size
        print(f"{kind:<11} {runs:>5} {100 * rate:>6.1f}% {100 * se:>5.1f}% {100 * listed / a.series:>6.1f}% "
              f"{errors:>7} {time.process_time() - c0:>6.0f}{'  OVER' if over else ''}", flush=True)
    if a.campaigns:
        hits, errors = family(a.campaigns, a.seed)
        rate = hits / a.campaigns
        se = math.sqrt(max(rate * (1 - rate), ALPHA * (1 - ALPHA)) / a.campaigns)
        over = rate > ALPHA + 3 * se
        bad |= over or errors > 0
        print(f"\ncampaigns of 10 flat series searched together (Holm), {a.campaigns} campaigns: any change in "
              f"{100 * rate:.1f}% (SE {100 * se:.1f}%), errors {errors}{'  OVER' if over else ''}", flush=True)
    if a.steps:
        print(f"\nstep of 3 run SDs half-way through 168 runs, {a.steps} series each")
        print(f"{'noise':<11} {'found':>7} {'diff cov':>9} {'size cov':>9} {'SE':>6}")
        for phi in (0.0, 0.5):
            found, cd, cs = steps(phi, a.steps, a.seed)
            f = max(found, 1)
            se = math.sqrt(0.95 * 0.05 / f)
            low = (phi == 0 and found < 0.9 * a.steps) or cd / f < 0.95 - 3 * se or cs / f < 0.95 - 3 * se
            bad |= low
            print(f"{'iid' if phi == 0 else f'AR(1) {phi}':<11} {100 * found / a.steps:>6.1f}% "
                  f"{100 * cd / f:>8.1f}% {100 * cs / f:>8.1f}% {100 * se:>5.1f}%{'  LOW' if low else ''}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
