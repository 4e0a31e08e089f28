"""The adversarial coverage suite at full size: every printed interval's
coverage and every printed p-value's rejection rate on data that break the estimators'
assumptions (cloudbench.testing.adversarial_suite), at least 1,000 data sets a row.

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_adversarial.py`` (no root; tens of
minutes on 2 cores, most of it in ``diurnal``: one series' periodogram, fit and power
solvers cost about 0.1 s idle, and campaigns are written as result directories). ``--only diurnal,drains`` runs some
suites, ``--scale 0.2`` smaller sizes, ``--json`` prints the rows as JSON, ``--markdown``
the README's table. ``--render OLD.json [NEW.json]`` prints the README's table from saved
``--json`` outputs (one file per suite may be given, comma-separated): the old run's
achieved value and median width beside the new one's. Exits 1 when a row fails its rule (an interval more than 3 Monte
Carlo SEs under nominal, a test more than 3 SEs over α, a rate's 95 % upper bound over
its target).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from cloudbench.testing import adversarial_suite as suite
from cloudbench.testing.adversarial_rows import Row


def _fmt(x: float, pct: bool = True) -> str:
    if not math.isfinite(x):
        return "—"
    return f"{x:.1%}" if pct else f"{x:.3g}"


def _cells(r: Row) -> list[str]:
    rate = r.kind == "rate"
    achieved = f"{r.achieved:.3g}/h (≤ {r.upper95:.3g})" if rate else _fmt(r.achieved)
    nominal = f"≤ {r.nominal:g}/h" if rate else (f"≤ {r.nominal:.0%}" if r.kind == "test" else _fmt(r.nominal))
    se = f"{r.se:.3g}" if rate else _fmt(r.se)
    n = f"{r.trials:.0f} h" if rate else f"{r.trials:.0f}"
    return [r.estimator, r.generator, r.unit, nominal, achieved, se, _fmt(r.width, pct=False), n,
            "pass" if r.passed else "FAIL", r.note]


HEAD = ["estimator", "generator", "unit", "nominal", "achieved", "MC SE", "median width", "n", "result", "note"]


def _load(paths: str) -> list[Row]:
    rows = []
    for path in paths.split(","):
        with open(path) as f:
            for d in json.load(f)["rows"]:
                rows.append(Row(d["estimator"], d["generator"], d["kind"], d["nominal"], d["hits"],
                                      d["trials"], d["median_width"] if d["median_width"] is not None else math.nan,
                                      d["unit"], d["note"]))
    return rows


def render(old: list[Row], new: list[Row]) -> str:
    """The README's table: nominal, achieved and median width of the old run beside the new."""
    by_key = {r.key: r for r in new}
    head = ["estimator", "generator", "unit", "nominal", "achieved (old)", "achieved (new)", "MC SE",
            "median width (old)", "median width (new)", "n", "old", "new", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in old:
        c = _cells(r)
        n = by_key.get(r.key)
        cn = _cells(n) if n is not None else ["—"] * len(c)
        lines.append("| " + " | ".join([c[0], c[1], c[2], c[3], c[4], cn[4], c[5], c[6], cn[6], c[7], c[8], cn[8],
                                        c[9]]) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="data sets per row, relative to the full run")
    ap.add_argument("--only", default="", help="comma-separated suites: "
                    + ",".join(s.name for s in suite.SUITES))
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    ap.add_argument("--render", nargs="+", metavar="JSON", help="print the README's table from saved --json "
                    "outputs: OLD[,OLD...] [NEW[,NEW...]]")
    args = ap.parse_args()
    if args.render:
        old = _load(args.render[0])
        print(render(old, _load(args.render[1]) if len(args.render) > 1 else []))
        return 0
    only = [s for s in args.only.split(",") if s]
    unknown = set(only) - {s.name for s in suite.SUITES}
    if unknown:
        ap.error(f"unknown suite(s): {', '.join(sorted(unknown))}")
    rows: list[Row] = []
    seconds: dict[str, float] = {}
    for s in suite.SUITES:
        if only and s.name not in only:
            continue
        t0 = time.perf_counter()
        rows += s.run(scale=args.scale)
        seconds[s.name] = time.perf_counter() - t0
        print(f"{s.name}: {seconds[s.name]:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"scale": args.scale, "seconds": seconds, "rows": [r.as_dict() for r in rows]}, indent=1))
    elif args.markdown:
        print("| " + " | ".join(HEAD) + " |")
        print("|" + "---|" * len(HEAD))
        for r in rows:
            print("| " + " | ".join(_cells(r)) + " |")
    else:
        for r in rows:
            c = _cells(r)
            print(f"{c[0]:40s} {c[1]:58s} {c[3]:>8s} {c[4]:>22s} {c[5]:>7s} {c[6]:>8s} {c[7]:>6s} {c[8]:4s}  {c[9]}")
    failed = [r for r in rows if not r.passed]
    for r in failed:
        print(f"FAILED: {r.key}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
