"""The one exception tree of cloudbench, and the exit codes of the ``cloudbench`` command.

Library code raises these; only :mod:`cloudbench.cli` prints them and exits,
with the error's :attr:`CloudbenchError.exit_status`. Every error carries
enough context to say what was wrong, where, and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """Exit codes of the ``cloudbench`` command (the README's table)."""

    OK = 0  # success
    ERROR = 1  # an error: provisioning, a host, the result store, an analysis
    USAGE = 2  # a bad spec or a bad command-line value; nothing was created
    OVER_BUDGET = 3  # the estimated cost is above the spec's budget; nothing was created
    INCOMPLETE = 4  # the run finished, but some trials or repetitions failed (data kept)
    DISK_FULL = 5  # the results filesystem is full, or too small for the plan; data kept, resumable
    WORSE = 6  # `compare --fail-on worse`: some row of B is worse than A (the table is printed)
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; everything created was torn down, data kept


class CloudbenchError(Exception):
    """Root of every error cloudbench raises on purpose."""

    exit_status: ExitCode = ExitCode.ERROR  # of the `cloudbench` process when this error ends it


class SpecError(CloudbenchError):
    """A spec file is invalid: names the file, the line and the field."""

    exit_status = ExitCode.USAGE

    def __init__(self, path: str, line: int | None, field: str, message: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        loc = f" [{field}]" if field else ""
        super().__init__(f"{where}:{loc} {message}")


class SpecErrors(SpecError):
    """Several spec errors at once (all are reported, the first one leads)."""

    def __init__(self, errors: list[SpecError]) -> None:
        self.errors = errors
        first = errors[0]
        super().__init__(first.path, first.line, first.field, first.message)
        self.args = ("\n".join(str(e) for e in errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


class ProvisionError(CloudbenchError):
    """A provider could not create (or destroy) what the topology asked for."""

    def __init__(self, provider: str, stack: str, message: str) -> None:
        self.provider = provider
        self.stack = stack
        super().__init__(f"{provider} [{stack}]: {message}")


@dataclass
class RemoteFailure:
    """One host's failure: what ran, how it ended, the last lines it printed."""

    host: str
    command: str
    exit_code: int | None
    stderr_tail: str
    reason: str = ""

    def describe(self) -> str:
        code = "no exit code" if self.exit_code is None else f"exit {self.exit_code}"
        tail = self.stderr_tail.strip().splitlines()[-5:]
        tail_txt = ("\n    " + "\n    ".join(tail)) if tail else ""
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.host}: `{self.command}` failed, {code}{why}{tail_txt}"


class RemoteError(CloudbenchError):
    """A command failed on one host."""

    def __init__(self, failure: RemoteFailure) -> None:
        self.failure = failure
        self.host = failure.host
        self.command = failure.command
        self.exit_code = failure.exit_code
        self.stderr_tail = failure.stderr_tail
        super().__init__(failure.describe())


@dataclass
class GroupRemoteError(CloudbenchError):
    """A fan-out where some hosts failed; carries every host's outcome."""

    failures: list[RemoteFailure] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{len(self.failures)} host(s) failed, {len(self.succeeded)} succeeded:"]
        lines += ["  " + f.describe() for f in self.failures]
        return "\n".join(lines)


class ResultError(CloudbenchError):
    """A result directory or file is missing, corrupted, or of an unknown schema."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class AnalysisError(CloudbenchError):
    """An analysis cannot be done on these data (and says why)."""


class BudgetError(CloudbenchError):
    """The estimated cost is above the spec's ``budget`` (or cannot be computed)."""

    exit_status = ExitCode.OVER_BUDGET


class UsageError(CloudbenchError):
    """A command-line option has a value cloudbench cannot use."""

    exit_status = ExitCode.USAGE


class ReapError(ProvisionError):
    """Some stacks (or, from the tag reaper, resources) could not be removed; carries what was
    done and what failed. ``what`` says what the failures are about ("stack(s) not destroyed",
    "resource(s) not deleted")."""

    def __init__(self, done: list[str], failures: list[str], what: str = "stack(s) not destroyed",
                 provider: str = "pulumi", hint: str = "") -> None:
        self.done = done
        self.failures = failures
        super().__init__(provider, "gc", f"{len(failures)} {what}:\n  " + "\n  ".join(failures)
                         + (f"\n{hint}" if hint else "")
                         + ("\ndone:\n  " + "\n  ".join(done) if done else ""))


class RecordError(ResultError):
    """A worker's raw record is damaged or of a schema its reader does not know."""


DISK_FULL_REASON = "no space left on the results filesystem"
"""The ``reason`` of a host's failure when the controller's disk, not the host, stopped a pull."""


class DiskFullError(CloudbenchError):
    """The results filesystem ran out of space (ENOSPC) or has too little for the plan.

    ``path`` is the file (or directory) whose write failed or was refused; ``kept``
    maps the raw files kept for a later ``run --resume`` to their sha256.
    """

    exit_status = ExitCode.DISK_FULL

    def __init__(self, path: str, message: str, kept: dict[str, str] | None = None) -> None:
        self.path = path
        self.message = message
        self.kept = dict(kept or {})
        self.outcome: Any = None  # what the trial had measured when its ingest failed (the runner records it)
        super().__init__(f"{path}: {message}")


class InsufficientSpaceError(DiskFullError):
    """The space check refused a run before anything was created: too few bytes free."""

    def __init__(self, directory: str, needed: int, free: int, what: str) -> None:
        self.needed = needed
        self.free = free
        super().__init__(directory, f"not enough free space: {what} needs {needed:,} bytes ({needed / 1e6:,.1f} MB, "
                         f"the estimated peak plus a margin), {free:,} bytes ({free / 1e6:,.1f} MB) are free "
                         "there; free some space, use a larger filesystem (--results), or override with "
                         "--no-space-check")


class IncompleteRunError(CloudbenchError):
    """A run ended with trials or repetitions that failed; what was measured is kept."""

    exit_status = ExitCode.INCOMPLETE
