"""Echo RTT worker (after StormCloud): an echo server and a round-based sender.

Runs on measured hosts with nothing but ``python3`` (3.8+, stdlib only, Linux).

    python3 echo.py run CONFIG.json OUT.bin   server (child process) + sender; one JSON line
    python3 echo.py serve CONFIG.json         server only; serves until stdin reaches EOF
                                              and no inbound connection is left, or the deadline

Files (shipped together, side by side in the host's work directory; WORKER_VERSION
below versions all three, and the manifest records each file's checksum):

    echo.py              this entry point: the echo server, the sender's loop, the run
    echo_protocol.py     the wire protocol, the raw file format, CONFIG
    echo_connections.py  the sender's connections: the persistent and the per-round
                         state machines

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
    schema 2 (worker 4): the same format and protocol; the worker is three files (the
                         connection modes in echo_connections.py).

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

import contextlib
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
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # cloudbench.workers.echo (the controller and the tests)
    from .echo_connections import (
        SWEEP_GRACE_NS,
        Connections,
        PersistentConnections,
        RoundConnections,
        new_frame,
    )
    from .echo_protocol import (
        ACK,
        HEADER_LEN,
        HELLO,
        HELLO_ACK_MAGIC,
        HELLO_MAGIC,
        INF,
        MAGIC,
        MAX_TOKEN,
        SCHEMA,
        Config,
        ConfigError,
        RecordWriter,
        clock_offset,
        family,
        load_config,
        log,
        server_deadline_s,
        write_all,
    )
else:  # a script on a host: the worker's files side by side in one directory
    from echo_connections import (
        SWEEP_GRACE_NS,
        Connections,
        PersistentConnections,
        RoundConnections,
        new_frame,
    )
    from echo_protocol import (
        ACK,
        HEADER_LEN,
        HELLO,
        HELLO_ACK_MAGIC,
        HELLO_MAGIC,
        INF,
        MAGIC,
        MAX_TOKEN,
        SCHEMA,
        Config,
        ConfigError,
        RecordWriter,
        clock_offset,
        family,
        load_config,
        log,
        server_deadline_s,
        write_all,
    )

WORKER_VERSION = "4"

HELLO_TIMEOUT_S = 5.0  # server side: a client must send its hello within this
MAX_UNAUTHENTICATED = 64
READY_TIMEOUT_S = 10.0
ECHO_BUFFER = 256 * 1024
SERVER_EXIT_GRACE_S = 5.0
STOP_DRAIN_S = 1.0  # after SIGTERM, echoes in flight get at most this long (or timeout_s) to come back


class Interrupted(BaseException):
    """SIGTERM or SIGINT arrived; the run stops and keeps what it has."""


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
                log("server: refusing connection from %s: too many connections" % (addr[0],))
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
        log("server: rejected connection from %s: %s" % (peer_addr, why))

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
        log(str(e))
        return 2
    start = time.monotonic_ns()
    try:
        listener = socket.socket(family(cfg.listen), socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((cfg.listen, cfg.port))
        listener.listen(128)
    except OSError as e:
        log("server: cannot listen on %s:%d: %s" % (cfg.listen, cfg.port, e))
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


# --------------------------------------------------------------------------- sender


class Sender(object):
    """Sends the rounds on schedule and receives the echoes in one thread, one epoll loop.

    The connections (:mod:`echo_connections`) do the sending and receiving; this is
    the schedule: when each round goes out, when timeouts are swept and connections
    looked after, when records are written, when the run is over.
    """

    def __init__(self, cfg: Config, writer: RecordWriter) -> None:
        self.cfg = cfg
        self.w = writer
        self.ep = select.epoll()
        self.wake_r, self.wake_w = os.pipe()  # the signal wakeup pipe (SIGALRM: next round)
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.ep.register(self.wake_r, select.EPOLLIN)
        self.frame = new_frame(cfg)
        self.errors: dict[str, int] = {}
        # Every mode connects persistently first; per_round then opens its own per round.
        self.connections: Connections = PersistentConnections(cfg, writer, self.ep, self.wake_r, self.frame,
                                                        self.errors)
        self.kernel_stamps = cfg.rx_stamp == "kernel"
        self.timeout_ns = int(cfg.timeout_s * 1e9)
        self.per_round = cfg.connection == "per_round"
        rate = 1.0 / cfg.idle_s if cfg.idle_s else cfg.rate  # idle_s: each peer every idle_s
        self.interval_ns = 1e9 / rate
        self.n_rounds = max(0, math.ceil((cfg.duration_s + cfg.warmup_s) * rate - 1e-9))
        self.late_tolerance_ns = int(min(1e6, self.interval_ns / 2))
        self.t0 = 0
        self.warm_end = 0
        self.late_sends = 0
        self.max_lag_ns = 0
        self.stop_signal = 0  # SIGTERM or SIGINT during the rounds: no round after it

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stop_signal = signum  # the wakeup pipe wakes the loop, which stops sending

    @property
    def rounds_sent(self) -> int:
        """Rounds sent so far."""
        return self.connections.rounds_sent

    def error_list(self) -> list[str]:
        """The errors seen, each once, with its count if more than one."""
        return [m if c == 1 else "%s (x%d)" % (m, c) for m, c in self.errors.items()]

    def connect_phase(self) -> None:
        """Connect to every peer, retrying until all are up or connect_timeout_s is over."""
        conns = self.connections
        assert isinstance(conns, PersistentConnections)
        conns.connect_all()

    def start_rounds(self) -> None:
        """Fix round 0's time; per_round closes the connect phase's connections."""
        if self.per_round:  # the connect phase only checked that every server is up
            offset = self.connections.offset
            self.connections.close()
            self.connections = RoundConnections(self.cfg, self.w, self.ep, self.wake_r, self.frame, self.errors)
            self.connections.offset = offset
        self.t0 = time.monotonic_ns() + 1_000_000  # 1 ms for the header write
        self.warm_end = self.t0 + int(self.cfg.warmup_s * 1e9)
        self.connections.start(self.t0, self.warm_end)

    def rounds(self) -> None:
        """Send every round on schedule until each (round, peer) has its row.

        The loop wakes up through an interval timer (SIGALRM and the wakeup
        pipe) armed just before a round is sent, and waits in epoll without a
        timeout: a timeout would arm a kernel timer while the echoes are on
        their way, which takes a trap to the hypervisor on virtual machines and
        delays an echo server sharing the CPU.

        SIGTERM or SIGINT only sets :attr:`stop_signal` here (an exception raised
        between two statements could leave a round handed out with no rows): the
        loop sends no further round, waits up to STOP_DRAIN_S (or timeout_s) for
        the echoes in flight, and gives every round already sent its rows.
        """
        old_alarm = signal.signal(signal.SIGALRM, _ignore_signal)
        old_term = signal.signal(signal.SIGTERM, self._on_stop)
        old_int = signal.signal(signal.SIGINT, self._on_stop)
        old_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        try:
            self._rounds()
            self.connections.give_up()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.set_wakeup_fd(old_wakeup)
            signal.signal(signal.SIGALRM, old_alarm)
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)

    def _rounds(self) -> None:
        mono = time.monotonic_ns
        setitimer = signal.setitimer
        itimer = signal.ITIMER_REAL
        poll = self.ep.poll
        conns = self.connections
        dispatch = conns.dispatch
        send_round = conns.send_round
        w = self.w
        t0 = self.t0
        interval = self.interval_ns
        n_rounds = self.n_rounds
        tolerance = self.late_tolerance_ns
        timeout_ns = self.timeout_ns
        catch_up_gap = int(interval / 2)
        rnd = 0
        next_send = t0
        next_sweep = INF
        armed = INF  # when the interval timer fires next
        drain_until = INF  # after a stop signal: when to give up on the echoes in flight
        while True:
            now = mono()
            if self.stop_signal and drain_until == INF:
                n_rounds = rnd
                next_send = INF
                drain_until = now + min(timeout_ns, int(STOP_DRAIN_S * 1e9))
            if now >= next_sweep:
                next_sweep = conns.sweep(now)
            if now >= conns.next_maint:
                conns.upkeep(now, rnd < n_rounds)
            if rnd >= n_rounds or w.n >= w.soft:  # only then does it matter what is in flight
                idle = conns.outstanding() == 0
                if idle and w.n >= w.soft:
                    w.flush()  # while nothing is in flight
                if rnd >= n_rounds and (idle or now >= drain_until):
                    break
            if rnd < n_rounds and now >= next_send:
                lag = now - (t0 + int(rnd * interval))
                if lag > self.max_lag_ns:
                    self.max_lag_ns = lag
                if lag > tolerance:
                    self.late_sends += 1
                rnd += 1
                conns.rounds_sent = rnd
                # Behind schedule, the overdue rounds go out at twice the rate rather
                # than in one burst, whose frames would queue behind each other at
                # both ends and inflate the very round trips being measured.
                next_send = (max(t0 + int(rnd * interval), now + catch_up_gap)
                             if rnd < n_rounds else INF)
                if next_sweep == INF:
                    next_sweep = now + timeout_ns + SWEEP_GRACE_NS
                armed = min(next_send, next_sweep, conns.next_maint)
                setitimer(itimer, max((armed - now) / 1e9, 1e-6))  # before the sends
                if self.kernel_stamps:
                    conns.offset = clock_offset()
                send_round(rnd - 1)
            else:
                wake = min(next_send, next_sweep, conns.next_maint, drain_until)
                if wake <= now:
                    continue
                if wake < armed or armed <= now:
                    armed = wake
                    setitimer(itimer, max((wake - now) / 1e9, 1e-6))
            dispatch(poll(-1 if armed < INF else 1.0))

    def close(self) -> None:
        """Close every connection, the epoll set and the wakeup pipe."""
        self.connections.close()
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
            write_all(f, MAGIC + HEADER_LEN.pack(len(blob)) + blob)
            gc.disable()
            gc.freeze()
            try:
                sender.rounds()
            finally:
                gc.unfreeze()
                gc.enable()
            interrupted = sender.stop_signal
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
        log(str(e))
        return 2
    try:
        with open(out_path, "wb", buffering=0) as f:
            sender, errors, interrupted = _measure(cfg, config_path, f)
        digest = _sha256(out_path)
    except OSError as e:
        log("cannot write %s: %s" % (out_path, e))
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
        "kernel_stamps": sender.connections.n_kernel, "user_stamps": sender.connections.n_user,
        "connects": sender.connections.connects, "errors": errors,
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
