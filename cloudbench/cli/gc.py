"""`cloudbench gc`: remove what killed runs left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

import cloudbench
from cloudbench.cli.app import app, guard, out


@app.command()
@guard
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would be removed")] = False,
    include_live: Annotated[bool, typer.Option("--all", help="also testbeds of runs still alive")] = False,
    results: Annotated[Path, typer.Option(help="result store root, searched for cloud stacks")] = Path(
        "results"),
) -> None:
    """Remove what killed runs left behind: testbed namespaces and their sshd processes, and
    cloud stacks whose lease expired or whose controller died."""
    removed = 0
    for line in cloudbench.collect_garbage(results, dry_run=dry_run, include_live=include_live):
        out.print(escape(line), highlight=False)  # printed before a later failure can stop us
        removed += 1
    if not removed:
        out.print("nothing to remove")


@app.command()
def version() -> None:
    """Print the version."""
    out.print(f"cloudbench {cloudbench.__version__}")
