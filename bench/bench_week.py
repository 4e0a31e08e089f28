"""A week of StormCloud-size runs: `cloudbench diurnal`, `confirm` and `compare --changes` over
168 hourly runs, each timed end to end as the user runs it (≤ 10 s each).

The three commands read each run's manifest and summaries (summaries.parquet: one value per
repetition, metric and latency group), never its observations, so the week is written as
summaries and manifests in the documented format (:mod:`cloudbench.testing.fake_results`,
the same writer the tests use) rather than 168 × 138 M observations: per run the series a
StormCloud run's echo workload summarises (p50, p99 and mean RTT of each of the five latency
groups, the quorum q3of5's p50 and p99), two repetitions each, hourly from a Monday, with a
small daily sine, per-run effects and noise. `bench/bench_scale.py` measures what one such
run's report costs.

Usage: .venv/bin/python bench/bench_week.py [--runs 168] [--repetitions 2]; exits 1 when a
command takes more than 10 s or fails.
"""

from __future__ import annotations

import argparse
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.core.topology import GROUP_ORDER  # noqa: E402
from cloudbench.testing.fake_results import FakeRun, make_campaign  # noqa: E402

TARGET_S = 10.0
DAY = 86400.0
# the echo summaries' metrics (workloads/echo/summaries.py), with a median level per group in µs
BASE_US = dict(zip([g.value for g in GROUP_ORDER], (40.0, 70.0, 90.0, 250.0, 30_000.0), strict=False))
QUORUM = "q:h0,h1,h3,h5,h7"


def week(runs: int, repetitions: int, seed: int) -> list[FakeRun]:
    rng = np.random.default_rng(seed)
    sched = {"every": 3600.0, "count": runs, "timezone": "UTC", "day": DAY}
    out = []
    for i in range(runs):
        hour = 2 * math.pi * i * 3600.0 / DAY
        values: dict[tuple[str, str], list[float | None]] = {}
        for g, base in BASE_US.items():
            level = base * (1 + 0.02 * math.sin(hour) + rng.normal(0, 0.01))  # daily sine, per-run effect
            for metric, factor in (("rtt_p50_us", 1.0), ("rtt_mean_us", 1.1), ("rtt_p99_us", 2.5)):
                values[(metric, g)] = [round(level * factor * (1 + rng.normal(0, 0.01)), 1)
                                       for _ in range(repetitions)]
        for metric, factor in (("quorum_q3of5_p50_us", 1.0), ("quorum_q3of5_p99_us", 2.0)):
            values[(metric, QUORUM)] = [round(30_000.0 * factor * (1 + rng.normal(0, 0.01)), 1)
                                        for _ in range(repetitions)]
        out.append(FakeRun(values, regions=("r1", "r2", "r3"), zones_per_region=2, schedule=sched,
                           workloads=({"name": "echo", "kind": "echo", "rate": 100, "window": 30.0},)))
    return out


COMMANDS = (("diurnal", ["diurnal", "{dir}", "--json"]),
            ("confirm", ["confirm", "{dir}"]),
            ("compare --changes", ["compare", "{dir}", "--changes", "--json", "--out", "{out}"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=168)
    ap.add_argument("--repetitions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        root = make_campaign(Path(tmp), "week", week(args.runs, args.repetitions, args.seed))
        series = 3 * len(BASE_US) + 2
        print(f"wrote {args.runs} runs × {args.repetitions} repetitions × {series} series (summaries and "
              f"manifests) in {time.perf_counter() - t0:.1f} s")
        for name, argv in COMMANDS:
            t0 = time.perf_counter()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run([sys.executable, "-m", "cloudbench", *[a.format(dir=root, out=tmp) for a in argv]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, cwd=ROOT)
            took = time.perf_counter() - t0
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime
            fine = r.returncode == 0 and took <= TARGET_S
            ok &= fine
            print(f"  cloudbench {name:18s} {took:5.1f} s (target ≤ {TARGET_S:.0f} s; CPU {cpu:.1f} s), "
                  f"exit {r.returncode}"
                  + ("" if r.returncode == 0 else f": {r.stderr.strip()[-500:]}"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
