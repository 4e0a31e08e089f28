"""Delay line in Python: the fallback of ``cbfwd.c`` when no C compiler is there.

Same CONFIG format and behaviour as ``cbfwd.c`` (read that file's header); it is
slower (one core saturates near 600 Mbit/s of UDP) and its timing is looser
(select() wake-ups), which ``bench/bench_wan.py`` measures. Stdlib only.

    python3 pyfwd.py CONFIG
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import fcntl
import json
import math
import os
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass, field
from types import FrameType

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29
SLOT = 2048
READ_BATCH = 256


@dataclass
class Direction:
    """One direction of the link (one TUN device): its delay schedule (ns, relative to the
    epoch), the packets it holds, in order, and the counters written to the stats file."""

    tun: str
    base: int = 0
    steps: list[tuple[int, int]] = field(default_factory=list)
    periodic: list[tuple[int, int, int]] = field(default_factory=list)
    spikes: list[tuple[int, int, int]] = field(default_factory=list)
    fd: int = -1
    queue: collections.deque[tuple[int, bytes]] = field(default_factory=collections.deque)
    last_release: int = 0
    packets: int = 0
    nbytes: int = 0
    drops: int = 0
    write_errors: int = 0
    late_max: int = 0
    late_sum: int = 0

    def delay_at(self, t: int, epoch: int) -> int:
        """The one-way delay (ns) at monotonic time ``t``: the latest step (or the base), plus
        the periodic terms and any spike in progress; never negative."""
        rel = t - epoch
        v = self.base
        best = None
        for at, d in self.steps:
            if at <= rel and (best is None or at >= best):
                best, v = at, d
        for amp, period, phase in self.periodic:
            v += int(amp * math.sin(2.0 * math.pi * (rel - phase) / period))
        for at, dur, extra in self.spikes:
            if at <= rel < at + dur:
                v += extra
        return max(v, 0)


@dataclass
class Config:
    """The CONFIG file: the epoch (monotonic ns), the ready and stats files, the most packets a
    direction holds (more are dropped), and the directions."""

    epoch: int = 0
    ready: str = ""
    stats: str = ""
    capacity: int = 8192
    dirs: list[Direction] = field(default_factory=list)


def parse(path: str) -> Config:
    """Read CONFIG (format in ``cbfwd.c``'s header); skips the C-only tuning lines (``rt``,
    ``spin``) and exits with a message on a directive it does not know."""
    cfg = Config()
    cur: Direction | None = None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            key, args = parts[0], parts[1:]
            if key == "epoch":
                cfg.epoch = int(args[0])
            elif key in ("ready", "stats"):
                setattr(cfg, key, args[0])
            elif key == "capacity":
                cfg.capacity = int(args[0])
            elif key in ("rt", "spin"):
                continue  # C-only tuning
            elif key == "dir":
                cur = Direction(args[0])
                cfg.dirs.append(cur)
            elif cur is None:
                raise SystemExit(f"pyfwd: {key} before any dir")
            elif key == "base":
                cur.base = int(args[0])
            elif key == "step":
                cur.steps.append((int(args[0]), int(args[1])))
            elif key == "periodic":
                cur.periodic.append((int(args[0]), int(args[1]), int(args[2])))
            elif key == "spike":
                cur.spikes.append((int(args[0]), int(args[1]), int(args[2])))
            else:
                raise SystemExit(f"pyfwd: unknown directive {key}")
    return cfg


def restore_ttl(p: bytes) -> bytes:
    """Give back the TTL taken on the way into the TUN (see cbfwd.c)."""
    if len(p) >= 20 and p[0] >> 4 == 4 and p[8] < 255:
        old = p[8] << 8 | p[9]
        new = old + 0x100
        s = (~(p[10] << 8 | p[11]) & 0xFFFF) + (~old & 0xFFFF) + new
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        s = ~s & 0xFFFF
        return p[:8] + bytes((p[8] + 1, p[9], s >> 8, s & 0xFF)) + p[12:]
    if len(p) >= 40 and p[0] >> 4 == 6 and p[7] < 255:
        return p[:7] + bytes((p[7] + 1,)) + p[8:]
    return p


def open_tun(name: str) -> int:
    """Attach to the existing TUN device ``name`` (non-blocking, no packet-info header)."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main(argv: list[str]) -> int:
    """Run the delay line of ``argv[1]`` until SIGTERM or SIGINT: write the ready file once the
    TUNs are attached, hold each packet until its due time (never reordering), write the stats."""
    if len(argv) != 2:
        print("usage: pyfwd.py CONFIG", file=sys.stderr)
        return 2
    cfg = parse(argv[1])
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    for d in cfg.dirs:
        d.fd = open_tun(d.tun)
    by_fd = {d.fd: d for d in cfg.dirs}
    stop = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if cfg.ready:
        with open(cfg.ready, "w") as f:
            f.write(f"{os.getpid()}\n")
    clock = time.monotonic_ns
    poller = select.epoll()
    for fd in by_fd:
        poller.register(fd, select.EPOLLIN)
    while not stop:
        now = clock()
        nxt = None
        for d in cfg.dirs:
            q = d.queue
            while q and q[0][0] <= now:
                due, pkt = q.popleft()
                try:
                    os.write(d.fd, restore_ttl(pkt))
                    d.packets += 1
                    d.nbytes += len(pkt)
                except OSError:
                    d.write_errors += 1
                late = now - due
                d.late_max = max(d.late_max, late)
                d.late_sum += late
            if q and (nxt is None or q[0][0] < nxt):
                nxt = q[0][0]
        timeout = -1.0 if nxt is None else max(nxt - clock(), 0) / 1e9
        try:
            events = poller.poll(timeout)
        except InterruptedError:
            continue
        for fd, _ in events:
            d = by_fd[fd]
            for _ in range(READ_BATCH):
                try:
                    pkt = os.read(fd, SLOT)
                except BlockingIOError:
                    break
                if len(d.queue) >= cfg.capacity:
                    d.drops += 1
                    continue
                t = clock()
                due = max(t + d.delay_at(t, cfg.epoch), d.last_release)
                d.last_release = due
                d.queue.append((due, pkt))
    if cfg.stats:
        with open(cfg.stats, "w") as f:
            json.dump({"forwarder": "python", "version": "1", "dirs": [
                {"tun": d.tun, "packets": d.packets, "bytes": d.nbytes, "drops": d.drops,
                 "write_errors": d.write_errors, "late_ns_max": d.late_max,
                 "late_ns_mean": d.late_sum // max(d.packets, 1), "queued": len(d.queue)}
                for d in cfg.dirs]}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
