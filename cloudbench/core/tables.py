"""Tables for people and programs: one rich table constructor, one CSV writer."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

Justify = Literal["left", "right", "center"]


def write_csv(path: Path, rows: list[dict[str, Any]]) -> bool:
    """A table as CSV (columns from the first row); nothing is written for no rows."""
    if not rows:
        return False
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return True


@dataclass
class _Column:
    header: str
    justify: Justify
    short: str | None  # abbreviated header, explained in a legend under the table


def _text(cell: str | Text) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(cell)


def _longest_word(t: Text) -> int:
    return max((len(w) for w in t.plain.split()), default=0)


def _longest_line(t: Text) -> int:
    return max((len(line) for line in t.plain.splitlines()), default=0)


class ReportTable:
    """A report table that never cuts a word of a header, whatever the width.

    Built like a rich table (``add_column``, ``add_row``; string cells are rich
    markup) and laid out when printed, for the width it is given:

    1. every column at its natural width, when that fits;
    2. else columns narrowed, headers wrapped at spaces, never below a column's longest
       cell (a cell is never wrapped: a row on two lines reads as two rows) or a
       header's longest word;
    3. else headers replaced by their ``short`` forms, with a legend under the table;
    4. else stacked: the table transposed (a row per column, the first ``key``
       cells of each row as its heading), as many rows side by side as fit; a heading
       with a word too wide for a column is a line of its own above its row's cells.

    The title is a line of its own, so it wraps at the console's width, not the table's.
    """

    def __init__(self, title: str = "", columns: Iterable[str] = (), left: Collection[str] = (),
                 short: Mapping[str, str] | None = None, key: int = 1) -> None:
        self.title = title
        self.key = key
        self.columns: list[_Column] = []
        self.rows: list[list[Text]] = []
        for c in columns:
            self.add_column(c, justify="left" if c in left else "right", short=(short or {}).get(c))

    def add_column(self, header: str, justify: Justify = "right", short: str | None = None) -> None:
        """A column; ``short``: its header where the full one does not fit (with a legend)."""
        self.columns.append(_Column(header, justify, short))

    def add_row(self, *cells: str | Text) -> None:
        """A row of cells (strings are rich markup); missing trailing cells are empty."""
        row = [_text(c) for c in cells]
        self.rows.append(row + [Text("")] * (len(self.columns) - len(row)))

    # ------------------------------------------------------------------ layout

    def _bounds(self, headers: list[str]) -> tuple[list[int], list[int]]:
        """Per column: the narrowest width that cuts no word, and the natural width."""
        lows, highs = [], []
        for i, h in enumerate(headers):
            cells = [r[i] for r in self.rows]
            # a header wraps at its spaces; a cell never does (a row on two lines reads as two rows)
            low = max([len(w) for w in h.split()] + [_longest_line(t) for t in cells] + [1])
            high = max([len(h)] + [_longest_line(t) for t in cells] + [1])
            lows.append(low)
            highs.append(max(high, low))
        return lows, highs

    @staticmethod
    def _overhead(n: int) -> int:
        # box.SIMPLE_HEAD without edge padding: two edge columns, a divider and two
        # padding spaces between neighbours
        return 3 * n - 1

    def _widths(self, headers: list[str], width: int) -> list[int] | None:
        lows, highs = self._bounds(headers)
        room = width - self._overhead(len(headers))
        if sum(highs) <= room:
            return highs
        if sum(lows) > room:
            return None
        widths = list(lows)
        spare = room - sum(lows)
        want = [h - lo for h, lo in zip(highs, lows, strict=True)]
        total = sum(want)
        for i, w in enumerate(want):  # give the spare room out in proportion to what is missing
            widths[i] += min(w, spare * w // total) if total else 0
        return widths

    def _table(self, headers: list[str], widths: list[int]) -> Table:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for c, h, w in zip(self.columns, headers, widths, strict=True):
            # a header wraps at its spaces even over cells that do not (rich would cut it)
            t.add_column(Text(h, no_wrap=False), justify=c.justify, width=w, no_wrap=True)
        for r in self.rows:
            t.add_row(*r)
        return t

    def _stacked(self, width: int) -> list[Table | Text]:
        key = min(self.key, len(self.columns))
        body = list(range(key, len(self.columns)))
        corner = " ".join(self.columns[i].header for i in range(key))
        label_w = max([len(self.columns[i].header) for i in body] + [len(corner), 1])
        heads = [Text(" ".join(r[i].plain for i in range(key))) for r in self.rows]
        col_w = max([_longest_word(h) for h in heads]
                    + [_longest_line(r[i]) for r in self.rows for i in body] + [1])
        # label column, then ``per`` row columns: widths plus dividers and padding
        per = max(1, (width - label_w - 2) // (col_w + 3))
        out: list[Table | Text] = []
        if key and any(_longest_word(h) > width - label_w - self._overhead(2) for h in heads):
            # a heading with a word wider than its column would be folded mid-word (a group name of
            # 60+ characters at 80 columns): each row's heading is a line of its own instead
            for j, r in enumerate(self.rows):
                t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_header=False)
                t.add_column(no_wrap=True, min_width=label_w)
                t.add_column(justify="right", overflow="fold")
                for i in body:
                    t.add_row(self.columns[i].header, r[i])
                out += [Text(f"{corner}  {heads[j].plain}", style="bold"), t]
            return out
        for start in range(0, max(len(self.rows), 1), per):
            chunk = range(start, min(start + per, len(self.rows)))
            t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_header=key > 0)
            t.add_column(corner, no_wrap=True, min_width=label_w)
            for j in chunk:
                t.add_column(heads[j], justify="right", overflow="fold")
            for i in body:
                t.add_row(self.columns[i].header, *[self.rows[j][i] for j in chunk])
            out.append(t)
        return out

    def fits(self, width: int) -> bool:
        """Whether the table fits ``width`` columns side by side with its full headers (no
        abbreviation, no stacking)."""
        return self._widths([c.header for c in self.columns], width) is not None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.title:
            yield Text(self.title, style="table.title")
        full = [c.header for c in self.columns]
        widths = self._widths(full, width)
        if widths is not None:
            yield self._table(full, widths)
            return
        if any(c.short for c in self.columns):
            short = [c.short or c.header for c in self.columns]
            widths = self._widths(short, width)
            if widths is not None:
                yield self._table(short, widths)
                yield Text("  ".join(f"{c.short} = {c.header}" for c in self.columns if c.short),
                           style="dim")
                return
        yield from self._stacked(width)


def titled_table(title: str, columns: Iterable[str] = (), left: Collection[str] = (),
                 short: Mapping[str, str] | None = None, key: int = 1) -> ReportTable:
    """A report table: title on the left, a rule under the header, no outer padding;
    ``columns`` right-aligned except those in ``left``; no header word is ever cut
    (:class:`ReportTable`)."""
    return ReportTable(title, columns, left, short, key)


def fmt_number(v: Any, digits: int = 1) -> str:
    """A table cell: floats with ``digits`` decimals below 100 and none above, ``-`` for NaN/inf."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.{digits}f}"
    return str(v)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders the numbers inside a text by value: ``payload=64`` before
    ``payload=1024`` (as text, 1024 < 16384 < 64 < 65536)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", text) if part)


def rep_number(index: int | float | str) -> str:
    """A repetition as printed: counted from 1 (as `plan` and the progress display count them),
    whatever its on-disk index (``r000`` in trial ids, ``repetition`` 0 in the tables' data)."""
    try:
        return str(int(index) + 1)
    except (TypeError, ValueError):
        return str(index)
