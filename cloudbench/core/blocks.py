"""What a report prints, as data: its tables and its lines (warnings, notes, facts).

A workload's report module turns its section of report.json into a list of
:data:`Block` (:class:`~cloudbench.core.tables.ReportTable` or :class:`ReportLine`);
the terminal prints that list (:func:`print_blocks`) and the HTML page renders the
same list, so the page carries every table row, warning and note the terminal prints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rich.console import Console
from rich.text import Text

from cloudbench.core.tables import ReportTable

LineKind = Literal["warning", "note", "fact"]

PREFIX: dict[LineKind, str] = {"warning": "warning: ", "note": "note: ", "fact": ""}
"""What the terminal prints before a line of each kind (the page marks the kind by its style)."""

STYLE: dict[LineKind, str] = {"warning": "yellow", "note": "dim", "fact": ""}


@dataclass(frozen=True)
class ReportLine:
    """One line of a report: plain text (no markup), and what it is.

    ``warning``: something that limits what the numbers can be trusted for (the page
    lists every one under "Can it be trusted?"); ``note``: what a number or column
    means; ``fact``: a finding or count printed as a sentence.
    """

    text: str
    kind: LineKind = "fact"

    def printed(self) -> str:
        """The line as the terminal prints it (prefix and text)."""
        return PREFIX[self.kind] + self.text


Block = ReportTable | ReportLine
"""One printed part of a report."""


def warning(text: str) -> ReportLine:
    """A warning line."""
    return ReportLine(text, "warning")


def note(text: str) -> ReportLine:
    """A note line."""
    return ReportLine(text, "note")


def fact(text: str) -> ReportLine:
    """A fact line."""
    return ReportLine(text, "fact")


HANG = 2
"""How far a wrapped line's continuation lines are indented past its own indentation (a line with
a prefix such as ``warning: `` hangs under the text after it)."""


def wrap_spans(plain: str, width: int, hang: int) -> list[tuple[int, int]]:
    """Where to break ``plain`` (one line) for ``width`` columns: (start, end) of each printed line,
    broken only at spaces; continuation lines have ``hang`` columns fewer. A word longer than a
    line is a line of its own (the terminal folds it; nothing is cut here)."""
    spans: list[tuple[int, int]] = []
    start, end, room = 0, 0, width
    for m in re.finditer(r"\S+", plain):
        if end == 0 or m.end() - start <= room:  # the first word stays after the line's own indentation
            end = m.end()
            continue
        spans.append((start, end))
        start, end, room = m.start(), m.end(), max(width - hang, 1)
    spans.append((start, end))
    return spans


def print_line(console: Console, line: str | Text, hang: int | None = None) -> None:
    """A warning or a sentence of prose (``str``: rich markup): on a terminal, wrapped at spaces to
    its width with a hanging indent (continuation lines ``hang`` columns in, by default its own
    indentation plus :data:`HANG`); piped or written to a file, ONE line whatever the width, so
    that it can be grepped (the line a program reads does not depend on a terminal)."""
    text = line if isinstance(line, Text) else Text.from_markup(line)
    for part in text.split("\n"):
        if not console.is_terminal:
            console.print(part, highlight=False, soft_wrap=True)
            continue
        plain = part.plain
        indent = len(plain) - len(plain.lstrip(" "))
        step = indent + (HANG if hang is None else hang)
        for i, (a, b) in enumerate(wrap_spans(plain, console.width, step)):
            console.print(Text(" " * step) + part[a:b] if i else part[a:b], highlight=False, soft_wrap=True)


def print_blocks(blocks: Iterable[Block], console: Console) -> None:
    """Print ``blocks`` in order: tables laid out for the console's width, lines by
    :func:`print_line` (wrapped at spaces on a terminal, hanging under the text after the prefix;
    one line each when piped)."""
    for b in blocks:
        if isinstance(b, ReportLine):
            prefix = Text(PREFIX[b.kind], style=STYLE[b.kind] if b.kind == "warning" else "")
            body = Text(b.text, style=STYLE[b.kind] if b.kind == "note" else "")
            print_line(console, prefix + body, hang=len(PREFIX[b.kind]) or HANG)
        else:
            console.print(b)


def table_cells(t: ReportTable) -> tuple[list[str], list[list[str]]]:
    """A table's full headers and its rows as plain text (for renderings other than the terminal)."""
    return [c.header for c in t.columns], [[cell.plain for cell in row] for row in t.rows]
