"""What the echo worker's files agree on: the wire protocol, the raw file format, the config.

Part of the echo worker (``echo.py`` is its entry point and documents the protocol,
the format and their history); stdlib only, runs on measured hosts next to
``echo.py`` and ``echo_connections.py``. Nothing here opens a socket or a file
but :func:`load_config` and :class:`RecordWriter`'s output.
"""

from __future__ import annotations

import errno
import io
import json
import os
import socket
import struct
import sys
import time

SCHEMA = 2  # of the raw file and of CONFIG (echo.py: format history)

MAGIC = b"CBECHO1\n"
HEADER_LEN = struct.Struct(">I")
RECORD = struct.Struct("<IHBxqqq")
FRAME_HEADER = struct.Struct(">IHI")
ROUND_FIELD = struct.Struct(">I")
HELLO = struct.Struct(">8sHH")
HELLO_MAGIC = b"CBEHELO1"
HELLO_ACK_MAGIC = b"CBEHELO2"  # the same hello, and the client wants ACK once authenticated
ACK = b"K"
CONNECTIONS = ("persistent", "per_round")

FLAG_TIMEOUT = 1
FLAG_WARMUP = 2
FLAG_CONN_LOST = 4
FLAG_SEND_FAILED = 8

MAX_TOKEN = 256
MAX_PAYLOAD = 16 * 1024 * 1024
MAX_PEERS = 4096
RECORDS_PER_CHUNK = 4096  # records packed before a forced write (128 KiB)

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux asm-generic and x86 value
INF = 1 << 62  # "never", as a monotonic time in ns


class ConfigError(Exception):
    """CONFIG.json is missing, unreadable or invalid."""


def log(msg: str) -> None:
    """One line on stderr, with the process id (the sender and its server child both write)."""
    sys.stderr.write("echo[%d]: %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


# --------------------------------------------------------------------------- config


class PeerSpec(object):
    """One peer of CONFIG: its id in the records, name, and where its echo server listens."""

    __slots__ = ("addr", "id", "name", "port")

    def __init__(self, id: int, name: str, addr: str, port: int) -> None:
        self.id = id
        self.name = name
        self.addr = addr
        self.port = port

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "addr": self.addr, "port": self.port}


class Config(object):
    """CONFIG.json, checked: what one host's server and sender do."""

    __slots__ = (
        "connect_timeout_s",
        "connection",
        "duration_s",
        "host",
        "host_id",
        "idle_s",
        "linger_s",
        "listen",
        "payload",
        "peers",
        "port",
        "rate",
        "rx_stamp",
        "timeout_s",
        "token",
        "warmup_s",
    )

    def __init__(self, raw: dict[str, object]) -> None:
        # Schema 1 configs (worker 2) lack `connection` and `idle_s`: persistent, not idle.
        if raw.get("schema") not in (1, SCHEMA):
            raise ConfigError("config schema %r is not supported (this worker reads schemas 1 "
                              "and %d)" % (raw.get("schema"), SCHEMA))
        self.host = _str(raw, "host")
        self.host_id = _int(raw, "host_id", 0, 0xFFFF)
        self.listen = _str(raw, "listen")
        self.port = _int(raw, "port", 1, 65535)
        self.token = _str(raw, "token").encode("utf-8")
        if not self.token or len(self.token) > MAX_TOKEN:
            raise ConfigError("token must be 1..%d bytes" % MAX_TOKEN)
        self.rate = _float(raw, "rate", 1e-6, 1e6)
        self.payload = _int(raw, "payload", 0, MAX_PAYLOAD)
        self.duration_s = _float(raw, "duration_s", 0.0, 1e7)
        self.warmup_s = _float(raw, "warmup_s", 0.0, 1e7)
        self.timeout_s = _float(raw, "timeout_s", 1e-6, 3600.0)
        self.connect_timeout_s = _float(raw, "connect_timeout_s", 0.0, 3600.0)
        self.linger_s = _float(raw, "linger_s", 0.0, 3600.0)
        self.rx_stamp = raw.get("rx_stamp", "kernel")
        if self.rx_stamp not in ("kernel", "user"):
            raise ConfigError("'rx_stamp' must be \"kernel\" or \"user\", got %r" % (self.rx_stamp,))
        self.connection = raw.get("connection", "persistent")
        if self.connection not in CONNECTIONS:
            raise ConfigError("'connection' must be one of %s, got %r"
                              % (", ".join(CONNECTIONS), self.connection))
        self.idle_s = _float(raw, "idle_s", 0.0, 1e6) if "idle_s" in raw else 0.0
        if self.idle_s and self.connection != "persistent":
            raise ConfigError("'idle_s' needs connection \"persistent\"")
        peers = raw.get("peers")
        if not isinstance(peers, list) or len(peers) > MAX_PEERS:
            raise ConfigError("peers must be a list of at most %d objects" % MAX_PEERS)
        self.peers: list[PeerSpec] = []
        seen: set[int] = set()
        for i, p in enumerate(peers):
            if not isinstance(p, dict):
                raise ConfigError("peers[%d] must be an object" % i)
            spec = PeerSpec(_int(p, "id", 0, 0xFFFF), _str(p, "name"), _str(p, "addr"),
                            _int(p, "port", 1, 65535))
            if spec.id in seen:
                raise ConfigError("peers[%d]: duplicate id %d" % (i, spec.id))
            seen.add(spec.id)
            self.peers.append(spec)


def _str(d: dict[str, object], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v:
        raise ConfigError("%r must be a non-empty string, got %r" % (key, v))
    return v


def _int(d: dict[str, object], key: str, lo: int, hi: int) -> int:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError("%r must be an integer in [%d, %d], got %r" % (key, lo, hi, v))
    return v


def _float(d: dict[str, object], key: str, lo: float, hi: float) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise ConfigError("%r must be a number in [%g, %g], got %r" % (key, lo, hi, v))
    return float(v)


def load_config(path: str) -> Config:
    """CONFIG.json at ``path``; ConfigError says what is wrong with it."""
    try:
        with open(path, "rb") as f:
            raw = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError("cannot read %s: %s" % (path, e)) from e
    if not isinstance(raw, dict):
        raise ConfigError("%s: top level must be an object" % path)
    return Config(raw)


def family(addr: str) -> socket.AddressFamily:
    """The address family of an IPv4 or IPv6 address."""
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def server_deadline_s(cfg: Config) -> float:
    """Seconds after its start at which the server stops whatever happens."""
    return cfg.connect_timeout_s + cfg.warmup_s + cfg.duration_s + cfg.timeout_s + cfg.linger_s


# --------------------------------------------------------------------------- output


class RecordWriter(object):
    """Packs records into a preallocated chunk and writes whole chunks to the file."""

    __slots__ = ("buf", "cap", "f", "n", "pack_into", "rows", "soft", "timeouts")

    def __init__(self, f: io.FileIO) -> None:
        self.f = f  # unbuffered: the chunk is the buffer
        self.cap = RECORDS_PER_CHUNK
        self.soft = RECORDS_PER_CHUNK // 2
        self.buf = bytearray(RECORD.size * self.cap)
        self.n = 0
        self.rows = 0
        self.timeouts = 0
        self.pack_into = RECORD.pack_into

    def add(self, rnd: int, peer: int, flags: int, send_ns: int, recv_ns: int,
            connect_ns: int = -1) -> None:
        self.pack_into(self.buf, self.n * 32, rnd, peer, flags, send_ns, recv_ns, connect_ns)
        self.n += 1
        self.rows += 1
        if flags & FLAG_TIMEOUT:
            self.timeouts += 1
        if self.n == self.cap:
            self.flush()

    def flush(self) -> None:
        if self.n:
            write_all(self.f, memoryview(self.buf)[: self.n * RECORD.size])
            self.n = 0


def write_all(f: io.FileIO, data: bytes | memoryview) -> None:
    """Write all of ``data`` to the unbuffered file ``f``."""
    view = memoryview(data)
    while len(view):
        n = f.write(view)
        if not n:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def clock_offset() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC in ns, to map kernel receive stamps onto CLOCK_MONOTONIC.

    The two clocks move together; only a step of the wall clock changes the
    offset. One reading can still be microseconds off: the first clock read
    after the CPU woke from idle may take that long (measured here: up to
    10 µs). So it is the realtime reading that sits between the closest pair
    of monotonic readings, out of up to four tries.
    """
    mono = time.monotonic_ns
    real = time.clock_gettime_ns
    clock = time.CLOCK_REALTIME
    best_gap = INF
    best = 0
    for _ in range(4):
        m1 = mono()
        r = real(clock)
        m2 = mono()
        if m2 - m1 < best_gap:
            best_gap = m2 - m1
            best = r - (m1 + m2) // 2
            if best_gap < 1000:
                break
    return best

