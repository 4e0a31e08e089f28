"""The ``cloudbench`` Typer app, its consoles, and :func:`guard`: the only place errors become exits.

Commands live one group per module (:mod:`.spec`, :mod:`.run`, :mod:`.confirm`,
:mod:`.gc`) and use only the public API (:mod:`cloudbench`). Exit codes are
:class:`cloudbench.errors.ExitCode`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from cloudbench.errors import CloudbenchError, ExitCode

app = typer.Typer(
    name="cloudbench",
    help="Cloud network measurement campaigns, and how far you can trust the numbers.\n\n"
    "Write a YAML spec, `cloudbench validate` it, look at the `plan`, `run` it, then "
    "`report` and `confirm` the results.\n\n"
    "Exit codes: 0 success, 1 error, 2 bad spec or option, 3 over budget, "
    "4 run incomplete (some trials failed; data kept), 5 disk full or too small (data kept; "
    "`run --resume` after freeing space), 6 worse (`compare --fail-on worse` found a worse row), "
    "130 interrupted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Soft wrap: a message is one line however narrow the terminal (or 80 columns when piped), so a
# program can parse it; tables still fit the width.
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])

SpecArg = Annotated[Path, typer.Argument(help="campaign spec (YAML)", show_default=False)]


def guard(fn: F) -> F:
    """Turn cloudbench errors into a message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CloudbenchError as e:
            err.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(int(e.exit_status)) from None
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: everything created was torn down; "
                      "data measured so far is kept")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper  # type: ignore[return-value]


def print_warnings(warnings: list[str]) -> None:
    """A spec's warnings (valid but suspicious input), one line each on stderr."""
    for w in warnings:
        err.print(f"[yellow]{escape(w)}[/]", highlight=False, soft_wrap=True)
