"""Print the README's table of achieved coverage: every interval the report prints,
simulated over ≥ 1,000 data sets with a known truth (cloudbench.testing.coverage).

Run: ``.venv/bin/python bench/coverage_table.py`` (no root; the drain cells take most of
its time). ``--markdown`` prints the table as Markdown. Exits 1 when an interval misses its
level by more than three binomial standard errors (MC SE: the binomial SE at the nominal
level). Drains: 1,100 data sets per sampling interval (0.25, 0.5, 1 s) and noise (i.i.d.,
AR(1)), so that at least 1,000 print each interval; the median width is relative to the
truth, that of the percentile-bootstrap interval it replaced (on the same data) in
parentheses and its coverage in the note.
"""

from __future__ import annotations

import argparse
import math
import sys

from cloudbench.testing import coverage as cv


def _width(c: cv.Coverage) -> str:
    """Median width relative to the truth, with the replaced interval's beside it."""
    if math.isnan(c.median_width):
        return ""
    old = "" if math.isnan(c.old_median_width) else f" ({c.old_median_width:.1%})"
    return f"{c.median_width:.1%}{old}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    args = ap.parse_args()
    rows = [c for fn in cv.ALL for c in fn()]
    bad = [c for c in rows if c.achieved < c.nominal - 3 * c.se]
    if args.markdown:
        print("| interval | nominal | achieved | MC SE | data sets | median width (old) | "
              "s per check | note |")
        print("|---|---|---|---|---|---|---|---|")
        for c in rows:
            print(f"| {c.interval} | {c.nominal:.0%} | {c.achieved:.1%} | {c.se:.1%} | "
                  f"{c.datasets} | {_width(c)} | {c.seconds:.1f} | {c.note} |")
    else:
        for c in rows:
            print(f"{c.interval:52s} {c.nominal:6.0%} {c.achieved:8.1%} ±{c.se:5.1%} "
                  f"{c.datasets:6d} {_width(c):>16s} {c.seconds:6.1f}s  {c.note}")
    for c in bad:
        print(f"MISSED: {c.interval} {c.achieved:.3f} < {c.nominal} - 3 SE", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
