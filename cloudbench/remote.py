"""SSH fan-out: run commands on many hosts at once, move files, verify checksums.

Each host's outcome comes back on its own (:class:`HostResult`); a failure on one
host is recorded with host, command, exit code and the tail of stderr and never
discards the other hosts' results (Fabric's ``GroupResult``, done with asyncssh).

Host keys are pinned: the controller only accepts the key the provider
generated for that host; an unknown key is refused, never added.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.files import is_disk_full, sha256_file
from cloudbench.core.netns import connect_in_netns
from cloudbench.errors import DISK_FULL_REASON, RemoteError, RemoteFailure

T = TypeVar("T")
STDERR_TAIL = 2000
GET_ATTEMPTS = 3  # copies of a pulled file before its host counts as failed


@dataclass
class CommandResult:
    """The outcome of one command on one host: exit code, stdout and stderr."""
    host: str
    command: str
    exit_code: int
    stdout: str
    stderr: str


@dataclass
class HostResult:
    """One host's outcome of a fan-out: a value, or the failure that stopped it."""

    host: str
    value: Any = None
    failure: RemoteFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def _tail(text: str) -> str:
    return text[-STDERR_TAIL:]


class Remote:
    """Open SSH connections to a cluster's hosts and run work on them concurrently."""

    def __init__(self, cluster: Cluster, connect_timeout: float = 15.0) -> None:
        self.cluster = cluster
        self.connect_timeout = connect_timeout
        self._conns: dict[str, asyncssh.SSHClientConnection] = {}
        self._client_key = asyncssh.read_private_key(str(cluster.client_key))

    async def __aenter__(self) -> Remote:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()
        for c in conns:
            with contextlib.suppress(TimeoutError, OSError, asyncssh.Error):
                await asyncio.wait_for(c.wait_closed(), 2.0)

    # -- connections --------------------------------------------------------------------
    async def connect(self, host: HostAccess) -> asyncssh.SSHClientConnection:
        if host.name in self._conns:
            return self._conns[host.name]
        if not host.host_key:
            raise RemoteError(RemoteFailure(host.name, "ssh connect", None, "",
                                            "no pinned host key for this host; refusing to connect"))
        trusted: tuple[list[Any], list[Any], list[Any]] = ([asyncssh.import_public_key(host.host_key)], [], [])
        kwargs: dict[str, Any] = {
            "username": host.user,
            "client_keys": [self._client_key],
            "known_hosts": trusted,
            "agent_path": None,
            "config": [],
            "connect_timeout": self.connect_timeout,
            "kex_algs": ["curve25519-sha256", "curve25519-sha256@libssh.org"],
            "keepalive_interval": 15,
        }
        try:
            if host.netns:
                loop = asyncio.get_running_loop()
                sock = await loop.run_in_executor(
                    None, connect_in_netns, host.netns, host.ssh_host, host.ssh_port, self.connect_timeout
                )
                conn = await asyncssh.connect(sock=sock, host=host.ssh_host, **kwargs)
            else:
                conn = await asyncssh.connect(host.ssh_host, port=host.ssh_port, **kwargs)
        except asyncssh.HostKeyNotVerifiable as e:
            raise RemoteError(RemoteFailure(host.name, "ssh connect", None, str(e),
                                            "host key does not match the pinned key; refused")) from e
        except (OSError, asyncssh.Error, TimeoutError) as e:
            raise RemoteError(RemoteFailure(host.name, "ssh connect", None, str(e),
                                            f"cannot connect to {host.ssh_host}:{host.ssh_port}")) from e
        self._conns[host.name] = conn
        return conn

    async def connect_all(self, hosts: Iterable[HostAccess] | None = None) -> list[HostResult]:
        return await self.fan_out(lambda h: self.connect(h), hosts)

    # -- fan-out ------------------------------------------------------------------------
    async def fan_out(
        self, fn: Callable[[HostAccess], Awaitable[T]], hosts: Iterable[HostAccess] | None = None
    ) -> list[HostResult]:
        """Run ``fn`` for every host concurrently; one result per host, failures kept."""
        hosts = list(self.cluster.hosts if hosts is None else hosts)

        async def one(h: HostAccess) -> HostResult:
            try:
                return HostResult(h.name, value=await fn(h))
            except RemoteError as e:
                return HostResult(h.name, failure=e.failure)
            except (OSError, asyncssh.Error) as e:
                return HostResult(h.name, failure=RemoteFailure(h.name, "?", None, str(e), type(e).__name__))

        return list(await asyncio.gather(*(one(h) for h in hosts)))

    async def run(self, host: HostAccess, command: str, timeout: float | None = None,
                  check: bool = True) -> CommandResult:
        conn = await self.connect(host)
        try:
            r = await conn.run(command, check=False, timeout=timeout)
        except asyncssh.TimeoutError as e:
            raise RemoteError(RemoteFailure(host.name, command, None, _tail(str(e.stderr or "")),
                                            f"timed out after {timeout}s")) from e
        except (asyncssh.Error, OSError) as e:
            self._conns.pop(host.name, None)
            raise RemoteError(RemoteFailure(host.name, command, None, str(e), "connection lost")) from e
        out = _as_text(r.stdout)
        err = _as_text(r.stderr)
        code = r.exit_status if r.exit_status is not None else -1
        if r.exit_signal:
            raise RemoteError(RemoteFailure(host.name, command, None, _tail(err),
                                            f"killed by signal {r.exit_signal[0]}"))
        if check and code != 0:
            raise RemoteError(RemoteFailure(host.name, command, code, _tail(err)))
        return CommandResult(host.name, command, code, out, err)

    async def run_all(self, commands: dict[str, str], timeout: float | None = None) -> list[HostResult]:
        hosts = [self.cluster.host(n) for n in commands]
        return await self.fan_out(lambda h: self.run(h, commands[h.name], timeout), hosts)

    # -- files ----------------------------------------------------------------------------
    async def put(self, host: HostAccess, files: list[Path], remote_dir: str) -> None:
        """Copy files into ``remote_dir`` and check that they arrived intact."""
        conn = await self.connect(host)
        await self.run(host, f"mkdir -p {shlex.quote(remote_dir)}")
        async with conn.start_sftp_client() as sftp:
            await sftp.put([str(f) for f in files], remote_dir)
        want = {f.name: _sha256(f.read_bytes()) for f in files}
        got = await self.checksums(host, [f"{remote_dir}/{f.name}" for f in files])
        for name, digest in want.items():
            if got.get(f"{remote_dir}/{name}") != digest:
                raise RemoteError(RemoteFailure(host.name, f"put {name}", None, "",
                                                "checksum after upload differs"))

    async def get(self, host: HostAccess, remote_path: str, local_path: Path,
                  sha256: str | None = None, attempts: int = GET_ATTEMPTS) -> str:
        """Copy a file back; verify against ``sha256`` (or the host's own checksum).

        A failed or damaged copy is fetched again, up to ``attempts`` times; the file on
        the host is left as it is, so nothing measured is lost by a bad transfer.
        """
        conn = await self.connect(host)
        if sha256 is None:
            sha256 = (await self.checksums(host, [remote_path])).get(remote_path)
        local_path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, attempts + 1):
            try:
                try:
                    async with conn.start_sftp_client() as sftp:
                        await sftp.get(remote_path, str(local_path))
                except (asyncssh.SFTPError, OSError) as e:
                    if is_disk_full(e):  # our disk, not the host: no retry, and no partial file left
                        local_path.unlink(missing_ok=True)
                        raise RemoteError(RemoteFailure(host.name, f"get {remote_path}", None, str(e),
                                                        DISK_FULL_REASON)) from e
                    raise RemoteError(RemoteFailure(host.name, f"get {remote_path}", None, str(e),
                                                    f"download failed (attempt {attempt} of {attempts})")) from e
                return check_download(host, remote_path, sha256_file(local_path), sha256)
            except RemoteError as e:
                if attempt == attempts or e.failure.reason == DISK_FULL_REASON:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    async def write_text(self, host: HostAccess, remote_path: str, text: str) -> None:
        """Create a small file on the host (configs) in one round trip."""
        conn = await self.connect(host)
        cmd = f"umask 077 && cat > {shlex.quote(remote_path)}"
        r = await conn.run(cmd, input=text, check=False)
        if r.exit_status != 0:
            raise RemoteError(RemoteFailure(host.name, cmd, r.exit_status, _as_text(r.stderr)))

    async def checksums(self, host: HostAccess, paths: list[str]) -> dict[str, str]:
        r = await self.run(host, "sha256sum " + " ".join(shlex.quote(p) for p in paths))
        out: dict[str, str] = {}
        for line in r.stdout.splitlines():
            digest, _, name = line.partition("  ")
            out[name.strip()] = digest
        return out


def _as_text(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return str(v)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_download(host: HostAccess, remote_path: str, digest: str, expected: str | None) -> str:
    """``digest`` of a pulled file if it matches what the host said (``expected``); else RemoteError."""
    if expected is not None and digest != expected:
        raise RemoteError(RemoteFailure(host.name, f"get {remote_path}", None, "",
                                        f"checksum mismatch: host says {expected[:12]}…, "
                                        f"got {digest[:12]}…"))
    return digest
