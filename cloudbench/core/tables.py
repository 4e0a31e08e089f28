"""Tables for people and programs: one rich table constructor, one CSV writer."""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table


def write_csv(path: Path, rows: list[dict[str, Any]]) -> bool:
    """A table as CSV (columns from the first row); nothing is written for no rows."""
    if not rows:
        return False
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return True


def titled_table(title: str, columns: Iterable[str] = (), left: Collection[str] = (),
                 no_wrap: bool = False) -> Table:
    """A report table: title on the left, a rule under the header, no outer padding;
    ``columns`` right-aligned except those in ``left``."""
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for c in columns:
        t.add_column(c, justify="left" if c in left else "right", no_wrap=no_wrap)
    return t


def fmt_number(v: Any, digits: int = 1) -> str:
    """A table cell: floats with ``digits`` decimals below 100 and none above, ``-`` for NaN/inf."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.{digits}f}"
    return str(v)
