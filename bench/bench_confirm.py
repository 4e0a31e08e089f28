"""Benchmark of the repetition analysis: 1,000 repetitions x 10 metrics, 200 trials.

Budget: the convergence analysis (every size from 6 to 1,000, 200 random
subsets each, 10 metrics) in <= 10 s on a 2-core machine. For comparison, a
naive CONFIRM-style loop (one ``rng.choice`` + sort per subset) runs in the
same process on one metric, its time for ten metrics is extrapolated and both
curves are compared.

Run: ``.venv/bin/python bench/bench_confirm.py [--reps 1000] [--metrics 10] [--trials 200]``.
Exits 1 when the vectorised convergence misses the budget.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.checks import run_checks
from cloudbench.analysis.confirm import ConfirmParams
from cloudbench.analysis.convergence import convergence
from cloudbench.analysis.stats import min_n_for_ci, quantile_ci_ranks
from cloudbench.report.confirm import confirm
from cloudbench.testing.fake_results import FakeRun, make_campaign

BUDGET_S = 10.0


def synthetic_metrics(reps: int, metrics: int, seed: int) -> NDArray[np.float64]:
    """``metrics`` series of ``reps`` values: normal, lognormal and bimodal shapes."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(metrics):
        kind = m % 3
        if kind == 0:
            rows.append(rng.normal(100 + 10 * m, 5 + m, reps))
        elif kind == 1:
            rows.append(100 * rng.lognormal(0, 0.3 + 0.05 * m, reps))
        else:
            fast = rng.random(reps) < 0.7
            rows.append(np.where(fast, rng.normal(80, 4, reps), rng.normal(140, 10, reps)))
    return np.array(rows)


def naive_convergence(values: NDArray[np.float64], p: float, level: float, trials: int,
                      seed: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """CONFIRM-style reference: a Python loop over sizes and subsets, one sort each."""
    rng = np.random.default_rng(seed)
    n_all = len(values)
    sizes = range(min_n_for_ci(p, level), n_all + 1)
    lo = np.empty(len(sizes))
    hi = np.empty(len(sizes))
    for i, n in enumerate(sizes):
        ranks = quantile_ci_ranks(n, p, level)
        assert ranks is not None
        acc_lo = acc_hi = 0.0
        for _ in range(trials):
            sub = np.sort(rng.choice(values, n, replace=False))
            acc_lo += sub[ranks.j - 1]
            acc_hi += sub[ranks.k - 1]
        lo[i], hi[i] = acc_lo / trials, acc_hi / trials
    return lo, hi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-naive", action="store_true", help="skip the slow reference loop")
    args = ap.parse_args()
    p, level = 0.5, 0.95
    data = synthetic_metrics(args.reps, args.metrics, args.seed)
    sizes = args.reps - min_n_for_ci(p, level) + 1
    print(f"convergence: {args.reps} repetitions x {args.metrics} metrics, {args.trials} trials, "
          f"{sizes} sizes ({sizes * args.trials * args.metrics:,} subset CIs)")

    t0 = time.perf_counter()
    curves = convergence(np.sort(data, axis=1), p, level, subsets=args.trials, seed=args.seed)
    t_vec = time.perf_counter() - t0
    verdict = "ok" if t_vec <= BUDGET_S else "OVER BUDGET"
    print(f"  vectorised:            {t_vec:7.2f} s   (budget {BUDGET_S:.0f} s: {verdict})")

    if not args.skip_naive:
        t0 = time.perf_counter()
        lo, hi = naive_convergence(data[0], p, level, args.trials, args.seed)
        t_naive = time.perf_counter() - t0
        t_naive_all = t_naive * args.metrics
        print(f"  naive, 1 metric:       {t_naive:7.2f} s   -> {args.metrics} metrics "
              f"~{t_naive_all:.1f} s (extrapolated), speed-up ~{t_naive_all / t_vec:.0f}x")
        c = curves[0]
        other = convergence(np.sort(data[:1], axis=1), p, level, subsets=args.trials,
                            seed=args.seed + 1)[0]
        width = c.upper - c.lower
        diff = np.maximum(np.abs(c.lower - lo), np.abs(c.upper - hi)) / width
        noise = np.maximum(np.abs(c.lower - other.lower), np.abs(c.upper - other.upper)) / width
        print(f"  agreement with naive: |mean bound difference| / CI width: median {np.median(diff):.2%}, "
              f"max {np.max(diff):.2%}")
        print(f"  Monte Carlo noise (vectorised, two seeds):                median "
              f"{np.median(noise):.2%}, max {np.max(noise):.2%}")

    # The whole command path on disk: load, pooling guard, CIs, convergence, checks.
    with tempfile.TemporaryDirectory() as tmp:
        values = {(f"metric_{m}", "same_zone"): data[m].tolist() for m in range(args.metrics)}
        path = make_campaign(Path(tmp), "bench", [FakeRun(values)])
        t0 = time.perf_counter()
        result = confirm(path, ConfirmParams(subsets=args.trials, seed=args.seed))
        t_all = time.perf_counter() - t0
    t0 = time.perf_counter()
    for row in data:
        run_checks(row)
    t_checks = time.perf_counter() - t0
    print(f"  full analysis from disk (load + guard + CIs + convergence + checks): {t_all:.2f} s, "
          f"of which assumption checks ~{t_checks:.2f} s")
    for r in result.series[:3]:
        t1 = r.targets[0]
        need = t1.n_needed if t1.n_needed is not None else (
            f"~{t1.prediction.n} predicted" if t1.prediction else "-")
        rel = r.ci.relative_half_width
        print(f"    {r.series.key.metric}: median {r.ci.estimate:.4g}, ±{rel if rel else math.nan:.2%}, "
              f"n for ±{t1.error:.0%}: {need}")
    return 0 if t_vec <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
