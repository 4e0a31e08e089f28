"""How the Automation API runs ``pulumi``: our CLI, and interrupts forwarded to it.

``pulumi.automation`` runs every command through a ``PulumiCommand``; this one

* uses the executable and version :func:`~cloudbench.providers.clouds.cli.find_cli`
  already checked (the SDK's own check would end in a traceback);
* starts ``pulumi`` in its own session, so a Ctrl-C at the terminal reaches only
  cloudbench, and cloudbench sends the CLI exactly one SIGINT — Pulumi's "cancel
  gracefully and save the state" — for Ctrl-C and SIGTERM alike (a second SIGINT
  would abort it with operations pending);
* then waits, up to ``cancel_wait_s``, for the CLI to save its state and exit, so
  the stack's lock is free when the destroy that follows starts. A second interrupt
  while waiting stops the wait (the CLI gets SIGTERM) and propagates.

Imported only when a stack is driven (it imports the Pulumi SDK, an extra).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO

from pulumi.automation import CommandResult, PulumiCommand
from pulumi.automation.errors import create_command_error
from semver import VersionInfo

from cloudbench.providers.clouds.cli import PulumiCli

OnOutput = Callable[[str], None]


class ForwardingCommand(PulumiCommand):
    """A ``PulumiCommand`` for a checked CLI that forwards interrupts to it (see the module)."""

    def __init__(self, cli: PulumiCli, cancel_wait_s: float) -> None:
        # Deliberately not PulumiCommand.__init__: it runs `pulumi version` again and raises
        # InvalidVersionError; find_cli did that check with a message that says what to do.
        self.command = cli.path
        self.version = VersionInfo(*cli.version)
        self.cancel_wait_s = cancel_wait_s

    def run(self, args: list[str], cwd: str, additional_env: Mapping[str, str],
            on_output: OnOutput | None = None, on_error: OnOutput | None = None) -> CommandResult:
        end = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:end]:
            args.insert(0, "--non-interactive")  # fail instead of prompting, as the SDK does
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        # Plugins bundled next to the CLI come first (as the SDK does for an absolute command).
        env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        out: list[str] = []
        err: list[str] = []
        proc = subprocess.Popen([self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, cwd=cwd, env=env, encoding="utf-8",
                                errors="replace", start_new_session=True)
        assert proc.stdout is not None and proc.stderr is not None
        readers = [threading.Thread(target=_consume, args=(proc.stdout, on_output, out), daemon=True),
                   threading.Thread(target=_consume, args=(proc.stderr, on_error, err), daemon=True)]
        for t in readers:
            t.start()
        try:
            code = _wait(proc)
        except BaseException:  # Ctrl-C, or SIGTERM delivered as an interrupt
            self._cancel(proc)
            raise
        finally:
            for t in readers:  # the pipes close when the CLI exits (not waited for past a cancel)
                t.join(timeout=5.0 if proc.poll() is not None else 0.0)
        result = CommandResult(stdout="\n".join(out), stderr="\n".join(err), code=code)
        if code != 0:
            raise create_command_error(result)
        return result

    def _cancel(self, proc: subprocess.Popen[str]) -> None:
        """One SIGINT (graceful cancel), then wait for the CLI to save its state and exit."""
        if proc.poll() is not None:
            return
        _signal(proc, signal.SIGINT)
        deadline = time.monotonic() + self.cancel_wait_s
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
        except BaseException:  # a second interrupt: stop waiting, stop the CLI
            _signal(proc, signal.SIGTERM)
            raise
        if proc.poll() is None:  # left to finish alone; the destroy that follows waits for its lock
            _signal(proc, signal.SIGTERM)


def _wait(proc: subprocess.Popen[str], tick_s: float = 0.2) -> int:
    """``proc.wait()`` that lets the main thread handle a signal within ``tick_s``.

    A Ctrl-C is delivered to any thread of the process, often one of the pipe readers;
    Python then runs its handler in the main thread only when that thread runs bytecode,
    which a plain ``waitpid`` blocks until the CLI exits, so the interrupt (and the
    cancel it should forward) would wait for the whole `pulumi up`.
    """
    while True:
        try:
            return proc.wait(timeout=tick_s)
        except subprocess.TimeoutExpired:
            continue


def _signal(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)


def _consume(stream: IO[str], callback: OnOutput | None, chunks: list[str]) -> None:
    for line in iter(stream.readline, ""):
        text = line.rstrip()
        if callback is not None:
            callback(text)
        chunks.append(text)
    stream.close()
