"""The ``cloudbench`` command: one module per command group, registered on :data:`app`."""

import faulthandler
import signal

from cloudbench.core.allocator import keep_freed_memory, limit_arenas, one_blas_thread

limit_arenas()  # the command's threads share the main heap: before its imports start one (see there)
one_blas_thread()  # before numpy loads OpenBLAS

# Imported for their commands, in the order `cloudbench --help` lists them.
from cloudbench.cli import spec, run, confirm, compare, campaign, gc, doctor  # noqa: E402, I001
from cloudbench.cli.app import app, leaving, quick_exit  # noqa: E402

__all__ = ["app", "campaign", "compare", "confirm", "doctor", "gc", "main", "run", "spec"]


def main() -> None:
    """Entry point of the ``cloudbench`` script: the command's exit code, quickly where the command
    allows (:func:`~cloudbench.cli.app.leave_quickly`). ``kill -USR1 PID`` prints every thread's
    Python stack to stderr (a command that seems stuck), and the command goes on."""
    keep_freed_memory()  # the command's process scans large files (see there)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        app()
    except SystemExit as e:
        if leaving.quick and (e.code is None or isinstance(e.code, int)):
            quick_exit(e.code or 0)
        raise
