"""`cloudbench compare DIR --changes` on simulated weeks of hourly runs.

Flat series (no change) of each kind of :mod:`cloudbench.testing.changes` (per-run effects,
AR(1) across runs, heavy tails, a daily sine; written apart from the search's model), 168 runs
each, searched exactly as the command searches one series
(:func:`cloudbench.analysis.changes.find_changes`, the daily sinusoid removed when found).
Printed per kind: the share of flat series with a change (target <= 5 %, with its Monte-Carlo
SE), and for a step of 3 noise SDs half-way: the share found within one run of it and the
share of those whose 95 % interval of the difference covers the step. Then power on
i.i.d.-like runs (per-run effects): a step of 1 noise SD half-way through 48 runs and of 0.6 SD
through 168, the share of series with a change found within one run of it. The known limit
(``LIMIT_KINDS``: slow conditions under per-run noise, an ARMA(1,1)) is printed the same way,
marked ``limit``, and does not set the exit code.

Then the command's own speed: a fake campaign of 168 hourly runs x 3 repetitions and
``--series`` series written to disk, ``cloudbench compare DIR --changes --json`` timed
end to end (target <= 10 s: it reads the summaries only).

Run: ``.venv/bin/python bench/bench_changes.py [--series-per-kind 1000] [--steps-per-kind 600]
[--seed 26] [--kinds run_effects,ar1]``;
exits 1 when the false rate is more than 3 SEs over 5 %, the interval's coverage of the steps
found more than 3 SEs under 95 %, or the command takes more than 10 s.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cloudbench.analysis.changes import find_changes
from cloudbench.testing.changes import FLAT_KINDS, LIMIT_KINDS, SD, flat_runs, stepped
from cloudbench.testing.fake_results import FakeRun, make_campaign

ALPHA = 0.05
DAY = 86400.0
TIME_TARGET_S = 10.0
POWER = ((48, 1.0), (168, 0.6))  # (runs, step in noise SDs) of the power rows


def flat_rate(kind: str, n: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    return sum(bool(find_changes(*flat_runs(rng, kind), period=DAY).changes) for _ in range(n)) / n


def step_rates(kind: str, n: int, seed: int, size: float = 3 * SD, runs: int = 168) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    found = covered = 0
    for _ in range(n):
        t, y, k = stepped(rng, kind, size, runs=runs)
        near = [c for c in find_changes(t, y, period=DAY).changes if abs(c.index - k) <= 1]
        if near:
            found += 1
            covered += near[0].diff_ci[0] <= size <= near[0].diff_ci[1]
    return found / n, covered / max(found, 1)


def time_command(series: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    sched = {"every": 3600.0, "count": 168, "timezone": "UTC", "day": DAY}
    groups = [f"g{i}" for i in range(series)]
    runs = [FakeRun({("rtt_p50_us", g): list(1000 + rng.normal(0, 20, 3)) for g in groups}, schedule=sched)
            for _ in range(168)]
    with tempfile.TemporaryDirectory() as tmp:
        root = make_campaign(Path(tmp), "week", runs)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cloudbench", "compare", str(root), "--changes", "--json",
                        "--out", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series-per-kind", type=int, default=1000)
    ap.add_argument("--steps-per-kind", type=int, default=600)
    ap.add_argument("--series", type=int, default=8, help="series in the timed campaign")
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--kinds", default=",".join(FLAT_KINDS + LIMIT_KINDS),
                    help="comma-separated kinds of series (default: all); power rows and timing only with all "
                         "kinds and steps")
    args = ap.parse_args()
    ok = True
    n = args.series_per_kind
    kinds = args.kinds.split(",")
    everything = set(kinds) == set(FLAT_KINDS + LIMIT_KINDS)
    print(f"{'kind':12} {'false (flat)':>16} {'step found':>11} {'CI covers':>16}")
    for i, kind in enumerate(FLAT_KINDS + LIMIT_KINDS):
        if kind not in kinds:
            continue
        rate = flat_rate(kind, n, args.seed + i)
        se = math.sqrt(ALPHA * (1 - ALPHA) / n)
        found, cov = step_rates(kind, args.steps_per_kind, args.seed + 100 + i) if args.steps_per_kind else (0.0, 1.0)
        miss = rate > ALPHA + 3 * se
        n_found = max(round(found * args.steps_per_kind), 1)
        short = cov < 0.95 - 3 * math.sqrt(0.95 * 0.05 / n_found)
        limit = kind in LIMIT_KINDS
        ok &= limit or (not miss and not short)
        print(f"{kind:12} {rate:7.1%} ± {math.sqrt(rate * (1 - rate) / n):5.1%}{' !' if miss else '  '}"
              + (f" {found:10.1%} {cov:8.1%} ± {math.sqrt(cov * (1 - cov) / n_found):4.1%}{' !' if short else ''}"
                 if args.steps_per_kind else f" {'-':>10} {'-':>15}")
              + f"{'  limit' if limit else ''}", flush=True)
    if not everything or not args.steps_per_kind:
        return 0 if ok else 1
    for runs, sd in POWER:
        found, _ = step_rates("run_effects", args.steps_per_kind, args.seed + 200 + runs, sd * SD, runs)
        print(f"power: a {sd:g} SD step half-way through {runs} runs found (within one run) in {found:.1%} "
              f"± {math.sqrt(found * (1 - found) / args.steps_per_kind):.1%}", flush=True)
    took = time_command(args.series, args.seed)
    print(f"compare --changes, 168 runs x 3 repetitions, {args.series} series: {took:.1f} s "
          f"(target <= {TIME_TARGET_S:.0f} s)")
    ok &= took <= TIME_TARGET_S
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
