"""`cloudbench compare` on pairs of simulated campaigns whose truth is known.

Each side is a campaign of ``--runs`` runs x ``--reps`` repetitions drawn by
:func:`cloudbench.testing.adversarial.repetitions` (written apart from the estimators) and
compared exactly as the command does: one value per run (the median of its repetitions), then
:func:`cloudbench.analysis.compare.compare_samples` and the verdict at a 5 % threshold.

Kinds: ``run_effects`` (a normal run effect as large as the repetition noise), ``heavy``
(Student-t, 3 df), ``two_regimes`` (a Markov chain between levels 30 % apart, inside each run);
``rounded``: run_effects rounded to whole µs at a 20 µs level (ties). For each kind, ``--pairs``
null pairs (both sides the same distribution) and ``--pairs`` pairs whose B is exactly 5 % higher
(the threshold). Printed: the false better/worse share (target <= 5 %), the share of 95 % ratio
intervals covering the true ratio (target >= 95 %, from the null and the at-threshold pairs), and
the share called equivalent at the threshold (target <= 5 %), each with its Monte-Carlo SE; and
for contrast the same null pairs with every repetition as a unit (what pooling does).

Run: ``.venv/bin/python bench/bench_compare.py [--pairs 2000]``; exits 1 when a target is missed
by more than 3 SEs.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from cloudbench.analysis.compare import Threshold, compare_samples, decide, reduce_per_run
from cloudbench.testing.adversarial import repetitions, round_us

FIVE = Threshold(0.05, True)


def draw(rng: np.random.Generator, kind: str, n: int, reps: int) -> np.ndarray:
    if kind == "rounded":
        x = repetitions(rng, 2, n, "run_effects", run_size=reps, level=20.0, cv=0.1).values
        return round_us(x)
    return repetitions(rng, 2, n, kind, run_size=reps).values  # type: ignore[arg-type]


def rates(kind: str, pairs: int, runs: int, reps: int, factor: float, per_run: bool,
          seed: int) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)
    ids = [f"r{i // reps}" for i in range(runs * reps)]
    flagged = covered = equivalent = 0
    for _ in range(pairs):
        # in two_regimes the chain runs through the repetitions of each run: each run its own
        # chain, so runs are independent units (one value per run is what compare uses)
        if kind == "two_regimes":
            a = np.concatenate([repetitions(rng, 1, reps, "two_regimes").values[0] for _ in range(runs)])
            b = np.concatenate([repetitions(rng, 1, reps, "two_regimes").values[0] for _ in range(runs)])
        else:
            a, b = draw(rng, kind, runs * reps, reps)
        b = b * factor
        if per_run:
            a, _ = reduce_per_run(a, ids)
            b, _ = reduce_per_run(b, ids)
        (d,) = decide([compare_samples(a, b, FIVE)], ["lower"])
        flagged += d.verdict in ("better", "worse")
        # an end point may equal the truth (ties: whole µs), up to the rounding of exp(log)
        covered += d.ratio_ci is not None and d.ratio_ci[0] * (1 - 1e-9) <= factor <= d.ratio_ci[1] * (1 + 1e-9)
        equivalent += d.verdict == "equivalent"
    return flagged / pairs, covered / pairs, equivalent / pairs


def se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    ok = True
    t0 = time.perf_counter()
    print(f"{args.pairs} pairs per row, {args.runs} runs x {args.reps} repetitions per side, threshold 5%")
    print(f"{'kind':<12} {'false b/w':>10} {'cover null':>11} {'cover @5%':>10} {'equiv @5%':>10} "
          f"{'pooled: false b/w':>18} {'cover':>6}")
    lim_hi = 0.05 + 3 * se(0.05, args.pairs)
    lim_lo = 0.95 - 3 * se(0.95, args.pairs)
    for i, kind in enumerate(("run_effects", "heavy", "two_regimes", "rounded")):
        f0, c0, _ = rates(kind, args.pairs, args.runs, args.reps, 1.0, True, 100 + i)
        _, c1, e1 = rates(kind, args.pairs, args.runs, args.reps, 1.05, True, 200 + i)
        pf, pc, _ = rates(kind, args.pairs, args.runs, args.reps, 1.0, False, 300 + i)
        miss = f0 > lim_hi or c0 < lim_lo or c1 < lim_lo or e1 > lim_hi
        ok &= not miss
        print(f"{kind:<12} {f0:>10.3f} {c0:>11.3f} {c1:>10.3f} {e1:>10.3f} {pf:>18.3f} {pc:>6.3f}"
              f"{'  MISSED' if miss else ''}")
    print(f"targets: false <= {lim_hi:.3f}, coverage >= {lim_lo:.3f}, equivalent at the threshold <= {lim_hi:.3f} "
          f"(3 Monte-Carlo SEs); {time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
