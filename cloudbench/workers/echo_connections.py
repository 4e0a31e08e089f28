"""The echo sender's connections to its peers: the two connection modes' state machines.

Part of the echo worker (``echo.py`` is its entry point and documents the
protocol); stdlib only, runs on measured hosts next to ``echo.py`` and
``echo_protocol.py``.

:class:`Connections` holds what both modes share: one epoll set over the peers'
sockets, output the kernel did not take yet, reading echoes and matching them to
the frames in flight (each becomes a record), and the timeouts of unanswered
frames. A subclass is one mode's state machine per peer:

* :class:`PersistentConnections` (``connection: "persistent"``, and every mode's
  connect phase): idle -> connecting -> connected, one connection per peer, made
  before round 0 and made again (every ``RECONNECT_S``) if it breaks.
* :class:`RoundConnections` (``connection: "per_round"``): for every round and
  peer, idle -> connecting -> greeting (hello sent, waiting for the ACK) ->
  connected (frame sent) -> closed once its echo is in; ``connect_ns`` times the
  handshake, and a round still unfinished when the next starts is a timeout.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import select
import socket
import struct
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # cloudbench.workers.echo_connections (the controller's tests)
    from .echo_protocol import (
        ACK,
        FLAG_CONN_LOST,
        FLAG_SEND_FAILED,
        FLAG_TIMEOUT,
        FLAG_WARMUP,
        FRAME_HEADER,
        HELLO,
        HELLO_ACK_MAGIC,
        HELLO_MAGIC,
        INF,
        ROUND_FIELD,
        SO_TIMESTAMPNS,
        Config,
        PeerSpec,
        RecordWriter,
        clock_offset,
        family,
        log,
    )
else:  # a script on a host: the worker's files side by side in one directory
    from echo_protocol import (
        ACK,
        FLAG_CONN_LOST,
        FLAG_SEND_FAILED,
        FLAG_TIMEOUT,
        FLAG_WARMUP,
        FRAME_HEADER,
        HELLO,
        HELLO_ACK_MAGIC,
        HELLO_MAGIC,
        INF,
        ROUND_FIELD,
        SO_TIMESTAMPNS,
        Config,
        PeerSpec,
        RecordWriter,
        clock_offset,
        family,
        log,
    )

STATE_IDLE = 0
STATE_CONNECTING = 1
STATE_CONNECTED = 2
STATE_GREETING = 3  # per_round: hello sent, waiting for the server's ACK

MAX_OUTBOUND = 256 * 1024  # bytes queued in user space per peer before a row is send_failed
CONNECT_RETRY_S = 0.1  # between connect attempts while the connect phase lasts
RECONNECT_S = 1.0  # between reconnect attempts while rounds run
SWEEP_GRACE_NS = 20_000_000  # a frame is swept as a timeout this long after its deadline
ATTEMPT_S = 3.0  # one connect attempt (TCP connect) may take this long at most

_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux
_TIMESPEC32 = struct.Struct("@ii")  # and on 32-bit
_CMSG_SPACE = 64  # room for one timestamp control message
_READ_EVENTS = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLERR

IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)  # Linux 4.2+


def new_frame(cfg: Config) -> bytearray:
    """The sender's frame: header (round 0, host id, payload length) and a random payload."""
    frame = bytearray(FRAME_HEADER.size + cfg.payload)
    FRAME_HEADER.pack_into(frame, 0, 0, cfg.host_id, cfg.payload)
    frame[FRAME_HEADER.size:] = os.urandom(cfg.payload)
    return frame


class Peer(object):
    """One peer's connection state: its socket, the frames in flight, partial reads and writes."""

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
        self.state = STATE_IDLE
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
        """The peer as error messages name it."""
        return "peer %s (id %d, %s:%d)" % (self.spec.name, self.id, self.spec.addr,
                                           self.spec.port)


class Connections(object):
    """The peers' sockets in one epoll set, and what both connection modes do with them.

    The sender's loop calls :meth:`send_round` when a round is due, :meth:`upkeep`
    when :attr:`next_maint` has come, :meth:`sweep` for unanswered frames and
    :meth:`dispatch` with what epoll returned. A reply's receive time is the
    kernel's receive timestamp (see ``echo.py``), so it does not depend on when
    this loop gets to read it. ``errors`` is the tally the sender reports (shared
    by the connect phase's connections and the rounds' ones).
    """

    drop_when_answered = False  # close a connection once no frame of it is in flight

    def __init__(self, cfg: Config, writer: RecordWriter, ep: select.epoll, wake_r: int,
                 frame: bytearray, errors: dict[str, int]) -> None:
        self.cfg = cfg
        self.w = writer
        self.ep = ep
        self.wake_r = wake_r  # the loop's signal wakeup pipe, in the epoll set: drained here
        self.frame = frame  # its round field is packed anew for every send
        self.frame_view = memoryview(frame)
        self.fs = len(frame)
        # The self-loop goes last: its reply comes back fastest and would otherwise
        # compete for the CPU with the sends to the other peers.
        specs = sorted(cfg.peers, key=lambda p: p.id == cfg.host_id)
        self.peers = [Peer(p, max(65536, 2 * self.fs)) for p in specs]
        self.by_fd: dict[int, Peer] = {}
        self.errors = errors
        self.kernel_stamps = cfg.rx_stamp == "kernel"
        self.n_kernel = 0  # echoes stamped by the kernel
        self.n_user = 0  # echoes stamped when epoll returned
        self.offset = clock_offset()  # CLOCK_REALTIME - CLOCK_MONOTONIC, re-read every round
        self.timeout_ns = int(cfg.timeout_s * 1e9)
        self.retry_ns = int(RECONNECT_S * 1e9)
        self.warm_end = 0
        self.rounds_sent = 0  # set by the loop: rounds handed to send_round
        self.next_maint = 0  # when upkeep is due next
        self.connects = 0  # per_round connections whose handshake completed
        token = cfg.token
        self.hello = HELLO.pack(HELLO_MAGIC, cfg.host_id, len(token)) + token

    # ---- what the loop calls

    def start(self, t0: int, warm_end: int) -> None:
        """Round 0 is sent at ``t0``; rows sent before ``warm_end`` are warm-up rows."""
        self.warm_end = warm_end
        for p in self.peers:
            p.next_attempt = t0 + self.retry_ns
        self.next_maint = t0 + self.retry_ns

    def send_round(self, rnd: int) -> None:
        """Send round ``rnd`` to every peer; the caller blocks in epoll right after."""
        raise NotImplementedError

    def upkeep(self, now: int, sending: bool) -> None:
        """What :attr:`next_maint` was set for (``sending``: rounds remain to be sent)."""
        raise NotImplementedError

    def on_writable(self, p: Peer, now: int) -> None:
        """Epoll says ``p``'s socket is writable (or failed)."""
        raise NotImplementedError

    def on_greeting(self, p: Peer, now: int) -> None:
        """Epoll says the server answered ``p``'s hello."""
        raise NotImplementedError

    def dispatch(self, events: list[tuple[int, int]]) -> None:
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
            if ev & _READ_EVENTS and p.state == STATE_CONNECTED:
                self.on_readable(p, ts, offset)
            elif ev & _READ_EVENTS and p.state == STATE_GREETING:
                self.on_greeting(p, ts)
            if ev & _WRITE_EVENTS and by_fd.get(fd) is p:
                self.on_writable(p, ts)

    def outstanding(self) -> int:
        """Frames in flight, and per_round connections being set up, that have no row yet."""
        return sum(len(p.q) - p.expired + (p.pending >= 0) for p in self.peers)

    def error(self, msg: str) -> None:
        """Count ``msg`` in the error tally."""
        self.errors[msg] = self.errors.get(msg, 0) + 1

    def give_up(self) -> None:
        """The run stops early: what is still in flight becomes timeout rows (conn_lost),
        so that every round handed to :meth:`send_round` has a row for every peer."""
        for p in self.peers:
            self.fail_inflight(p)

    def close(self) -> None:
        """Close every connection (frames still in flight get no row)."""
        for p in self.peers:
            self.drop(p)

    # ---- sockets

    def watch(self, p: Peer) -> None:
        """Make epoll watch what the peer's state needs: connect done, echoes, room to send."""
        m = 0
        if p.state == STATE_CONNECTING:
            m = select.EPOLLOUT
        elif p.state in (STATE_CONNECTED, STATE_GREETING):
            m = select.EPOLLIN | (select.EPOLLOUT if p.out else 0)
        if m == p.mask or p.sock is None:
            return
        fd = p.sock.fileno()
        if not p.mask:
            self.ep.register(fd, m)
        else:
            self.ep.modify(fd, m)
        p.mask = m

    def drop(self, p: Peer) -> None:
        """Forget the peer's socket and close it."""
        sock = p.sock
        p.sock = None
        p.state = STATE_IDLE
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

    def broken(self, p: Peer, now: int, why: str) -> None:
        """The connection broke: rows for what was in flight; retry later."""
        self.fail_inflight(p)
        self.drop(p)
        p.next_attempt = now + self.retry_ns
        self.next_maint = min(self.next_maint, p.next_attempt)
        self.error("%s: connection lost: %s" % (p.label(), why))
        log("%s: connection lost after round %d: %s" % (p.label(), self.rounds_sent - 1, why))

    def flush_out(self, p: Peer) -> None:
        """Send what the socket will take of ``p.out`` now; watch for room for the rest."""
        sock = p.sock
        assert sock is not None
        try:
            n = sock.send(p.out, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as e:
            self.broken(p, time.monotonic_ns(), str(e))
            return
        del p.out[:n]
        self.watch(p)

    # ---- rows

    def row_now(self, p: Peer, rnd: int, flags: int, t: int) -> None:
        """The row of a frame that never went out (``flags`` say why), sent at ``t``."""
        self.w.add(rnd, p.id, flags | (FLAG_WARMUP if t < self.warm_end else 0), t, 0)

    def fail_inflight(self, p: Peer, flags: int = FLAG_TIMEOUT | FLAG_CONN_LOST) -> None:
        """Frames in flight become rows with ``flags`` (a broken connection: conn_lost)."""
        add = self.w.add
        warm_end = self.warm_end
        q = p.q
        for i in range(p.expired, len(q)):  # the first p.expired are timeout rows already
            rnd, st = q[i]
            add(rnd, p.id, flags | (FLAG_WARMUP if st < warm_end else 0), st, 0, p.connect_ns)
        q.clear()
        p.expired = 0

    def on_readable(self, p: Peer, ts: int, offset: int) -> None:
        """Read what the peer echoed; ``ts`` is when epoll returned, ``offset`` is
        CLOCK_REALTIME - CLOCK_MONOTONIC (see ``clock_offset``)."""
        sock = p.sock
        if sock is None or p.state != STATE_CONNECTED:
            return
        have = p.have
        try:
            n, anc, _flags, _addr = sock.recvmsg_into([p.rview[have:]], _CMSG_SPACE,
                                                      socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.broken(p, ts, str(e))
            return
        if not n:
            self.broken(p, ts, "closed by peer" + ("" if self.rounds_sent > 1 else
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
            have, why = self.consume(p, have, stamp, ts)
            if why:
                p.have = 0
                self.broken(p, ts, why)
                return
        p.have = have
        if self.drop_when_answered and not p.q:
            self.drop(p)  # the round's echo is in: this connection has done its work

    def consume(self, p: Peer, have: int, stamp: int, ts: int) -> tuple[int, str]:
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

    def sweep(self, now: int) -> int:
        """Record timeouts for frames unanswered for timeout_s; return the next deadline.

        A frame is swept only SWEEP_GRACE_NS after its deadline: a reply that arrived
        in time but is not read yet is never recorded as a timeout before it is matched.
        """
        tmo = self.timeout_ns + SWEEP_GRACE_NS
        warm_end = self.warm_end
        add = self.w.add
        nxt = INF
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


class PersistentConnections(Connections):
    """One connection per peer, made before round 0 and remade when it breaks.

    Every mode's connect phase uses these: per_round checks with them that every
    server is up, then closes them.
    """

    def __init__(self, cfg: Config, writer: RecordWriter, ep: select.epoll, wake_r: int,
                 frame: bytearray, errors: dict[str, int]) -> None:
        Connections.__init__(self, cfg, writer, ep, wake_r, frame, errors)
        self.retry_ns = int(CONNECT_RETRY_S * 1e9)  # RECONNECT_S once the connect phase is over

    def connect_all(self) -> None:
        """Connect to every peer, retrying until all are up or connect_timeout_s is over."""
        mono = time.monotonic_ns
        deadline = mono() + int(self.cfg.connect_timeout_s * 1e9)
        while True:
            now = mono()
            nxt = self.maintain(now)
            if all(p.state == STATE_CONNECTED for p in self.peers) or now >= deadline:
                break
            wake = min(nxt, deadline)
            self.dispatch(self.ep.poll(max(wake - now, 0) / 1e9))
        for p in self.peers:
            if p.state != STATE_CONNECTED:
                self.error(p.last_error or "%s: not connected" % p.label())
                if p.state == STATE_CONNECTING:
                    self.drop(p)
        self.retry_ns = int(RECONNECT_S * 1e9)

    def upkeep(self, now: int, sending: bool) -> None:
        """Reconnect broken connections while rounds remain; none once every round is sent."""
        if sending:
            self.maintain(now)
        else:
            self.next_maint = INF

    def maintain(self, now: int) -> int:
        """Start due connect attempts, abandon stale ones; return when to look again."""
        nxt = INF
        for p in self.peers:
            if p.state == STATE_IDLE:
                if now >= p.next_attempt:
                    self.attempt(p, now)
                if p.state == STATE_IDLE:
                    nxt = min(nxt, p.next_attempt)
            if p.state == STATE_CONNECTING:
                if now >= p.attempt_deadline:
                    self.drop(p)
                    self.attempt_failed(p, now, "timed out")
                    nxt = min(nxt, p.next_attempt)
                else:
                    nxt = min(nxt, p.attempt_deadline)
        self.next_maint = nxt
        return nxt

    def attempt(self, p: Peer, now: int) -> None:
        """Start connecting to ``p`` (non-blocking)."""
        cfg = self.cfg
        s = socket.socket(family(p.spec.addr), socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.bind((cfg.listen, 0))  # leave from the experiment address, whatever the routes
            s.setblocking(False)
            err = s.connect_ex((p.spec.addr, p.spec.port))
        except OSError as e:
            s.close()
            self.attempt_failed(p, now, str(e))
            return
        p.sock = s
        self.by_fd[s.fileno()] = p
        if err == 0:
            self.connected(p)
        elif err in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            p.state = STATE_CONNECTING
            p.attempt_deadline = now + int(min(ATTEMPT_S, max(cfg.connect_timeout_s, 0.1)) * 1e9)
            self.next_maint = min(self.next_maint, p.attempt_deadline)
            self.watch(p)
        else:
            self.drop(p)
            self.attempt_failed(p, now, os.strerror(err))

    def attempt_failed(self, p: Peer, now: int, why: str) -> None:
        """The attempt failed: try again after retry_ns."""
        p.state = STATE_IDLE
        p.next_attempt = now + self.retry_ns
        p.last_error = "%s: connect failed: %s" % (p.label(), why)
        self.next_maint = min(self.next_maint, p.next_attempt)

    def connected(self, p: Peer) -> None:
        """Handshake done: turn on kernel receive stamps, send the hello."""
        sock = p.sock
        assert sock is not None
        if self.kernel_stamps:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError as e:
                self.error("no kernel receive timestamps, echoes stamped in user space: %s" % e)
        p.state = STATE_CONNECTED
        p.out = bytearray(self.hello)  # p.have is 0: drop reset it
        p.last_error = ""
        self.flush_out(p)

    def on_writable(self, p: Peer, now: int) -> None:
        """A connect finished (or failed), or there is room for queued output."""
        sock = p.sock
        if sock is None:
            return
        if p.state == STATE_CONNECTING:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.drop(p)
                self.attempt_failed(p, now, os.strerror(err))
            else:
                self.connected(p)
        elif p.state in (STATE_CONNECTED, STATE_GREETING) and p.out:
            self.flush_out(p)

    def on_greeting(self, p: Peer, now: int) -> None:
        """Persistent connections send the hello that wants no ACK: never greeting."""

    def send_round(self, rnd: int) -> None:
        """Send round ``rnd`` to every peer; the caller blocks in epoll right after."""
        mono = time.monotonic_ns
        frame = self.frame
        ROUND_FIELD.pack_into(frame, 0, rnd)
        dontwait = socket.MSG_DONTWAIT
        for p in self.peers:
            sock = p.sock
            if p.state != STATE_CONNECTED or sock is None or p.out:
                self.send_slow(p, rnd)
                continue
            t = mono()
            p.q.append((rnd, t))  # a failed send still gets its row (conn_lost)
            try:
                n = sock.send(frame, dontwait)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self.broken(p, t, str(e))
                continue
            if n < self.fs:
                p.out += self.frame_view[n:]
                self.watch(p)

    def send_slow(self, p: Peer, rnd: int) -> None:
        """A peer that is not connected, or whose earlier frames still wait to go out."""
        t = time.monotonic_ns()
        if p.state != STATE_CONNECTED or p.sock is None:
            self.row_now(p, rnd, FLAG_TIMEOUT | FLAG_CONN_LOST, t)
        elif len(p.out) + self.fs > MAX_OUTBOUND:
            self.row_now(p, rnd, FLAG_TIMEOUT | FLAG_SEND_FAILED, t)
        else:
            p.q.append((rnd, t))
            p.out += self.frame  # goes out when the socket is writable again


class RoundConnections(Connections):
    """A new connection for every round and peer (``connection: "per_round"``).

    From the round's send time: connect() until the socket is writable (its time is
    the record's ``connect_ns``), the hello that asks for an ACK, then the frame, whose
    echo is the RTT; the connection is closed once the echo is in. A round still
    unfinished when the next one starts is abandoned (a timeout row).
    """

    drop_when_answered = True

    def __init__(self, cfg: Config, writer: RecordWriter, ep: select.epoll, wake_r: int,
                 frame: bytearray, errors: dict[str, int]) -> None:
        Connections.__init__(self, cfg, writer, ep, wake_r, frame, errors)
        token = cfg.token
        self.hello_ack = HELLO.pack(HELLO_ACK_MAGIC, cfg.host_id, len(token)) + token

    def send_round(self, rnd: int) -> None:
        """Round ``rnd``'s own connection to every peer (each row comes when it ends)."""
        for p in self.peers:
            self.open_round(p, rnd)

    def upkeep(self, now: int, sending: bool) -> None:
        """Connections whose handshake or hello outlived the timeout become timeout rows."""
        nxt = INF
        for p in self.peers:
            if p.pending < 0:
                continue
            if now >= p.attempt_deadline:
                self.drop(p)
                self.round_failed(p, "connect or hello not done within the timeout")
            else:
                nxt = min(nxt, p.attempt_deadline)
        self.next_maint = nxt

    def open_round(self, p: Peer, rnd: int) -> None:
        """Start round ``rnd``'s own connection to ``p`` (its row comes when it ends)."""
        if p.pending >= 0 or p.sock is not None:
            self.abandon(p)
        t = time.monotonic_ns()
        p.pending = rnd
        p.conn_start = t
        p.connect_ns = -1
        p.attempt_deadline = t + self.timeout_ns
        self.next_maint = min(self.next_maint, p.attempt_deadline)
        s = socket.socket(family(p.spec.addr), socket.SOCK_STREAM)
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
            self.round_failed(p, "connect failed: %s" % e)
            return
        p.sock = s
        self.by_fd[s.fileno()] = p
        if err == 0:
            self.round_connected(p, time.monotonic_ns())
        elif err in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
            p.state = STATE_CONNECTING
            self.watch(p)
        else:
            self.drop(p)
            self.round_failed(p, "connect failed: %s" % os.strerror(err))

    def round_connected(self, p: Peer, now: int) -> None:
        """Handshake done: record its time, send the hello that asks for an ACK."""
        p.connect_ns = now - p.conn_start
        self.connects += 1
        p.state = STATE_GREETING
        if self.kernel_stamps:
            with contextlib.suppress(OSError):
                assert p.sock is not None
                p.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        p.out = bytearray(self.hello_ack)
        self.flush_out(p)

    def on_writable(self, p: Peer, now: int) -> None:
        """The round's connect finished (or failed), or there is room for queued output."""
        sock = p.sock
        if sock is None:
            return
        if p.state == STATE_CONNECTING:
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self.drop(p)
                self.round_failed(p, "connect failed: %s" % os.strerror(err))
            else:
                self.round_connected(p, now)
        elif p.state in (STATE_CONNECTED, STATE_GREETING) and p.out:
            self.flush_out(p)

    def on_greeting(self, p: Peer, now: int) -> None:
        """The server accepted the hello: send the round's frame, timed from now."""
        sock = p.sock
        assert sock is not None
        try:
            got = sock.recv(16, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self.broken(p, now, str(e))
            return
        if got != ACK:
            self.broken(p, now, "closed during the hello (wrong token?)" if not got
                        else "unexpected reply %r to the hello" % got[:16])
            return
        ROUND_FIELD.pack_into(self.frame, 0, p.pending)
        p.state = STATE_CONNECTED
        p.q.append((p.pending, time.monotonic_ns()))
        p.pending = -1
        p.out += self.frame
        self.flush_out(p)

    def broken(self, p: Peer, now: int, why: str) -> None:
        """The connection broke: before its frame went out a timeout row for the round,
        after it as on a persistent connection."""
        if p.pending < 0:
            Connections.broken(self, p, now, why)
            return
        self.fail_inflight(p)
        self.drop(p)
        self.round_failed(p, "connection lost: %s" % why)

    def give_up(self) -> None:
        """As :meth:`Connections.give_up`, and rounds whose connection is still being set up."""
        for p in self.peers:
            if p.pending >= 0:
                self.round_failed(p, "the run stopped before the round finished")
        Connections.give_up(self)

    def round_failed(self, p: Peer, why: str) -> None:
        """The pending round got no frame out: a timeout row (its handshake time if known)."""
        rnd, st = p.pending, p.conn_start
        p.pending = -1
        flags = FLAG_TIMEOUT | FLAG_CONN_LOST | (FLAG_WARMUP if st < self.warm_end else 0)
        self.w.add(rnd, p.id, flags, st, 0, p.connect_ns)
        self.error("%s: %s" % (p.label(), why))

    def abandon(self, p: Peer) -> None:
        """The next round is due and this one is unfinished: it is a timeout."""
        self.drop(p)
        if p.pending >= 0:
            self.round_failed(p, "round not finished when the next one started")
        self.fail_inflight(p, FLAG_TIMEOUT)
