"""Echo RTT worker (after StormCloud): an echo server and a round-based sender.

Runs on measured hosts with nothing but ``python3`` (3.8+, stdlib only, Linux).

    python3 echo.py run CONFIG.json OUT.bin   server (child process) + sender; one JSON line
    python3 echo.py serve CONFIG.json         server only; serves until stdin reaches EOF
                                              and no inbound connection is left, or the deadline

Protocol (TCP, TCP_NODELAY both ways). The client sends a hello
``HELLO = >8sHH`` (``b"CBEHELO1"``, its host id, token length) followed by the
token bytes; the server compares the token with ``hmac.compare_digest`` and
closes the connection on a mismatch. From then on the server echoes every byte
it receives. A client that says ``b"CBEHELO2"`` instead gets one byte (``ACK``)
once it is authenticated and its echo thread runs: a fresh connection per round
(``connection: "per_round"``) sends its frame only then, so the echo it times
does not include the server's accept and thread start. Sender frames are
``>IHI`` (round, sender id, payload length) plus the payload; the echo keeps
them in order, so the sender matches replies to a per-peer FIFO of frames in
flight.

Output file (little-endian records, big-endian header length):

    b"CBECHO1\\n" | u32 BE header length | UTF-8 JSON header | records <IHBxqqq
    record: round u32, peer u16, flags u8, pad, send_ns i64, recv_ns i64 (0 on timeout),
            connect_ns i64 (the TCP handshake of this round's connection; -1 when the
            round used the persistent connection or its connect never completed)
    flags: bit0 timeout, bit1 warm-up, bit2 connection lost, bit3 send failed

Connections (``connection`` in CONFIG and header): ``"persistent"`` (the default)
opens one connection per peer before round 0 and keeps it; ``"per_round"`` opens a
new one for every round and peer, from the round's send time: ``connect_ns`` is
connect() until the socket is writable (SYN to SYN-ACK, as epoll saw it), then
the hello and its ACK, then the frame, whose echo is the RTT; the sender closes
the connection once the echo is in. A round still unfinished when the next one
starts is abandoned (a timeout row). ``idle_s`` (default 0) spaces the rounds
``idle_s`` apart instead of ``1/rate``: each peer hears from the host only every
``idle_s`` on its connection ("warm" rather than "hot").

Times are ``CLOCK_MONOTONIC`` nanoseconds; ``t0_ns`` in the header is round 0's
scheduled send. Every (round, peer) gets exactly one record, in any order.

Receive times (``rx_stamp`` in CONFIG and header): ``"kernel"`` (the default)
takes the kernel's receive timestamp (SO_TIMESTAMPNS, on CLOCK_REALTIME) of the
newest segment in the read that completed the echo, and maps it onto
CLOCK_MONOTONIC with the offset between the two clocks, read once a round (see
``clock_offset``: the clocks move together, only a step of the wall clock
changes it). A stamp that is missing or not in [send time, epoll return] (the
wall clock stepped meanwhile) is replaced by the time epoll returned; ``"user"``
always takes that time. The summary counts both (``kernel_stamps``,
``user_stamps``). The kernel stamp is what ping uses: when the bytes arrived,
whatever this process was doing; if two echoes of one peer wait unread, the
older gets the newer's stamp, late by less than this loop's wakeup.

Format history:
    schema 1 (worker 1): 24-byte records ``<IHBxqq`` (no connect_ns).
    schema 1 (worker 2): the same format; echoes stamped by the kernel.
    schema 2 (worker 3): 32-byte records with connect_ns; ``connection`` and ``idle_s``
                         in CONFIG and header; hello CBEHELO2 with an ACK.

Hot loop (measured on 2-vCPU VMs against sockperf and C clients; see bench/bench_echo.py):

* The sender is one thread with one epoll loop: it sends each round
  (non-blocking, MSG_DONTWAIT) and reads the echoes as they come. Worker 1's
  receiver thread per peer, each blocked in recv, stamped replies ~3 µs sooner
  than epoll could, but its wakeups, context switches and GIL handoffs cost
  1-2 % of a core more per host at 100 rounds/s to 8 peers (and late sends);
  with kernel stamps the loop's own wakeup no longer enters the RTT.
* The loop waits in epoll *without* a timeout; an interval timer (SIGALRM
  through the signal wakeup pipe) armed just before the round is sent wakes
  it. A timeout would arm and cancel a kernel timer while the echoes are on
  their way: with worker 1 that was ~10 µs per round trip where timer
  programming traps to the hypervisor, delaying an echo server sharing the CPU.
* Records are packed into a preallocated chunk (struct.pack_into) and written
  while nothing is in flight; the garbage collector is disabled and the heap
  frozen around the loop.
* Behind schedule, overdue rounds go out at twice the nominal rate instead of
  in one burst, whose frames would queue behind each other.
* The server (its own process) runs one blocking thread per connection:
  recv_into + send, two system calls per echo. On these VMs that was both
  faster and cheaper than an epoll server.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import gc
import hashlib
import hmac
import io
import json
import math
import os
import platform
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

WORKER_VERSION = "3"
SCHEMA = 2

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
MAX_OUTBOUND = 256 * 1024  # bytes queued in user space per peer before a row is send_failed
RECORDS_PER_CHUNK = 4096  # records packed before a forced write (128 KiB)
CONNECT_RETRY_S = 0.1  # between connect attempts while the connect phase lasts
RECONNECT_S = 1.0  # between reconnect attempts while rounds run
SWEEP_GRACE_NS = 20_000_000  # a frame is swept as a timeout this long after its deadline
ATTEMPT_S = 3.0  # one connect attempt (TCP connect) may take this long at most
HELLO_TIMEOUT_S = 5.0  # server side: a client must send its hello within this
MAX_UNAUTHENTICATED = 64
READY_TIMEOUT_S = 10.0
ECHO_BUFFER = 256 * 1024
SERVER_EXIT_GRACE_S = 5.0

_STATE_IDLE = 0
_STATE_CONNECTING = 1
_STATE_CONNECTED = 2
_STATE_GREETING = 3  # per_round: hello sent, waiting for the server's ACK

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux asm-generic and x86 value
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux
_TIMESPEC32 = struct.Struct("@ii")  # and on 32-bit
_CMSG_SPACE = 64  # room for one timestamp control message
_READ_EVENTS = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLERR

_INF = 1 << 62
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)  # Linux 4.2+


class ConfigError(Exception):
    """CONFIG.json is missing, unreadable or invalid."""


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; the run stops and keeps what it has."""


def _log(msg: str) -> None:
    sys.stderr.write("echo[%d]: %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


# --------------------------------------------------------------------------- config


class PeerSpec(object):
    __slots__ = ("addr", "id", "name", "port")

    def __init__(self, id: int, name: str, addr: str, port: int) -> None:
        self.id = id
        self.name = name
        self.addr = addr
        self.port = port

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name, "addr": self.addr, "port": self.port}


class Config(object):
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
    try:
        with open(path, "rb") as f:
            raw = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError("cannot read %s: %s" % (path, e)) from e
    if not isinstance(raw, dict):
        raise ConfigError("%s: top level must be an object" % path)
    return Config(raw)


def _family(addr: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def server_deadline_s(cfg: Config) -> float:
    """Seconds after its start at which the server stops whatever happens."""
    return cfg.connect_timeout_s + cfg.warmup_s + cfg.duration_s + cfg.timeout_s + cfg.linger_s


# --------------------------------------------------------------------------- server


class EchoServer(object):
    """Authenticates clients, then echoes bytes back, one blocking thread per connection."""

    def __init__(self, cfg: Config, listener: socket.socket) -> None:
        self.cfg = cfg
        self.listener = listener
        self.lock = threading.Lock()
        self.conns: dict[int, socket.socket] = {}
        self.threads: list[threading.Thread] = []
        self.unauthenticated = 0
        self.accepted = 0
        self.rejected = 0
        self.last_rejected = ""
        self.errors: list[str] = []
        self.wake_r, self.wake_w = os.pipe()
        self.max_conns = 4 * len(cfg.peers) + 16
        # Peers on per-round connections keep no connection open between rounds: once this
        # host's sender is done the server waits until none has come for two rounds.
        self.quiet_ns = (int((2.0 / cfg.rate + cfg.timeout_s + 0.5) * 1e9)
                         if cfg.connection == "per_round" else 0)
        self.last_accept_ns = 0

    def serve(self, stdin_fd: int, deadline_ns: int) -> None:
        mono = time.monotonic_ns
        sender_done = False
        lfd = self.listener.fileno()
        self.listener.setblocking(False)
        while True:
            now = mono()
            if now >= deadline_ns:
                break
            with self.lock:
                live = len(self.conns)
            if sender_done and live == 0 and now - self.last_accept_ns >= self.quiet_ns:
                break
            watch = [lfd, self.wake_r]
            if not sender_done:
                watch.append(stdin_fd)
            ready, _, _ = select.select(watch, [], [], min((deadline_ns - now) / 1e9,
                                                          0.1 if sender_done else 1.0))
            if self.wake_r in ready:
                os.read(self.wake_r, 4096)
            if stdin_fd in ready:
                try:
                    data = os.read(stdin_fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    sender_done = True
            if lfd in ready:
                self._accept()
        self._shutdown()

    def _accept(self) -> None:
        for _ in range(64):
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.errors.append("accept failed: %s" % e)
                return
            self.last_accept_ns = time.monotonic_ns()
            with self.lock:
                too_many = (self.unauthenticated >= MAX_UNAUTHENTICATED
                            or len(self.conns) >= self.max_conns)
                if not too_many:
                    self.unauthenticated += 1
                    self.conns[conn.fileno()] = conn
            if too_many:
                _log("server: refusing connection from %s: too many connections" % (addr[0],))
                conn.close()
                continue
            t = threading.Thread(target=self._handle, args=(conn, str(addr[0])),
                                 name="echo-%s" % (addr,), daemon=True)
            self.threads.append(t)
            t.start()
            if len(self.threads) > 2 * self.max_conns:  # per-round connections: one thread each
                self.threads = [th for th in self.threads if th.is_alive()]

    def _handle(self, conn: socket.socket, peer_addr: str) -> None:
        fd = conn.fileno()
        authenticated = False
        try:
            conn.settimeout(HELLO_TIMEOUT_S)
            head = _recv_exact(conn, HELLO.size)
            if head is None:
                self._reject(peer_addr, "no hello")
                return
            magic, host_id, token_len = HELLO.unpack(head)
            if magic not in (HELLO_MAGIC, HELLO_ACK_MAGIC) or token_len > MAX_TOKEN:
                self._reject(peer_addr, "bad hello")
                return
            token = _recv_exact(conn, token_len)
            if token is None or not hmac.compare_digest(token, self.cfg.token):
                self._reject(peer_addr, "bad token (claimed host id %d)" % host_id)
                return
            with self.lock:
                self.unauthenticated -= 1
                self.accepted += 1
            authenticated = True
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if magic == HELLO_ACK_MAGIC:
                conn.sendall(ACK)
            _echo_loop(conn)
        except socket.timeout:
            if not authenticated:
                self._reject(peer_addr, "no hello within %g s" % HELLO_TIMEOUT_S)
        except OSError:
            pass  # the peer went away; nothing to echo any more
        finally:
            with self.lock:
                if not authenticated:
                    self.unauthenticated -= 1
                self.conns.pop(fd, None)
            conn.close()
            with contextlib.suppress(OSError):
                os.write(self.wake_w, b"x")

    def _reject(self, peer_addr: str, why: str) -> None:
        with self.lock:
            self.rejected += 1
            self.last_rejected = "%s (%s)" % (peer_addr, why)
        _log("server: rejected connection from %s: %s" % (peer_addr, why))

    def _shutdown(self) -> None:
        with self.lock:
            conns = list(self.conns.values())
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        for t in self.threads:
            t.join(timeout=1.0)
        self.listener.close()

    def summary(self) -> dict[str, object]:
        errors = list(self.errors)
        if self.rejected:
            errors.append("server rejected %d connection(s), last from %s"
                          % (self.rejected, self.last_rejected))
        return {"accepted": self.accepted, "rejected": self.rejected, "errors": errors}


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    parts: list[bytes] = []
    while n > 0:
        chunk = conn.recv(n)
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _echo_loop(conn: socket.socket) -> None:
    buf = bytearray(ECHO_BUFFER)
    view = memoryview(buf)
    recv_into = conn.recv_into
    send = conn.send
    sendall = conn.sendall
    while True:
        n = recv_into(buf)
        if not n:
            return
        sent = send(view[:n])  # all of it, nearly always: sendall's loop only for the rest
        if sent < n:
            sendall(view[sent:n])


def cmd_serve(config_path: str) -> int:
    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        _log(str(e))
        return 2
    start = time.monotonic_ns()
    try:
        listener = socket.socket(_family(cfg.listen), socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((cfg.listen, cfg.port))
        listener.listen(128)
    except OSError as e:
        _log("server: cannot listen on %s:%d: %s" % (cfg.listen, cfg.port, e))
        return 1
    server = EchoServer(cfg, listener)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    gc.disable()
    gc.freeze()
    server.serve(sys.stdin.fileno(), start + int(server_deadline_s(cfg) * 1e9))
    gc.unfreeze()
    gc.enable()
    sys.stdout.write(json.dumps(server.summary(), separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


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
            _write_all(self.f, memoryview(self.buf)[: self.n * RECORD.size])
            self.n = 0


def _write_all(f: io.FileIO, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while len(view):
        n = f.write(view)
        if not n:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


# --------------------------------------------------------------------------- sender


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
    best_gap = _INF
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


class Peer(object):
    __slots__ = (
        "attempt_deadline",
        "conn_start",
        "connect_ns",
        "expired",
        "have",
        "id",
        "last_error",
        "mask",
        "next_attempt",
        "out",
        "pending",
        "q",
        "rbuf",
        "rview",
        "sock",
        "spec",
        "state",
    )

    def __init__(self, spec: PeerSpec, rbuf_size: int) -> None:
        self.spec = spec
        self.id = spec.id
        self.sock: socket.socket | None = None
        self.state = _STATE_IDLE
        self.mask = 0  # the events epoll watches on sock for us (0: not registered)
        self.attempt_deadline = 0
        self.next_attempt = 0
        # Frames in flight, oldest first: (round, send time).
        self.q: collections.deque[tuple[int, int]] = collections.deque()
        self.expired = 0  # leading entries of q already recorded as timeouts
        self.rbuf = bytearray(rbuf_size)
        self.rview = memoryview(self.rbuf)
        self.have = 0  # bytes of a partly received echo at the start of rbuf
        self.out = bytearray()  # bytes the socket did not take yet
        self.last_error = ""
        # per_round: the round whose connection is being set up (-1: none), when its
        # connect started, and its handshake time (-1 on persistent connections).
        self.pending = -1
        self.conn_start = 0
        self.connect_ns = -1

    def label(self) -> str:
        return "peer %s (id %d, %s:%d)" % (self.spec.name, self.id, self.spec.addr,
                                           self.spec.port)


class Sender(object):
    """Sends the rounds and receives the echoes in one thread, one epoll loop.

    A reply's receive time is the kernel's receive timestamp (see the module
    docstring), so it does not depend on when this loop gets to read it.
    """

    def __init__(self, cfg: Config, writer: RecordWriter) -> None:
        self.cfg = cfg
        self.w = writer
        self.fs = FRAME_HEADER.size + cfg.payload
        self.frame = bytearray(self.fs)
        FRAME_HEADER.pack_into(self.frame, 0, 0, cfg.host_id, cfg.payload)
        self.frame[FRAME_HEADER.size:] = os.urandom(cfg.payload)
        self.frame_view = memoryview(self.frame)
        # The self-loop goes last: its reply comes back fastest and would otherwise
        # compete for the CPU with the sends to the other peers.
        specs = sorted(cfg.peers, key=lambda p: p.id == cfg.host_id)
        self.peers = [Peer(p, max(65536, 2 * self.fs)) for p in specs]
        self.by_fd: dict[int, Peer] = {}
        self.ep = select.epoll()
        self.wake_r, self.wake_w = os.pipe()  # the signal wakeup pipe (SIGALRM: next round)
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.ep.register(self.wake_r, select.EPOLLIN)
        self.kernel_stamps = cfg.rx_stamp == "kernel"
        self.n_kernel = 0  # echoes stamped by the kernel
        self.n_user = 0  # echoes stamped when epoll returned
        self.offset = clock_offset()  # CLOCK_REALTIME - CLOCK_MONOTONIC, re-read every round
        self.timeout_ns = int(cfg.timeout_s * 1e9)
        self.per_round = cfg.connection == "per_round"
        self.round_conns = False  # per_round and the rounds have started (not the connect phase)
        rate = 1.0 / cfg.idle_s if cfg.idle_s else cfg.rate  # idle_s: each peer every idle_s
        self.interval_ns = 1e9 / rate
        self.n_rounds = max(0, math.ceil((cfg.duration_s + cfg.warmup_s) * rate - 1e-9))
        self.late_tolerance_ns = int(min(1e6, self.interval_ns / 2))
        self.t0 = 0
        self.warm_end = 0
        self.rounds_sent = 0
        self.late_sends = 0
        self.max_lag_ns = 0
        self.retry_ns = int(CONNECT_RETRY_S * 1e9)
        self.next_maint = 0  # when connect attempts need attention next
        self.errors: dict[str, int] = {}
        token = cfg.token
        self.hello = HELLO.pack(HELLO_MAGIC, cfg.host_id, len(token)) + token
        self.hello_ack = HELLO.pack(HELLO_ACK_MAGIC, cfg.host_id, len(token)) + token
        self.connects = 0  # per_round connections whose handshake completed

    # ---- bookkeeping

    def error(self, msg: str) -> None:
        self.errors[msg] = self.errors.get(msg, 0) + 1

    def error_list(self) -> list[str]:
        return [m if c == 1 else "%s (x%d)" % (m, c) for m, c in self.errors.items()]

    def outstanding(self) -> int:
        """Frames in flight, and per_round connections being set up, that have no row yet."""
        return sum(len(p.q) - p.expired + (p.pending >= 0) for p in self.peers)

    def _row_now(self, p: Peer, rnd: int, flags: int, t: int) -> None:
        self.w.add(rnd, p.id, flags | (FLAG_WARMUP if t < self.warm_end else 0), t, 0)

    def _watch(self, p: Peer) -> None:
        """Make epoll watch what the peer's state needs: connect done, echoes, room to send."""
        m = 0
        if p.state == _STATE_CONNECTING:
            m = select.EPOLLOUT
        elif p.state in (_STATE_CONNECTED, _STATE_GREETING):
            m = select.EPOLLIN | (select.EPOLLOUT if p.out else 0)
        if m == p.mask or p.sock is None:
            return
        fd = p.sock.fileno()
        if not p.mask:
            self.ep.register(fd, m)
        else:
            self.ep.modify(fd, m)
        p.mask = m

    # ---- connections

    def _attempt(self, p: Peer, now: int) -> None:
        cfg = self.cfg
        s = socket.socket(_family(p.spec.addr), socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.bind((cfg.listen, 0))  # leave from the experiment address, whatever the routes
            s.setblocking(False)
            err = s.connect_ex((p.spec.addr, p.spec.port))
        except OSError as e:
            s.close()
            self._attempt_failed(p, now, str(e))
            return
        p.sock = s
        self.by_fd[s.fileno()] = p
        if err == 0:
            self._connected(p)
        elif err in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            p.state = _STATE_CONNECTING
            p.attempt_deadline = now + int(min(ATTEMPT_S, max(cfg.connect_timeout_s, 0.1)) * 1e9)
            self.next_maint = min(self.next_maint, p.attempt_deadline)
            self._watch(p)
        else:
            self._drop(p)
            self._attempt_failed(p, now, os.strerror(err))

    def _attempt_failed(self, p: Peer, now: int, why: str) -> None:
        p.state = _STATE_IDLE
        p.next_attempt = now + self.retry_ns
        p.last_error = "%s: connect failed: %s" % (p.label(), why)
        self.next_maint = min(self.next_maint, p.next_attempt)

    def _connected(self, p: Peer) -> None:
        sock = p.sock
        assert sock is not None
        if self.kernel_stamps:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError as e:
                self.error("no kernel receive timestamps, echoes stamped in user space: %s" % e)
        p.state = _STATE_CONNECTED
        p.out = bytearray(self.hello)  # p.have is 0: _drop reset it
        p.last_error = ""
        self._flush_out(p)

    def _drop(self, p: Peer) -> None:
        """Forget the peer's socket and close it."""
        sock = p.sock
        p.sock = None
        p.state = _STATE_IDLE
        p.out = bytearray()
        p.have = 0
        if sock is not None:
            fd = sock.fileno()
            self.by_fd.pop(fd, None)
            if p.mask:
                with contextlib.suppress(OSError):
                    self.ep.unregister(fd)
            sock.close()
        p.mask = 0

    def _broken(self, p: Peer, now: int, why: str) -> None:
        """The connection broke: rows for what was in flight; retry later."""
        self._fail_inflight(p)
        self._drop(p)
        if p.pending >= 0:
            self._round_failed(p, "connection lost: %s" % why)
            return
        p.next_attempt = now + self.retry_ns
        self.next_maint = min(self.next_maint, p.next_attempt)
        self.error("%s: connection lost: %s" % (p.label(), why))
        _log("%s: connection lost after round %d: %s" % (p.label(), self.rounds_sent - 1, why))

    def _fail_inflight(self, p: Peer, flags: int = FLAG_TIMEOUT | FLAG_CONN_LOST) -> None:
        """Frames in flight become rows with ``flags`` (a broken connection: conn_lost)."""
        add = self.w.add
        warm_end = self.warm_end
        q = p.q
        for i in range(p.expired, len(q)):  # the first p.expired are timeout rows already
            rnd, st = q[i]
            add(rnd, p.id, flags | (FLAG_WARMUP if st < warm_end else 0), st, 0, p.connect_ns)
        q.clear()
        p.expired = 0

    def _maintain(self, now: int) -> int:
        """Start due connect attempts, abandon stale ones; return when to look again."""
        nxt = _INF
        for p in self.peers:
            if p.state == _STATE_IDLE:
                if now >= p.next_attempt:
                    self._attempt(p, now)
                if p.state == _STATE_IDLE:
                    nxt = min(nxt, p.next_attempt)
            if p.state == _STATE_CONNECTING:
                if now >= p.attempt_deadline:
                    self._drop(p)
                    self._attempt_failed(p, now, "timed out")
                    nxt = min(nxt, p.next_attempt)
                else:
                    nxt = min(nxt, p.attempt_deadline)
        self.next_maint = nxt
        return nxt

    def _on_writable(self, p: Peer, now: int) -> None:
        sock = p.sock
        if sock is None:
            return
        if p.state == _STATE_CONNECTING:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._drop(p)
                if self.round_conns:
                    self._round_failed(p, "connect failed: %s" % os.strerror(err))
                else:
                    self._attempt_failed(p, now, os.strerror(err))
            elif self.round_conns:
                self._round_connected(p, now)
            else:
                self._connected(p)
        elif p.state in (_STATE_CONNECTED, _STATE_GREETING) and p.out:
            self._flush_out(p)

    def _flush_out(self, p: Peer) -> None:
        sock = p.sock
        assert sock is not None
        try:
            n = sock.send(p.out, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as e:
            self._broken(p, time.monotonic_ns(), str(e))
            return
        del p.out[:n]
        self._watch(p)

    # ---- echoes

    def _on_readable(self, p: Peer, ts: int, offset: int) -> None:
        """Read what the peer echoed; ``ts`` is when epoll returned, ``offset`` is
        CLOCK_REALTIME - CLOCK_MONOTONIC (see :func:`clock_offset`)."""
        sock = p.sock
        if sock is None or p.state != _STATE_CONNECTED:
            return
        have = p.have
        try:
            n, anc, _flags, _addr = sock.recvmsg_into([p.rview[have:]], _CMSG_SPACE,
                                                      socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._broken(p, ts, str(e))
            return
        if not n:
            self._broken(p, ts, "closed by peer" + ("" if self.rounds_sent > 1 else
                                                    " (wrong token or not an echo server?)"))
            return
        stamp = 0
        if anc:
            level, kind, data = anc[0]
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = (_TIMESPEC if len(data) >= _TIMESPEC.size else _TIMESPEC32
                             ).unpack_from(data)
                stamp = sec * 1_000_000_000 + nsec - offset
                if stamp > ts:
                    stamp = 0  # the wall clock stepped forward after the offset was read
        have += n
        if have >= self.fs:
            have, why = self._consume(p, have, stamp, ts)
            if why:
                p.have = 0
                self._broken(p, ts, why)
                return
        p.have = have
        if self.round_conns and not p.q:
            self._drop(p)  # the round's echo is in: this connection has done its work

    def _consume(self, p: Peer, have: int, stamp: int, ts: int) -> tuple[int, str]:
        """Match whole echoed frames to the in-flight queue.

        Returns the bytes left over and, if the stream is out of sync, why.
        """
        fs = self.fs
        buf = p.rbuf
        q = p.q
        add = self.w.add
        unpack_from = ROUND_FIELD.unpack_from
        connect_ns = p.connect_ns
        off = 0
        while have - off >= fs:
            got = unpack_from(buf, off)[0]
            if not q:
                return 0, "echo of round %d that was never sent" % got
            expected, st = q[0]
            if expected != got:
                return 0, "echo out of sync: round %d, expected %d" % (got, expected)
            q.popleft()
            if p.expired:
                p.expired -= 1  # a late reply to a row already recorded as a timeout
            else:
                if stamp >= st:
                    rt = stamp
                    self.n_kernel += 1
                else:  # no kernel stamp, or the wall clock stepped back after the offset was read
                    rt = ts
                    self.n_user += 1
                flags = FLAG_WARMUP if st < self.warm_end else 0
                if rt - st > self.timeout_ns:
                    add(expected, p.id, flags | FLAG_TIMEOUT, st, 0, connect_ns)
                else:
                    add(expected, p.id, flags, st, rt, connect_ns)
            off += fs
        rest = have - off
        if rest:
            buf[0:rest] = buf[off:have]
        return rest, ""

    def _sweep(self, now: int) -> int:
        """Record timeouts for frames unanswered for timeout_s; return the next deadline.

        A frame is swept only SWEEP_GRACE_NS after its deadline: a reply that arrived
        in time but is not read yet is never recorded as a timeout before it is matched.
        """
        tmo = self.timeout_ns + SWEEP_GRACE_NS
        warm_end = self.warm_end
        add = self.w.add
        nxt = _INF
        for p in self.peers:
            q = p.q
            i = p.expired
            end = len(q)
            while i < end:
                rnd, st = q[i]
                if st + tmo > now:
                    nxt = min(nxt, st + tmo)
                    break
                add(rnd, p.id, FLAG_TIMEOUT | (FLAG_WARMUP if st < warm_end else 0), st, 0,
                    p.connect_ns)
                i += 1
            p.expired = i
        return nxt

    # ---- sends

    def _send_round(self, rnd: int) -> None:
        """Send round ``rnd`` to every peer; the caller blocks in epoll right after."""
        mono = time.monotonic_ns
        frame = self.frame
        ROUND_FIELD.pack_into(frame, 0, rnd)
        dontwait = socket.MSG_DONTWAIT
        for p in self.peers:
            sock = p.sock
            if p.state != _STATE_CONNECTED or sock is None or p.out:
                self._send_slow(p, rnd)
                continue
            t = mono()
            p.q.append((rnd, t))  # a failed send still gets its row (conn_lost)
            try:
                n = sock.send(frame, dontwait)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self._broken(p, t, str(e))
                continue
            if n < self.fs:
                p.out += self.frame_view[n:]
                self._watch(p)

    def _send_slow(self, p: Peer, rnd: int) -> None:
        """A peer that is not connected, or whose earlier frames still wait to go out."""
        t = time.monotonic_ns()
        if p.state != _STATE_CONNECTED or p.sock is None:
            self._row_now(p, rnd, FLAG_TIMEOUT | FLAG_CONN_LOST, t)
        elif len(p.out) + self.fs > MAX_OUTBOUND:
            self._row_now(p, rnd, FLAG_TIMEOUT | FLAG_SEND_FAILED, t)
        else:
            p.q.append((rnd, t))
            p.out += self.frame  # goes out when the socket is writable again

    # ---- a connection per round (connection: per_round)

    def _open_rounds(self, rnd: int) -> None:
        """:meth:`_send_round` of ``per_round``: round ``rnd``'s own connection to every peer."""
        for p in self.peers:
            self._open_round(p, rnd)

    def _open_round(self, p: Peer, rnd: int) -> None:
        """Start round ``rnd``'s own connection to ``p`` (its row comes when it ends)."""
        if p.pending >= 0 or p.sock is not None:
            self._abandon(p)
        t = time.monotonic_ns()
        p.pending = rnd
        p.conn_start = t
        p.connect_ns = -1
        p.attempt_deadline = t + self.timeout_ns
        self.next_maint = min(self.next_maint, p.attempt_deadline)
        s = socket.socket(_family(p.spec.addr), socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # The port is chosen at connect() for the 4-tuple, not at bind() for any
            # destination: thousands of connections in TIME_WAIT do not run out of ports.
            with contextlib.suppress(OSError):
                s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.bind((self.cfg.listen, 0))
            s.setblocking(False)
            err = s.connect_ex((p.spec.addr, p.spec.port))
        except OSError as e:
            s.close()
            self._round_failed(p, "connect failed: %s" % e)
            return
        p.sock = s
        self.by_fd[s.fileno()] = p
        if err == 0:
            self._round_connected(p, time.monotonic_ns())
        elif err in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            p.state = _STATE_CONNECTING
            self._watch(p)
        else:
            self._drop(p)
            self._round_failed(p, "connect failed: %s" % os.strerror(err))

    def _round_connected(self, p: Peer, now: int) -> None:
        """Handshake done: record its time, send the hello that asks for an ACK."""
        p.connect_ns = now - p.conn_start
        self.connects += 1
        p.state = _STATE_GREETING
        if self.kernel_stamps:
            with contextlib.suppress(OSError):
                assert p.sock is not None
                p.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        p.out = bytearray(self.hello_ack)
        self._flush_out(p)

    def _on_ack(self, p: Peer, now: int) -> None:
        """The server accepted the hello: send the round's frame, timed from now."""
        sock = p.sock
        assert sock is not None
        try:
            got = sock.recv(16, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._broken(p, now, str(e))
            return
        if got != ACK:
            self._broken(p, now, "closed during the hello (wrong token?)" if not got
                         else "unexpected reply %r to the hello" % got[:16])
            return
        ROUND_FIELD.pack_into(self.frame, 0, p.pending)
        p.state = _STATE_CONNECTED
        p.q.append((p.pending, time.monotonic_ns()))
        p.pending = -1
        p.out += self.frame
        self._flush_out(p)

    def _round_failed(self, p: Peer, why: str) -> None:
        """The pending round got no frame out: a timeout row (its handshake time if known)."""
        rnd, st = p.pending, p.conn_start
        p.pending = -1
        flags = FLAG_TIMEOUT | FLAG_CONN_LOST | (FLAG_WARMUP if st < self.warm_end else 0)
        self.w.add(rnd, p.id, flags, st, 0, p.connect_ns)
        self.error("%s: %s" % (p.label(), why))

    def _abandon(self, p: Peer) -> None:
        """The next round is due and this one is unfinished: it is a timeout."""
        self._drop(p)
        if p.pending >= 0:
            self._round_failed(p, "round not finished when the next one started")
        self._fail_inflight(p, FLAG_TIMEOUT)

    def _expire_rounds(self, now: int) -> None:
        """Connections whose handshake or hello outlived the timeout become timeout rows."""
        nxt = _INF
        for p in self.peers:
            if p.pending < 0:
                continue
            if now >= p.attempt_deadline:
                self._drop(p)
                self._round_failed(p, "connect or hello not done within the timeout")
            else:
                nxt = min(nxt, p.attempt_deadline)
        self.next_maint = nxt

    # ---- the loop

    def _dispatch(self, events: list[tuple[int, int]]) -> None:
        """Handle what one epoll wait returned."""
        ts = time.monotonic_ns()
        offset = self.offset
        by_fd = self.by_fd
        wake_r = self.wake_r
        for fd, ev in events:
            if fd == wake_r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 4096)
                continue
            p = by_fd.get(fd)
            if p is None:
                continue
            if ev & _READ_EVENTS and p.state == _STATE_CONNECTED:
                self._on_readable(p, ts, offset)
            elif ev & _READ_EVENTS and p.state == _STATE_GREETING:
                self._on_ack(p, ts)
            if ev & _WRITE_EVENTS and by_fd.get(fd) is p:
                self._on_writable(p, ts)

    def connect_phase(self) -> None:
        """Connect to every peer, retrying until all are up or connect_timeout_s is over."""
        mono = time.monotonic_ns
        deadline = mono() + int(self.cfg.connect_timeout_s * 1e9)
        while True:
            now = mono()
            nxt = self._maintain(now)
            if all(p.state == _STATE_CONNECTED for p in self.peers) or now >= deadline:
                break
            wake = min(nxt, deadline)
            self._dispatch(self.ep.poll(max(wake - now, 0) / 1e9))
        for p in self.peers:
            if p.state != _STATE_CONNECTED:
                self.error(p.last_error or "%s: not connected" % p.label())
                if p.state == _STATE_CONNECTING:
                    self._drop(p)
        self.retry_ns = int(RECONNECT_S * 1e9)

    def start_rounds(self) -> None:
        if self.per_round:  # the connect phase only checked that every server is up
            for p in self.peers:
                self._drop(p)
            self.round_conns = True
        self.t0 = time.monotonic_ns() + 1_000_000  # 1 ms for the header write
        self.warm_end = self.t0 + int(self.cfg.warmup_s * 1e9)
        for p in self.peers:
            p.next_attempt = self.t0 + self.retry_ns
        self.next_maint = self.t0 + self.retry_ns

    def rounds(self) -> None:
        """Send every round on schedule until each (round, peer) has its row.

        The loop wakes up through an interval timer (SIGALRM and the wakeup
        pipe) armed just before a round is sent, and waits in epoll without a
        timeout: a timeout would arm a kernel timer while the echoes are on
        their way, which takes a trap to the hypervisor on virtual machines and
        delays an echo server sharing the CPU.
        """
        old_alarm = signal.signal(signal.SIGALRM, _ignore_signal)
        old_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        try:
            self._rounds()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.set_wakeup_fd(old_wakeup)
            signal.signal(signal.SIGALRM, old_alarm)

    def _rounds(self) -> None:
        mono = time.monotonic_ns
        setitimer = signal.setitimer
        itimer = signal.ITIMER_REAL
        poll = self.ep.poll
        dispatch = self._dispatch
        send_round = self._open_rounds if self.per_round else self._send_round
        w = self.w
        t0 = self.t0
        interval = self.interval_ns
        n_rounds = self.n_rounds
        tolerance = self.late_tolerance_ns
        timeout_ns = self.timeout_ns
        catch_up_gap = int(interval / 2)
        rnd = 0
        next_send = t0
        next_sweep = _INF
        armed = _INF  # when the interval timer fires next
        while True:
            now = mono()
            if now >= next_sweep:
                next_sweep = self._sweep(now)
            if now >= self.next_maint:
                if self.round_conns:
                    self._expire_rounds(now)
                elif rnd < n_rounds:
                    self._maintain(now)
                else:
                    self.next_maint = _INF  # no reconnects once every round is sent
            if rnd >= n_rounds or w.n >= w.soft:  # only then does it matter what is in flight
                idle = self.outstanding() == 0
                if idle and w.n >= w.soft:
                    w.flush()  # while nothing is in flight
                if idle and rnd >= n_rounds:
                    break
            if rnd < n_rounds and now >= next_send:
                lag = now - (t0 + int(rnd * interval))
                if lag > self.max_lag_ns:
                    self.max_lag_ns = lag
                if lag > tolerance:
                    self.late_sends += 1
                rnd += 1
                self.rounds_sent = rnd
                # Behind schedule, the overdue rounds go out at twice the rate rather
                # than in one burst, whose frames would queue behind each other at
                # both ends and inflate the very round trips being measured.
                next_send = (max(t0 + int(rnd * interval), now + catch_up_gap)
                             if rnd < n_rounds else _INF)
                if next_sweep == _INF:
                    next_sweep = now + timeout_ns + SWEEP_GRACE_NS
                armed = min(next_send, next_sweep, self.next_maint)
                setitimer(itimer, max((armed - now) / 1e9, 1e-6))  # before the sends
                if self.kernel_stamps:
                    self.offset = clock_offset()
                send_round(rnd - 1)
            else:
                wake = min(next_send, next_sweep, self.next_maint)
                if wake <= now:
                    continue
                if wake < armed or armed <= now:
                    armed = wake
                    setitimer(itimer, max((wake - now) / 1e9, 1e-6))
            dispatch(poll(-1 if armed < _INF else 1.0))

    def close(self) -> None:
        for p in self.peers:
            self._drop(p)
        self.ep.close()
        os.close(self.wake_r)
        os.close(self.wake_w)


# --------------------------------------------------------------------------- run


def _start_server(config_path: str) -> tuple[subprocess.Popen[bytes] | None, str]:
    cmd = [sys.executable, os.path.abspath(__file__), "serve", config_path]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                close_fds=True)
    except OSError as e:
        return None, "cannot start echo server: %s" % e
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return proc, "echo server not ready after %.0f s" % READY_TIMEOUT_S
        chunk = os.read(fd, 1)
        if not chunk:
            return proc, "echo server exited before listening (see its stderr)"
        line += chunk
    if line != b"READY\n":
        return proc, "echo server said %r instead of READY" % line
    return proc, ""


def _stop_server(proc: subprocess.Popen[bytes], wait_s: float) -> tuple[dict[str, object], str]:
    """Tell the server the sender is done; wait for it to exit; read its summary."""
    assert proc.stdin is not None and proc.stdout is not None
    with contextlib.suppress(OSError):
        proc.stdin.close()
    err = ""
    try:
        proc.wait(timeout=max(wait_s, 0.0) + SERVER_EXIT_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        err = "echo server did not exit by its deadline; killed"
    out = proc.stdout.read()  # its summary: one short line, so the pipe never filled
    proc.stdout.close()
    summary: dict[str, object] = {}
    lines = out.decode("utf-8", "replace").strip().splitlines()
    if lines:
        try:
            parsed = json.loads(lines[-1])
            if isinstance(parsed, dict):
                summary = parsed
        except ValueError:
            pass
    if proc.returncode not in (0, None) and not err:
        err = "echo server exited with status %s" % proc.returncode
    return summary, err


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ignore_signal(signum: int, frame: object) -> None:
    pass  # SIGALRM only has to interrupt select(); the wakeup pipe says it happened


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


def _measure(cfg: Config, config_path: str, f: io.FileIO) -> tuple[Sender, list[str], int]:
    """Start the server, run the sender into ``f``, stop the server.

    Returns the sender, the errors seen around it, and the signal that
    interrupted the run (0 if none). OSError means the output could not be written.
    """
    errors: list[str] = []
    start_ns = time.monotonic_ns()
    proc, err = _start_server(config_path)
    if err:
        errors.append(err)
    sender = Sender(cfg, RecordWriter(f))
    interrupted = 0
    old_term = signal.signal(signal.SIGTERM, _raise_interrupted)
    old_int = signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        try:
            sender.connect_phase()
            sender.start_rounds()
            header = {
                "schema": SCHEMA, "worker_version": WORKER_VERSION, "clock": "CLOCK_MONOTONIC",
                "host": cfg.host, "host_id": cfg.host_id,
                "peers": [p.as_dict() for p in cfg.peers], "rate": cfg.rate,
                "payload": cfg.payload, "timeout_s": cfg.timeout_s, "warmup_s": cfg.warmup_s,
                "duration_s": cfg.duration_s, "rounds": sender.n_rounds, "t0_ns": sender.t0,
                "t0_utc_ns": sender.t0 + clock_offset(), "rx_stamp": cfg.rx_stamp,
                "connection": cfg.connection, "idle_s": cfg.idle_s,
                "python": platform.python_version(), "kernel": platform.release(),
            }
            blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
            _write_all(f, MAGIC + HEADER_LEN.pack(len(blob)) + blob)
            gc.disable()
            gc.freeze()
            try:
                sender.rounds()
            finally:
                gc.unfreeze()
                gc.enable()
        except Interrupted as e:
            interrupted = int(e.args[0]) if e.args else int(signal.SIGTERM)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sender.close()
        sender.w.flush()
        os.fsync(f.fileno())
    finally:
        if proc is not None:
            left = server_deadline_s(cfg) - (time.monotonic_ns() - start_ns) / 1e9
            summary, err = _stop_server(proc, 0.0 if interrupted else left)
            if err:
                errors.append(err)
            server_errors = summary.get("errors")
            if isinstance(server_errors, list):
                errors.extend("server: %s" % e for e in server_errors)
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
    return sender, sender.error_list() + errors, interrupted


def cmd_run(config_path: str, out_path: str) -> int:
    wall0 = time.monotonic()
    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        _log(str(e))
        return 2
    try:
        with open(out_path, "wb", buffering=0) as f:
            sender, errors, interrupted = _measure(cfg, config_path, f)
        digest = _sha256(out_path)
    except OSError as e:
        _log("cannot write %s: %s" % (out_path, e))
        return 1
    if interrupted:
        errors.append("interrupted by signal %d after %d of %d rounds"
                      % (interrupted, sender.rounds_sent, sender.n_rounds))
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "schema": SCHEMA, "worker_version": WORKER_VERSION, "host": cfg.host,
        "rows": sender.w.rows, "timeouts": sender.w.timeouts, "rounds": sender.rounds_sent,
        "out": out_path, "sha256": digest, "t0_ns": sender.t0,
        "cpu_s": round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 6),
        "wall_s": round(time.monotonic() - wall0, 6),
        "late_sends": sender.late_sends, "max_send_lag_us": sender.max_lag_ns // 1000,
        "kernel_stamps": sender.n_kernel, "user_stamps": sender.n_user,
        "connects": sender.connects, "errors": errors,
    }
    sys.stdout.write(json.dumps(report, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 3 if interrupted else 0


USAGE = "usage: python3 echo.py run CONFIG.json OUT.bin | python3 echo.py serve CONFIG.json\n"


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "run":
        return cmd_run(argv[1], argv[2])
    if len(argv) == 2 and argv[0] == "serve":
        return cmd_serve(argv[1])
    sys.stderr.write(USAGE)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
