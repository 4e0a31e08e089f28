"""What a report prints, as data: its tables and its lines (warnings, notes, facts).

A workload's report module turns its section of report.json into a list of
:data:`Block` (:class:`~cloudbench.core.tables.ReportTable` or :class:`ReportLine`);
the terminal prints that list (:func:`print_blocks`) and the HTML page renders the
same list, so the page carries every table row, warning and note the terminal prints.
"""

from __future__ import annotations

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


def print_blocks(blocks: Iterable[Block], console: Console) -> None:
    """Print ``blocks`` in order: tables laid out for the console's width, lines soft-wrapped
    (a line is one sentence; the terminal wraps it, so no word is cut)."""
    for b in blocks:
        if isinstance(b, ReportLine):
            prefix = Text(PREFIX[b.kind], style=STYLE[b.kind] if b.kind == "warning" else "")
            body = Text(b.text, style=STYLE[b.kind] if b.kind == "note" else "")
            console.print(prefix + body, highlight=False, soft_wrap=True)
        else:
            console.print(b)


def table_cells(t: ReportTable) -> tuple[list[str], list[list[str]]]:
    """A table's full headers and its rows as plain text (for renderings other than the terminal)."""
    return [c.header for c in t.columns], [[cell.plain for cell in row] for row in t.rows]
