"""Wait until every host of a cluster answers SSH with its pinned key and passes a check.

Fresh VMs take a while to boot and run cloud-init; existing hosts may be down.
Connection failures are retried until a deadline; a host key that does not
match the pinned one, or a failing check, fails at once (retrying would only
hide a wrong host or a broken image).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.interrupts import run_async
from cloudbench.errors import GroupRemoteError, RemoteError, RemoteFailure
from cloudbench.remote import CommandResult, Remote

HOST_KEY_MISMATCH = "host key does not match"


Command = str | Callable[[HostAccess], str]


def wait_ready(cluster: Cluster, command: Command, timeout: float, poll: float = 3.0,
               connect_timeout: float = 10.0) -> dict[str, CommandResult]:
    """Run ``command`` on every host once it accepts SSH; raises GroupRemoteError with all failures."""
    return run_async(_wait_all(cluster, command, timeout, poll, connect_timeout))


async def _wait_all(cluster: Cluster, command: Command, timeout: float, poll: float,
                    connect_timeout: float) -> dict[str, CommandResult]:
    deadline = time.monotonic() + timeout
    async with Remote(cluster, connect_timeout=connect_timeout) as remote:

        async def one(h: HostAccess) -> CommandResult:
            while True:
                try:
                    await remote.connect(h)
                except RemoteError as e:
                    if HOST_KEY_MISMATCH in e.failure.reason or time.monotonic() + poll > deadline:
                        raise
                    await asyncio.sleep(poll)
                    continue
                left = max(deadline - time.monotonic(), 1.0)
                cmd = command(h) if callable(command) else command
                return await remote.run(h, cmd, timeout=left)

        results = await remote.fan_out(one)
    failures = [r.failure for r in results if r.failure is not None]
    if failures:
        raise GroupRemoteError(failures, [r.host for r in results if r.ok])
    out: dict[str, CommandResult] = {}
    for r in results:
        if not isinstance(r.value, CommandResult):  # fan_out keeps values untyped
            raise GroupRemoteError([RemoteFailure(r.host, "?", None, "", "no result")], [])
        out[r.host] = r.value
    return out
