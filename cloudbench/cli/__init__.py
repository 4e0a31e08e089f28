"""The ``cloudbench`` command: one module per command group, registered on :data:`app`."""

# Imported for their commands, in the order `cloudbench --help` lists them.
from cloudbench.cli import spec, run, confirm, compare, campaign, gc, doctor  # noqa: I001
from cloudbench.cli.app import app
from cloudbench.core.allocator import keep_freed_memory

__all__ = ["app", "campaign", "compare", "confirm", "doctor", "gc", "main", "run", "spec"]


def main() -> None:
    """Entry point of the ``cloudbench`` script."""
    keep_freed_memory()  # the command's process scans large files (see there)
    app()
