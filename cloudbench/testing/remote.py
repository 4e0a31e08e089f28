"""A scripted stand-in for :class:`cloudbench.remote.Remote`: no SSH, no hosts.

Commands are answered from rules (a command regex, a host glob, and a
:class:`Reply` or a function making one); files written, put and got live in a
dict keyed by (host, path); every call is recorded in :attr:`FakeRemote.calls`.
A command no rule answers raises :class:`UnscriptedCommandError` (an AssertionError,
so no ``except RemoteError`` or fan-out turns it into a host failure): a test
never passes because a command it forgot to script "succeeded".

:class:`FakeRemote` subclasses :class:`~cloudbench.remote.Remote`, so it goes
wherever a ``Remote`` is typed (``TrialContext.remote``, the runner's deploy
step) and keeps the real fan-out: one :class:`~cloudbench.remote.HostResult` per
host, failures collected. Code that opens its own ``Remote(cluster)`` takes the
fake through :meth:`FakeRemote.factory`::

    from cloudbench.testing.remote import FakeRemote, Reply

    fake = FakeRemote(cluster)
    fake.on(r"facts\\.py", stdout='{"kernel": "6.8"}')
    fake.on(r"echo\\.py run", host="s1-3", reply=Reply(exit_code=1, stderr="boom"))
    fake.fail_connect("s5-*", reason="cannot connect")  # every attempt
    results = await fake.fan_out(lambda h: fake.run(h, "python3 facts.py"))
    assert [r.host for r in results if not r.ok] == ["s5-1"]
    assert fake.commands("s1-1") == ["python3 facts.py"]

    CampaignRunner(spec, "spec.yaml", tmp_path, provider_factory=lambda _n: FakeProvider(),
                   remote_factory=fake.factory).execute()  # a whole campaign, offline
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.files import is_disk_full
from cloudbench.errors import DISK_FULL_REASON, RemoteError, RemoteFailure
from cloudbench.remote import GET_ATTEMPTS, STDERR_TAIL, CommandResult, Remote, check_download

Op = Literal["connect", "run", "put", "get", "write_text", "checksums"]


@dataclass(frozen=True)
class Reply:
    """How a scripted command ends: what it printed and its exit code.

    ``timed_out`` makes :meth:`FakeRemote.run` raise the RemoteError the real
    one raises when its ``timeout`` passes (no exit code).
    """

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    timed_out: bool = False


@dataclass
class Invocation:
    """A command being answered, as a rule's function sees it.

    The function may read and write the host's files (e.g. write the output
    file a worker would have written, then print its checksum).
    """

    remote: FakeRemote
    host: HostAccess
    command: str
    match: re.Match[str]
    timeout: float | None

    def read(self, path: str) -> bytes:
        """A file on this host (written, put or added before); KeyError if absent."""
        return self.remote.file(self.host.name, path)

    def write(self, path: str, data: bytes | str) -> None:
        """Create or replace a file on this host."""
        self.remote.add_file(self.host.name, path, data)


Responder = Callable[[Invocation], Reply | str]
"""Makes the reply of a command (a plain string is its stdout, exit code 0)."""


@dataclass
class Rule:
    """Answers commands on hosts matching ``host`` (a glob) that contain ``command`` (a regex, ``re.search``).

    ``times`` limits how often it answers (None: always); a used-up rule lets
    the next matching one answer, which scripts sequences (fail once, then succeed).
    ``used`` counts its answers.
    """

    command: str
    reply: Reply | Responder = Reply()
    host: str = "*"
    times: int | None = None
    used: int = 0
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.command)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.used >= self.times

    def match(self, host: str, command: str) -> re.Match[str] | None:
        """The regex match if this rule is for ``host`` and ``command`` (used up or not)."""
        if not fnmatch.fnmatchcase(host, self.host):
            return None
        return self._pattern.search(command)


@dataclass(frozen=True)
class Call:
    """One recorded call: the host, the operation and what it was about.

    ``target`` is the command (``run``), the remote path (``put``, ``get``,
    ``write_text``), the paths separated by spaces (``checksums``) or ``""``
    (``connect``, recorded once per connection attempt).
    """

    host: str
    op: Op
    target: str = ""
    timeout: float | None = None


class UnscriptedCommandError(AssertionError):
    """A command was run that no rule answers: the test's script is incomplete."""

    def __init__(self, host: str, command: str, rules: list[Rule]) -> None:
        self.host = host
        self.command = command
        used_up = [r for r in rules if r.exhausted and r.match(host, command)]
        hint = "".join(f"\n  rule {r.command!r} (host {r.host!r}) matched but was used up "
                       f"after {r.times} answer(s)" for r in used_up)
        known = ", ".join(f"{r.command!r}@{r.host}" for r in rules) or "none"
        super().__init__(f"{host}: unscripted command `{command}`; rules: {known}{hint}\n"
                         "script it with FakeRemote.on(<regex>, ...)")


@dataclass
class _ConnectFailure:
    host: str
    reason: str
    times: int | None
    used: int = 0


def _norm(path: str) -> str:
    return posixpath.normpath(path)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeRemote(Remote):
    """A :class:`~cloudbench.remote.Remote` whose hosts are a script and a dict of files.

    ``run`` answers from :attr:`rules` (first matching rule not used up, in
    order: put specific rules before general ones); ``put``, ``write_text`` and
    rule functions store files in :attr:`files`; ``get`` copies them to the
    controller, checking the checksum as the real one does; ``checksums`` hashes
    them. Missing files, failing commands (``check=True``), timeouts and
    unreachable hosts raise the same :class:`~cloudbench.errors.RemoteError` as
    the real class; ``fan_out``, ``run_all`` and ``connect_all`` are the real ones.
    """

    def __init__(self, cluster: Cluster, rules: Iterable[Rule] = (), connect_timeout: float = 15.0) -> None:
        # Not Remote.__init__: that reads the cluster's client key, which a fake cluster need not have.
        self.cluster = cluster
        self.connect_timeout = connect_timeout
        self.rules: list[Rule] = list(rules)
        self.calls: list[Call] = []
        self.files: dict[tuple[str, str], bytes] = {}  # (host name, normalized path) -> content
        self.closed = False
        self._connected: set[str] = set()
        self._connect_failures: list[_ConnectFailure] = []

    # -- scripting ----------------------------------------------------------------------
    def on(self, command: str, stdout: str = "", stderr: str = "", exit_code: int = 0, *,
           host: str = "*", times: int | None = None, reply: Reply | Responder | None = None) -> Rule:
        """Add a rule: commands matching the regex ``command`` on hosts matching ``host``.

        They print ``stdout``/``stderr`` and exit with ``exit_code``, unless
        ``reply`` is given (a :class:`Reply`, or a function of the
        :class:`Invocation`). Returns the rule (its ``used`` counts answers).
        """
        rule = Rule(command, reply if reply is not None else Reply(stdout, stderr, exit_code),
                    host=host, times=times)
        self.rules.append(rule)
        return rule

    def fail_connect(self, host: str = "*", reason: str = "cannot connect", times: int | None = None) -> None:
        """Make connecting to hosts matching ``host`` fail (the next ``times`` attempts, or always).

        ``reason`` is the failure's reason; use the real wording to drive code
        that tells failures apart (e.g. :data:`cloudbench.providers.ready.HOST_KEY_MISMATCH`).
        """
        self._connect_failures.append(_ConnectFailure(host, reason, times))

    def add_file(self, host: str, path: str, data: bytes | str) -> None:
        """Create or replace a file on ``host``."""
        self.files[(host, _norm(path))] = data.encode() if isinstance(data, str) else data

    def file(self, host: str, path: str) -> bytes:
        """The content of a file on ``host``; KeyError naming the host's files if absent."""
        try:
            return self.files[(host, _norm(path))]
        except KeyError:
            have = sorted(p for h, p in self.files if h == host)
            raise KeyError(f"{host}: no file {path!r} (has {have})") from None

    def factory(self, cluster: Cluster, connect_timeout: float = 15.0) -> FakeRemote:
        """Use in place of the ``Remote`` class where code opens its own; returns this fake, bound to ``cluster``."""
        self.cluster = cluster
        self.connect_timeout = connect_timeout
        return self

    # -- what the test reads back ----------------------------------------------------------
    def commands(self, host: str | None = None) -> list[str]:
        """Commands run, in order, on ``host`` (a name) or on every host."""
        return [c.target for c in self.calls if c.op == "run" and (host is None or c.host == host)]

    def unused_rules(self) -> list[Rule]:
        """Rules that never answered (a script expecting commands that were not run)."""
        return [r for r in self.rules if r.used == 0]

    # -- the Remote interface ----------------------------------------------------------------
    async def __aenter__(self) -> FakeRemote:
        return self

    async def close(self) -> None:
        self.closed = True
        self._connected.clear()

    async def connect(self, host: HostAccess) -> Any:
        """Record a connection attempt (once per host until ``close``); no connection object."""
        if host.name in self._connected:
            return None
        self.calls.append(Call(host.name, "connect"))
        for f in self._connect_failures:
            if (f.times is None or f.used < f.times) and fnmatch.fnmatchcase(host.name, f.host):
                f.used += 1
                raise RemoteError(RemoteFailure(host.name, "ssh connect", None, "", f.reason))
        self._connected.add(host.name)
        return None

    async def run(self, host: HostAccess, command: str, timeout: float | None = None,
                  check: bool = True) -> CommandResult:
        await self.connect(host)
        self.calls.append(Call(host.name, "run", command, timeout))
        await asyncio.sleep(0)  # let the other hosts of a fan-out interleave, as over SSH
        rule, match = self._rule_for(host.name, command)
        rule.used += 1
        reply = rule.reply if isinstance(rule.reply, Reply) else rule.reply(
            Invocation(self, host, command, match, timeout))
        if isinstance(reply, str):
            reply = Reply(stdout=reply)
        if reply.timed_out:
            raise RemoteError(RemoteFailure(host.name, command, None, reply.stderr[-STDERR_TAIL:],
                                            f"timed out after {timeout}s"))
        if check and reply.exit_code != 0:
            raise RemoteError(RemoteFailure(host.name, command, reply.exit_code, reply.stderr[-STDERR_TAIL:]))
        return CommandResult(host.name, command, reply.exit_code, reply.stdout, reply.stderr)

    async def put(self, host: HostAccess, files: list[Path], remote_dir: str) -> None:
        await self.connect(host)
        for f in files:
            path = posixpath.join(remote_dir, f.name)
            self.calls.append(Call(host.name, "put", _norm(path)))
            self.add_file(host.name, path, Path(f).read_bytes())

    async def get(self, host: HostAccess, remote_path: str, local_path: Path,
                  sha256: str | None = None, attempts: int = GET_ATTEMPTS) -> str:
        # one copy of each file: another attempt would read the same bytes
        await self.connect(host)
        self.calls.append(Call(host.name, "get", _norm(remote_path)))
        data = self.files.get((host.name, _norm(remote_path)))
        if data is None:
            raise RemoteError(RemoteFailure(host.name, f"get {remote_path}", None,
                                            "No such file", "download failed"))
        local_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            local_path.write_bytes(data)
        except OSError as e:  # as Remote.get: the controller's disk is full, no partial file left
            if not is_disk_full(e):
                raise
            local_path.unlink(missing_ok=True)
            raise RemoteError(RemoteFailure(host.name, f"get {remote_path}", None, str(e),
                                            DISK_FULL_REASON)) from e
        return check_download(host, remote_path, _sha256(data), sha256)

    async def write_text(self, host: HostAccess, remote_path: str, text: str) -> None:
        await self.connect(host)
        self.calls.append(Call(host.name, "write_text", _norm(remote_path)))
        self.add_file(host.name, remote_path, text)

    async def checksums(self, host: HostAccess, paths: list[str]) -> dict[str, str]:
        await self.connect(host)
        self.calls.append(Call(host.name, "checksums", " ".join(paths)))
        missing = [p for p in paths if (host.name, _norm(p)) not in self.files]
        if missing:
            raise RemoteError(RemoteFailure(host.name, "sha256sum " + " ".join(paths), 1,
                                            "".join(f"sha256sum: {p}: No such file or directory\n"
                                                    for p in missing)))
        return {p: _sha256(self.files[(host.name, _norm(p))]) for p in paths}

    def _rule_for(self, host: str, command: str) -> tuple[Rule, re.Match[str]]:
        for rule in self.rules:
            if rule.exhausted:
                continue
            m = rule.match(host, command)
            if m is not None:
                return rule, m
        raise UnscriptedCommandError(host, command, self.rules)
