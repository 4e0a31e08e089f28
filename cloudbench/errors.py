"""The one exception tree of cloudbench.

Library code raises these; only :mod:`cloudbench.cli` prints them and exits.
Every error carries enough context to say what was wrong, where, and what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class CloudbenchError(Exception):
    """Root of every error cloudbench raises on purpose."""

    exit_status = 1  # of the `cloudbench` process when this error ends it


class SpecError(CloudbenchError):
    """A spec file is invalid: names the file, the line and the field."""

    exit_status = 2

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
    """A backend could not create (or destroy) what the topology asked for."""

    def __init__(self, backend: str, stack: str, message: str) -> None:
        self.backend = backend
        self.stack = stack
        super().__init__(f"{backend} [{stack}]: {message}")


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
