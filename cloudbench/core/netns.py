"""Small Linux helpers: enter a network namespace from one thread, run `ip` batches."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from cloudbench.errors import ProvisionError

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
T = TypeVar("T")

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def in_netns(ns: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` in a fresh thread that has joined namespace ``ns``.

    setns() changes only the calling thread; a socket keeps the namespace it was
    created in, so a socket made here works from any thread afterwards.
    """
    box: dict[str, object] = {}

    def target() -> None:
        try:
            with open(os.path.join(NETNS_DIR, ns)) as f:
                _setns(f.fileno())
            box["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name=f"netns-{ns}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def connect_in_netns(ns: str, addr: str, port: int, timeout: float) -> socket.socket:
    """A TCP socket connected from inside ``ns`` (the testbed's management path)."""

    def mk() -> socket.socket:
        s = socket.create_connection((addr, port), timeout=timeout)
        s.settimeout(None)
        return s

    return in_netns(ns, mk)


def list_netns() -> list[str]:
    """The names of the network namespaces (``ip netns`` names), sorted."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def run(cmd: list[str], stack: str = "", input_text: str | None = None, check: bool = True) -> str:
    """Run a command; raise ProvisionError naming the stack and the stderr tail if it fails and ``check``."""
    p = subprocess.run(cmd, input=input_text, capture_output=True, text=True, check=False)
    if check and p.returncode != 0:
        shown = " ".join(cmd)
        detail = (p.stderr or p.stdout).strip()[-2000:]
        raise ProvisionError("netns", stack, f"`{shown}` failed ({p.returncode}): {detail}")
    return p.stdout


def ip_batch(lines: Iterable[str], ns: str | None = None, stack: str = "", force: bool = False) -> None:
    """Run many `ip` commands in one process (``ip [-n NS] -batch -``)."""
    text = "\n".join(lines) + "\n"
    cmd = ["ip"]
    if ns:
        cmd += ["-n", ns]
    if force:
        cmd += ["-force"]
    cmd += ["-batch", "-"]
    run(cmd, stack, text, check=not force)


def netns_pids(ns: str) -> list[int]:
    """The ids of the processes running in network namespace ``ns``."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, check=False)
    return [int(x) for x in out.stdout.split() if x.isdigit()]


