"""The step test of the level-shift detectors on flat and stepped window series: does its
p-value hold its level where windows are dependent, and what power is left.

:func:`cloudbench.analysis.levelshift.step_p` (max-CUSUM, AR(1) sieve bootstrap that
repeats the split search) is the p-value of both detectors' steps (``levelshift.detect`` on
group series, ``events._steps`` on each pair's window medians). Printed:

1. Its rejection rate on flat series from :mod:`cloudbench.testing.adversarial` (written
   apart from the test): i.i.d. normal, AR(1) φ = 0.5 and 0.8 between windows, AR(1) 0.3
   with Student-t (3 df) innovations, and window medians of raw echoes with
   retransmission-timeout outliers (1e-4 at +200 ms), at α = 0.05 and 1e-3, with the
   Monte-Carlo SE; and the whole detector's (``detect``) share of flat series with a step.
2. Its power: steps of 10 and 40 noise SDs half-way (i.i.d. noise) found at 1e-3.
3. Window means against window medians (the README's "spurious shifts"): ``detect`` on
   quiet LAN series of 300 one-second windows of 1,000 echoes with retransmission
   timeouts, the share with a step or spike on means and on medians.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_steps.py [--series 1000] [--windows 16,40,100]``;
exits 1 when a flat rate is more than 3 SEs over α.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from cloudbench.analysis.levelshift import detect, step_p
from cloudbench.testing import adversarial as gen

KINDS = ("iid", "AR(1) 0.5", "AR(1) 0.8", "t3, AR(1) 0.3", "RTO window medians")


def flat(rng: np.random.Generator, kind: str, m: int, n: int) -> np.ndarray:
    if kind == "iid":
        return 100.0 + gen.ar1(rng, (m, n), 0.0)
    if kind == "AR(1) 0.5":
        return 100.0 + gen.ar1(rng, (m, n), 0.5)
    if kind == "AR(1) 0.8":
        return 100.0 + gen.ar1(rng, (m, n), 0.8)
    if kind == "t3, AR(1) 0.3":
        return 100.0 + gen.ar1(rng, (m, n), 0.3, df=3.0)
    _means, medians = gen.window_stats(rng, m, n, 1000)
    return medians


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--series", type=int, default=1000, help="flat series per kind and length")
    ap.add_argument("--windows", default="16,40,100", help="series lengths (windows)")
    ap.add_argument("--quiet", type=int, default=200, help="quiet LAN series for the means/medians part")
    args = ap.parse_args()
    rng = np.random.default_rng(23)
    m = args.series
    failed = []
    print(f"1. flat series, {m} per row: share with p < 0.05 | p < 1e-3 (step test); detect(): share with a step")
    for n in (int(x) for x in args.windows.split(",")):
        for kind in KINDS:
            t0 = time.perf_counter()
            y = flat(rng, kind, m, n)
            p = np.array([step_p(v, 0.05, seed=i) for i, v in enumerate(y)])
            p3 = np.array([step_p(v, 1e-3, seed=i) if p[i] < 0.05 else 1.0 for i, v in enumerate(y)])
            det = sum(any(s.kind == "step" for s in detect(np.arange(float(n)), v)) for v in y)
            r05, r3 = float(np.mean(p < 0.05)), float(np.mean(p3 < 1e-3))
            se05, se3 = math.sqrt(0.05 * 0.95 / m), math.sqrt(1e-3 * (1 - 1e-3) / m)
            ok = r05 <= 0.05 + 3 * se05 and r3 <= 1e-3 + 3 * se3
            if not ok:
                failed.append((n, kind))
            print(f"  {n:4d} windows  {kind:20s} p<0.05: {r05:6.1%} (SE {se05:.1%})  p<1e-3: {int(r3 * m):3d}/{m} "
                  f"(bar {1e-3 + 3 * se3:.2%})  detect: {det:3d}/{m}  {'ok' if ok else 'OVER'}  "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    print("2. power at 1e-3, i.i.d. noise, a step half-way")
    for n in (16, 40):
        for size in (10.0, 40.0):
            k = 100
            y = 100.0 + gen.ar1(rng, (k, n), 0.0) + np.where(np.arange(n) >= n // 2, size, 0.0)
            found = sum(step_p(v, 1e-3, seed=i) < 1e-3 for i, v in enumerate(y))
            print(f"  {n:4d} windows, step of {size:g} SDs: {found}/{k} found", flush=True)
    print(f"3. {args.quiet} quiet LAN series, 300 x 1 s windows of 1,000 echoes, RTO 1e-4 at +200 ms")
    means, medians = gen.window_stats(rng, args.quiet, 300, 1000)
    t = np.arange(300.0)
    on_means = sum(bool(detect(t, v)) for v in means)
    on_medians = sum(bool(detect(t, v)) for v in medians)
    print(f"  with a shift or spike: on window means {on_means} of {args.quiet}, on window medians "
          f"{on_medians} of {args.quiet}")
    for n, kind in failed:
        print(f"FAILED: {kind} at {n} windows", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
