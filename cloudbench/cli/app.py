"""The ``cloudbench`` Typer app, its consoles, and :func:`guard`: the only place errors become exits.

Commands live one group per module (:mod:`.spec`, :mod:`.run`, :mod:`.confirm`,
:mod:`.gc`) and use only the public API (:mod:`cloudbench`). Exit codes are
:class:`cloudbench.errors.ExitCode`.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from cloudbench.core.blocks import print_line
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
# Piped or redirected, a message is one line whatever the width, so a program can grep it; on a
# terminal, lines wrap at spaces to its width (COLUMNS, else the terminal's size), never mid-word,
# and warnings hang under their text (print_line). Tables fit the width either way.
out = Console()
out.soft_wrap = not out.is_terminal
err = Console(stderr=True)
err.soft_wrap = not err.is_terminal
F = TypeVar("F", bound=Callable[..., Any])

SpecArg = Annotated[Path, typer.Argument(help="campaign spec (YAML)", show_default=False)]


def guard(fn: F) -> F:
    """Turn cloudbench errors into a message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CloudbenchError as e:
            print_line(err, f"[red]error:[/] {escape(str(e))}", hang=len("error: "))
            raise typer.Exit(int(e.exit_status)) from None
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: everything created was torn down; "
                      "data measured so far is kept")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None

    return wrapper  # type: ignore[return-value]


@dataclass
class Leaving:
    """How the process ends once its command returns: ``quick`` (set by a command that has closed
    every file it wrote, :func:`leave_quickly`) skips the interpreter's teardown."""

    quick: bool = False


leaving = Leaving()


def leave_quickly() -> None:
    """Say that this command's process may end without tearing its objects down (:func:`quick_exit`):
    it wrote and closed its files. ``cloudbench report`` on the 138 M-observation run spent 0.42–0.51 s
    after its last output freeing the report, its arrays and the modules (0.03–0.05 s without)."""
    leaving.quick = True


def quick_exit(code: int) -> NoReturn:
    """End the process with ``code`` once its atexit handlers have run and stdout and stderr are
    flushed, without the interpreter's teardown (``os._exit``); while a thread other than the main
    one and not a daemon is alive, by ``sys.exit`` as usual (the interpreter waits for it)."""
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # logging's flush, weakref finalizers (temporary directories), ...
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: as the interpreter, go on
            stream.flush()
    os._exit(code)


def print_warnings(warnings: list[str]) -> None:
    """A spec's warnings (valid but suspicious input), one line each on stderr."""
    for w in warnings:
        print_line(err, f"[yellow]{escape(w)}[/]")
