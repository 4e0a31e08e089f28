"""The echo RTT worker (cloudbench/workers/echo.py) and its file reader, end to end.

Hosts are loopback addresses 127.0.0.x with their own ports: no root, no namespaces.
Every process a test starts is killed by PID in a finally block.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cloudbench.errors import ResultError
from cloudbench.runner import worker_bundle, worker_versions
from cloudbench.workers import echo as worker
from cloudbench.workers import echo_connections as connections
from cloudbench.workers import echo_protocol as protocol
from cloudbench.workloads.echo.controller import EchoKind
from cloudbench.workloads.echo.reader import (
    FLAG_CONN_LOST,
    FLAG_SEND_FAILED,
    FLAG_TIMEOUT,
    FLAG_WARMUP,
    MAGIC,
    read_echo_file,
)

WORKER = Path(worker.__file__).resolve()
TOKEN = "0123456789abcdef0123456789abcdef"
RECORD = struct.Struct("<IHBxqq")  # schema 1's record: the reader still reads it
RECORD2 = struct.Struct("<IHBxqqq")  # schema 2 (worker 3): connect_ns added


def free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def wait_received(addr: str, port: int, rounds: int, sender: str | None = None, seconds: float = 60,
                  payload: int | None = None) -> None:
    """Until the echo server at ``addr:port`` has received ``rounds`` rounds' frames (at least
    ``payload`` bytes each, host_config's by default; from ``sender``'s address only, if given),
    as the kernel counts them (`ss`: bytes_received). A test that acts mid-run waits for the
    rounds it needs this way, not for a fixed time: beside a busy core a worker took 0.8-4 s to
    start its rounds."""
    want = rounds * (payload if payload is not None else host_config("", 0, "", 0, [])["payload"])
    dst = ["dst", sender] if sender else []
    deadline = time.monotonic() + seconds
    while True:
        out = subprocess.run(["ss", "-tinH", "state", "established", "src", f"{addr}:{port}", *dst],
                             capture_output=True, text=True, check=True).stdout
        got = sum(int(n) for n in re.findall(r"bytes_received:(\d+)", out))
        if got >= want:
            return
        assert time.monotonic() < deadline, f"{got} of {want} bytes reached {addr}:{port} in {seconds:g} s"
        time.sleep(0.05)  # each `ss` is a process on two shared cores: a round is 20 ms at 50/s


def host_config(name: str, host_id: int, addr: str, port: int, peers: list[dict[str, Any]],
                **overrides: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "schema": protocol.SCHEMA, "host": name, "host_id": host_id, "listen": addr, "port": port,
        "token": TOKEN, "peers": peers, "rate": 50.0, "payload": 256, "duration_s": 1.0,
        "warmup_s": 0.2, "timeout_s": 0.5, "connect_timeout_s": 3.0, "linger_s": 1.0,
    }
    cfg.update(overrides)
    return cfg


def mesh(n: int, self_loop: bool = True, **overrides: Any) -> list[dict[str, Any]]:
    hosts = [(f"h{i}", f"127.0.0.{i + 2}") for i in range(n)]
    ports = [free_port(a) for _, a in hosts]
    peers = [{"id": i, "name": nm, "addr": a, "port": ports[i]} for i, (nm, a) in enumerate(hosts)]
    return [
        host_config(nm, i, a, ports[i], [p for p in peers if self_loop or p["id"] != i],
                    **overrides)
        for i, (nm, a) in enumerate(hosts)
    ]


@contextlib.contextmanager
def started(cmds: list[list[str]], **kw: Any) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        for cmd in cmds:
            procs.append(subprocess.Popen(cmd, text=True, **kw))
        yield procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@contextlib.contextmanager
def serving(tmp_path: Path, addr: str, port: int, **kw: Any) -> Iterator[subprocess.Popen[str]]:
    """A standalone `echo.py serve` (host h1, no peers) that has said READY."""
    cfg_path = tmp_path / "h1.json"
    cfg_path.write_text(json.dumps(host_config("h1", 1, addr, port, [], linger_s=0.0,
                                               connect_timeout_s=5.0)))
    cmd = [sys.executable, str(WORKER), "serve", str(cfg_path)]
    with started([cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kw) as [server]:
        assert server.stdout is not None and server.stdin is not None
        assert server.stdout.readline() == "READY\n"
        yield server


def run_workers(tmp_path: Path, configs: list[dict[str, Any]], limit_s: float = 15.0,
                python: str = sys.executable, worker: Path = WORKER) -> list[tuple[dict[str, Any], Path, int]]:
    """Run `echo.py run` for every config at once; (summary, out file, exit code) each."""
    cmds = []
    outs = []
    for cfg in configs:
        cfg_path = tmp_path / f"{cfg['host']}.json"
        cfg_path.write_text(json.dumps(cfg))
        out = tmp_path / f"{cfg['host']}.bin"
        outs.append(out)
        cmds.append([python, str(worker), "run", str(cfg_path), str(out)])
    results = []
    with started(cmds, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as procs:
        deadline = time.monotonic() + limit_s
        for proc, out in zip(procs, outs, strict=True):
            stdout, stderr = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
            lines = stdout.strip().splitlines()
            assert len(lines) == 1, f"expected one JSON line, got {stdout!r}; stderr: {stderr}"
            results.append((json.loads(lines[0]), out, proc.returncode))
    return results


def hello(token: str) -> bytes:
    """A client's hello as host id 9."""
    raw = token.encode()
    return struct.pack(">8sHH", b"CBEHELO1", 9, len(raw)) + raw


def echo_of(sock: socket.socket, greeting: bytes, frame: bytes) -> bytes:
    """Send the hello and one frame; what comes back, up to the frame's length."""
    sock.sendall(greeting + frame)
    echoed = b""
    while len(echoed) < len(frame):
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection"
        echoed += chunk
    return echoed


def rtt_us(rec: np.ndarray) -> np.ndarray:
    return (rec["recv_ns"].astype(np.int64) - rec["send_ns"].astype(np.int64)) / 1000.0


def assert_complete(rec: np.ndarray, rounds: int, peer_ids: list[int]) -> None:
    """Every (round, peer) is there exactly once: never a gap, never a duplicate."""
    assert len(rec) == rounds * len(peer_ids)
    keys = rec["round"].astype(np.int64) * 65536 + rec["peer"]
    assert len(np.unique(keys)) == len(rec)
    assert set(rec["round"].tolist()) == set(range(rounds))
    assert set(rec["peer"].tolist()) == set(peer_ids)


# --------------------------------------------------------------------------- worker


def test_three_hosts_every_row_present_with_self_loop(tmp_path: Path) -> None:
    configs = mesh(3)
    results = run_workers(tmp_path, configs)
    rounds = 60  # (1.0 s + 0.2 s warm-up) at 50/s
    for cfg, (summary, out, code) in zip(configs, results, strict=True):
        assert code == 0, summary
        assert summary["schema"] == 2 and summary["worker_version"] == worker.WORKER_VERSION == "4"
        assert summary["host"] == cfg["host"]
        assert summary["errors"] == []
        assert summary["rounds"] == rounds
        assert summary["rows"] == rounds * 3
        assert summary["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
        assert summary["cpu_s"] > 0 and summary["wall_s"] > 1.0
        header, rec = read_echo_file(out)
        assert header["host"] == cfg["host"] and header["host_id"] == cfg["host_id"]
        assert header["clock"] == "CLOCK_MONOTONIC" and header["truncated"] is False
        assert header["peers"] == cfg["peers"] and header["rx_stamp"] == "kernel"
        assert_complete(rec, rounds, [0, 1, 2])
        # A loaded CI machine may lose a reply deadline now and then, never many.
        timeouts = (rec["flags"] & FLAG_TIMEOUT) != 0
        assert timeouts.sum() == summary["timeouts"] <= 3
        # Every echo that came back in time was stamped by the kernel, but for the
        # first ones if the kernel was slow to turn its receive timestamps on.
        assert summary["kernel_stamps"] + summary["user_stamps"] == len(rec) - summary["timeouts"]
        assert summary["user_stamps"] <= 3
        assert not (rec["flags"] & (FLAG_CONN_LOST | FLAG_SEND_FAILED)).any()
        ok = rec[~timeouts]
        rtt = rtt_us(ok)
        assert (rtt > 0).all() and (rtt < 500_000).all()
        assert np.median(rtt) < 50_000
        own = ok[ok["peer"] == cfg["host_id"]]
        assert len(own) >= rounds - 3  # the self-loop went through a real socket
        # Rounds are scheduled from t0 without drift, so sends keep to the plan.
        first = rec[rec["peer"] == rec["peer"][0]]
        planned = header["t0_ns"] + (first["round"].astype(np.int64) * 20_000_000)
        assert np.median(first["send_ns"] - planned) < 5_000_000


def test_warmup_rows_are_flagged_not_dropped(tmp_path: Path) -> None:
    configs = mesh(2, warmup_s=0.3, duration_s=0.5, rate=40.0)
    results = run_workers(tmp_path, configs)
    for _summary, out, code in results:
        assert code == 0
        header, rec = read_echo_file(out)
        warm_end = header["t0_ns"] + int(0.3e9)
        warm = (rec["flags"] & FLAG_WARMUP) != 0
        assert np.array_equal(warm, rec["send_ns"] < warm_end)
        assert warm.sum() == 12 * 2  # rounds 0..11 of 32, to both peers
        assert_complete(rec, 32, [0, 1])


def test_self_loop_off_has_no_self_rows(tmp_path: Path) -> None:
    configs = mesh(2, self_loop=False)
    results = run_workers(tmp_path, configs)
    for cfg, (summary, out, code) in zip(configs, results, strict=True):
        assert code == 0, summary
        _, rec = read_echo_file(out)
        assert cfg["host_id"] not in rec["peer"].tolist()
        assert_complete(rec, 60, [1 - cfg["host_id"]])


def test_user_stamps_when_asked(tmp_path: Path) -> None:
    configs = mesh(2, rx_stamp="user", duration_s=0.4, warmup_s=0.0)
    for summary, out, code in run_workers(tmp_path, configs):
        assert code == 0 and summary["errors"] == [], summary
        header, rec = read_echo_file(out)
        assert header["rx_stamp"] == "user"
        assert summary["kernel_stamps"] == 0
        assert summary["user_stamps"] == len(rec) - summary["timeouts"] > 0


def wait_for_kernel_stamps(listener: socket.socket) -> None:
    """The kernel turns receive timestamps on a moment after the first socket asks
    (a deferred static-key switch); wait until a probe connection gets one."""
    deadline = time.monotonic() + 5.0
    with socket.create_connection(listener.getsockname()) as probe:
        probe.setsockopt(socket.SOL_SOCKET, protocol.SO_TIMESTAMPNS, 1)
        far, _ = listener.accept()
        with far:
            while time.monotonic() < deadline:
                far.sendall(b"?")
                _n, anc, _flags, _addr = probe.recvmsg_into([bytearray(16)], 64)
                if anc:
                    return
                time.sleep(0.01)
    raise AssertionError("the kernel never stamped a probe")


@contextlib.contextmanager
def sender_with_echo_pair(tmp_path: Path) -> Iterator[tuple[worker.Sender, connections.Peer,
                                                            socket.socket]]:
    """A Sender whose one peer is connected to a plain socket the test answers from."""
    cfg = protocol.Config(host_config("h0", 0, "127.0.0.2", 1, [
        {"id": 1, "name": "h1", "addr": "127.0.0.3", "port": 1}], payload=16))
    with (tmp_path / "o.bin").open("wb", buffering=0) as f, \
            socket.create_server(("127.0.0.3", 0)) as listener:
        sender = worker.Sender(cfg, protocol.RecordWriter(f))
        try:
            conns = sender.connections
            assert isinstance(conns, connections.PersistentConnections)
            p = conns.peers[0]
            p.sock = socket.create_connection(listener.getsockname())
            conns.by_fd[p.sock.fileno()] = p
            far, _ = listener.accept()
            with far:
                conns.connected(p)  # turns on SO_TIMESTAMPNS: the kernel stamps from now on
                wait_for_kernel_stamps(listener)
                yield sender, p, far
        finally:
            sender.close()


def test_echo_is_stamped_when_it_arrived_not_when_it_is_read(tmp_path: Path) -> None:
    with sender_with_echo_pair(tmp_path) as (sender, p, far):
        frame = bytes(sender.frame)
        send_ns = time.monotonic_ns()
        p.q.append((0, send_ns))
        far.sendall(frame)  # the echo arrives now ...
        arrived = time.monotonic_ns()
        time.sleep(0.2)  # ... and is read 200 ms later
        sender.connections.on_readable(p, time.monotonic_ns(), protocol.clock_offset())
        ts = time.monotonic_ns()
        assert sender.w.n == 1 and sender.connections.n_kernel == 1 and sender.connections.n_user == 0
        _rnd, _peer, flags, st, recv_ns, _c = RECORD2.unpack_from(sender.w.buf, 0)
        assert flags == 0 and st == send_ns
        assert send_ns <= recv_ns <= arrived + 20_000_000 < ts  # not when it was read


def test_a_stamp_outside_send_to_now_falls_back_to_the_read_time(tmp_path: Path) -> None:
    """A wall clock that stepped between arrival and read must not make up an RTT."""
    with sender_with_echo_pair(tmp_path) as (sender, p, far):
        frame = bytearray(sender.frame)
        for rnd, step_s in ((0, -10), (1, +10)):  # stepped forward, then back, by 10 s
            struct.pack_into(">I", frame, 0, rnd)
            send_ns = time.monotonic_ns()
            p.q.append((rnd, send_ns))
            far.sendall(frame)
            time.sleep(0.05)
            ts = time.monotonic_ns()
            sender.connections.on_readable(p, ts, protocol.clock_offset() + step_s * 1_000_000_000)
            _rnd, _peer, flags, st, recv_ns, _c = RECORD2.unpack_from(sender.w.buf, rnd * RECORD2.size)
            assert (_rnd, flags, st, recv_ns) == (rnd, 0, send_ns, ts)
        assert sender.connections.n_user == 2 and sender.connections.n_kernel == 0


def test_silent_peer_gives_timeout_rows_for_each_round(tmp_path: Path) -> None:
    addr = "127.0.0.2"
    port = free_port(addr)
    with socket.socket() as silent:  # accepts (in the kernel backlog), never echoes
        silent.bind(("127.0.0.5", 0))
        silent.listen(4)
        silent_port = silent.getsockname()[1]
        peers = [{"id": 7, "name": "silent", "addr": "127.0.0.5", "port": silent_port}]
        cfg = host_config("h0", 0, addr, port, peers, duration_s=0.5, warmup_s=0.0,
                          timeout_s=0.2, rate=20.0)
        [(summary, out, code)] = run_workers(tmp_path, [cfg])
    assert code == 0, summary
    _, rec = read_echo_file(out)
    assert_complete(rec, 10, [7])
    assert ((rec["flags"] & FLAG_TIMEOUT) != 0).all()
    assert not (rec["flags"] & FLAG_CONN_LOST).any()
    assert (rec["recv_ns"] == 0).all()
    assert summary["timeouts"] == 10


def test_unreachable_peer_gives_conn_lost_rows_for_every_round(tmp_path: Path) -> None:
    addr = "127.0.0.2"
    port = free_port(addr)
    dead_port = free_port("127.0.0.6")  # nothing listens there: connection refused
    peers = [{"id": 0, "name": "h0", "addr": addr, "port": port},
             {"id": 3, "name": "gone", "addr": "127.0.0.6", "port": dead_port}]
    cfg = host_config("h0", 0, addr, port, peers, duration_s=0.5, warmup_s=0.1,
                      connect_timeout_s=0.5, rate=20.0)
    [(summary, out, code)] = run_workers(tmp_path, [cfg])
    assert code == 0, summary
    _, rec = read_echo_file(out)
    assert_complete(rec, 12, [0, 3])
    gone = rec[rec["peer"] == 3]
    assert (gone["flags"] & (FLAG_TIMEOUT | FLAG_CONN_LOST) == FLAG_TIMEOUT | FLAG_CONN_LOST).all()
    mine = rec[rec["peer"] == 0]
    assert ((mine["flags"] & FLAG_TIMEOUT) == 0).sum() >= 10
    assert any("gone" in e and "connect failed" in e for e in summary["errors"])


def test_broken_connection_gives_conn_lost_rows_for_the_remaining_rounds(tmp_path: Path) -> None:
    configs = mesh(2, self_loop=False, duration_s=1.5, warmup_s=0.0, rate=40.0)
    sender_cfg, server_cfg = configs
    server_path = tmp_path / "h1.json"
    server_path.write_text(json.dumps(server_cfg))
    serve = [sys.executable, str(WORKER), "serve", str(server_path)]
    with started([serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE) as [server]:
        assert server.stdout is not None
        assert server.stdout.readline() == "READY\n"
        sender_path = tmp_path / "h0.json"
        sender_path.write_text(json.dumps(sender_cfg))
        out = tmp_path / "h0.bin"
        run = [sys.executable, str(WORKER), "run", str(sender_path), str(out)]
        with started([run], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as [sender]:
            wait_received(server_cfg["listen"], server_cfg["port"], 12)
            server.kill()  # the peer host dies mid-run
            stdout, _ = sender.communicate(timeout=10)
    assert sender.returncode == 0
    summary = json.loads(stdout)
    _, rec = read_echo_file(out)
    assert_complete(rec, 60, [1])
    lost = (rec["flags"] & FLAG_CONN_LOST) != 0
    first_lost = int(np.argmax(lost))
    assert 5 < first_lost < 55
    assert lost[first_lost:].all() and not lost[:first_lost].any()
    assert ((rec["flags"][:first_lost] & FLAG_TIMEOUT) == 0).sum() >= first_lost - 2
    assert any("connection lost" in e for e in summary["errors"])


def test_sender_reconnects_to_a_restarted_peer(tmp_path: Path) -> None:
    configs = mesh(2, self_loop=False, duration_s=2.6, warmup_s=0.0, rate=40.0)
    sender_cfg, server_cfg = configs
    server_path = tmp_path / "h1.json"
    server_path.write_text(json.dumps(server_cfg))
    sender_path = tmp_path / "h0.json"
    sender_path.write_text(json.dumps(sender_cfg))
    out = tmp_path / "h0.bin"
    serve = [sys.executable, str(WORKER), "serve", str(server_path)]
    run = [sys.executable, str(WORKER), "run", str(sender_path), str(out)]
    pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
    with started([serve], **pipes) as [first], \
            started([run], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as [sender]:
        assert first.stdout is not None
        assert first.stdout.readline() == "READY\n"
        wait_received(server_cfg["listen"], server_cfg["port"], 12)
        first.kill()  # the peer host restarts ...
        first.wait()
        with started([serve], **pipes) as [second]:  # ... and listens again
            assert second.stdout is not None
            assert second.stdout.readline() == "READY\n"
            stdout, _ = sender.communicate(timeout=15)
    assert sender.returncode == 0
    _, rec = read_echo_file(out)
    assert_complete(rec, 104, [1])
    lost = (rec["flags"] & FLAG_CONN_LOST) != 0
    ok = (rec["flags"] & FLAG_TIMEOUT) == 0
    first_lost = int(np.argmax(lost))
    back = first_lost + int(np.argmax(ok[first_lost:]))
    assert ok[:first_lost].sum() >= first_lost - 2  # measured before the restart
    assert back > first_lost and lost[first_lost:back].all()  # conn_lost rows, no gap
    assert ok[back:].sum() >= len(rec) - back - 2  # and measured again after reconnecting
    assert any("connection lost" in e for e in json.loads(stdout)["errors"])


def test_peer_that_stops_reading_gets_send_failed_rows_and_bounded_memory(
        tmp_path: Path) -> None:
    addr = "127.0.0.2"
    with socket.socket() as silent:
        silent.bind(("127.0.0.5", 0))
        silent.listen(4)
        peers = [{"id": 5, "name": "silent", "addr": "127.0.0.5",
                  "port": silent.getsockname()[1]}]
        cfg = host_config("h0", 0, addr, free_port(addr), peers, payload=1_000_000,
                          duration_s=1.0, warmup_s=0.0, timeout_s=0.2, rate=50.0)
        [(summary, out, code)] = run_workers(tmp_path, [cfg])
    assert code == 0, summary
    _, rec = read_echo_file(out)
    assert_complete(rec, 50, [5])
    assert ((rec["flags"] & FLAG_TIMEOUT) != 0).all()
    failed = (rec["flags"] & FLAG_SEND_FAILED) != 0
    assert failed.sum() >= 10 and not failed[0]


def test_server_rejects_a_wrong_token_and_echoes_for_the_right_one(tmp_path: Path) -> None:
    addr = "127.0.0.3"
    port = free_port(addr)
    frame = struct.pack(">IHI", 0, 9, 16) + b"x" * 16
    with serving(tmp_path, addr, port, stderr=subprocess.PIPE) as server:
        assert server.stdout is not None and server.stdin is not None
        with socket.create_connection((addr, port), timeout=3) as bad:
            bad.sendall(hello("f" * 32) + frame)
            got = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := bad.recv(4096):
                    got += chunk
            assert got == b""  # closed without echoing anything

        with socket.create_connection((addr, port), timeout=3) as good:
            assert echo_of(good, hello(TOKEN), frame) == frame

        server.stdin.close()  # "the local sender is done": no inbound left, so it exits
        server.wait(timeout=5)
        assert server.stderr is not None
        stdout, stderr = server.stdout.read(), server.stderr.read()
    assert server.returncode == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["accepted"] == 1 and summary["rejected"] == 1
    assert "bad token" in stderr


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_server_stops_reading_from_a_client_that_never_reads_its_echoes(tmp_path: Path) -> None:
    """Its echoes wait in the kernel, not in the worker's memory, and others are still served."""
    addr = "127.0.0.3"
    port = free_port(addr)
    with serving(tmp_path, addr, port) as server:
        assert server.stdin is not None
        before = rss_kib(server.pid)
        with socket.create_connection((addr, port), timeout=3) as hog:
            hog.sendall(hello(TOKEN))
            hog.setblocking(False)
            block = b"z" * 65536
            sent = 0
            deadline = time.monotonic() + 5.0
            progress = time.monotonic()
            # At most 64 MiB and 5 s; stop once nothing went out for half a second.
            while sent < 64 * 2**20 and time.monotonic() < deadline:
                try:
                    sent += hog.send(block)
                    progress = time.monotonic()
                except BlockingIOError:
                    if time.monotonic() - progress > 0.5:
                        break
                    time.sleep(0.01)
            # The kernel buffers fill, then the server stops reading: far less than 64 MiB.
            assert sent < 32 * 2**20, sent
            assert rss_kib(server.pid) - before < 8 * 1024
            with socket.create_connection((addr, port), timeout=3) as good:  # still served
                frame = struct.pack(">IHI", 0, 9, 4) + b"ping"
                assert echo_of(good, hello(TOKEN), frame) == frame
        server.stdin.close()
        server.wait(timeout=5)
    assert server.returncode == 0


def test_interrupted_run_keeps_its_rows_and_says_so(tmp_path: Path) -> None:
    configs = mesh(2, duration_s=30.0, warmup_s=0.0, rate=50.0)
    paths = []
    for cfg in configs:
        path = tmp_path / f"{cfg['host']}.json"
        path.write_text(json.dumps(cfg))
        paths.append(path)
    cmds = [[sys.executable, str(WORKER), "run", str(path), str(tmp_path / f"h{i}.bin")]
            for i, path in enumerate(paths)]
    with started(cmds, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as procs:
        h0, h1 = configs
        wait_received(h1["listen"], h1["port"], 25, sender=h0["listen"])
        procs[0].terminate()
        stdout, _ = procs[0].communicate(timeout=10)
        procs[1].terminate()
        procs[1].communicate(timeout=10)
    assert procs[0].returncode == 3
    summary = json.loads(stdout)
    assert any("interrupted by signal 15" in e for e in summary["errors"])
    _, rec = read_echo_file(tmp_path / "h0.bin")
    rounds = summary["rounds"]
    assert 20 <= rounds < 1500
    assert_complete(rec, rounds, [0, 1])  # every round sent has its rows, none lost
    assert summary["rows"] == len(rec)


def test_a_stop_with_echoes_in_flight_gives_every_round_sent_its_rows(tmp_path: Path) -> None:
    """SIGTERM while every echo is in flight (a peer that never answers, a 30 s timeout):
    the rounds already sent still get their rows (timeout, conn_lost), within about a
    second of drain, and the summary's rounds and rows agree with the file."""
    addr = "127.0.0.2"
    port = free_port(addr)
    with socket.socket() as silent:  # accepts (in the kernel backlog), never echoes
        silent.bind(("127.0.0.5", 0))
        silent.listen(4)
        peers = [{"id": 0, "name": "h0", "addr": addr, "port": port},
                 {"id": 7, "name": "silent", "addr": "127.0.0.5", "port": silent.getsockname()[1]}]
        cfg = host_config("h0", 0, addr, port, peers, duration_s=30.0, warmup_s=0.0,
                          timeout_s=30.0, rate=50.0)
        path = tmp_path / "h0.json"
        path.write_text(json.dumps(cfg))
        cmd = [sys.executable, str(WORKER), "run", str(path), str(tmp_path / "h0.bin")]
        with started([cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as [proc]:
            wait_received(addr, port, 12)  # its own server (the self-loop): the rounds are under way
            proc.terminate()
            t_term = time.monotonic()
            stdout, _ = proc.communicate(timeout=20)
            stop_s = time.monotonic() - t_term
    assert proc.returncode == 3
    summary = json.loads(stdout)
    _, rec = read_echo_file(tmp_path / "h0.bin")
    rounds = summary["rounds"]
    assert rounds >= 10
    assert_complete(rec, rounds, [0, 7])
    assert summary["rows"] == len(rec)
    mute = rec[rec["peer"] == 7]
    assert ((mute["flags"] & FLAG_TIMEOUT) != 0).all() and ((mute["flags"] & FLAG_CONN_LOST) != 0).all()
    assert stop_s < worker.STOP_DRAIN_S + worker.SERVER_EXIT_GRACE_S + 5  # not the 30 s timeout


def test_bad_config_and_unwritable_output_exit_non_zero(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": 1, "host": "x"}))
    p = subprocess.run([sys.executable, str(WORKER), "run", str(bad), str(tmp_path / "o.bin")],
                       capture_output=True, text=True, timeout=10, check=False)
    assert p.returncode == 2 and p.stdout == "" and "must be" in p.stderr

    cfg = mesh(1)[0]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(cfg))
    out = tmp_path / "missing-dir" / "o.bin"
    p = subprocess.run([sys.executable, str(WORKER), "run", str(good), str(out)],
                       capture_output=True, text=True, timeout=10, check=False)
    assert p.returncode == 1 and p.stdout == "" and "cannot write" in p.stderr


def find_python38() -> str | None:
    """A python3.8 that actually runs (a pyenv shim may exist without the version)."""
    path = shutil.which("python3.8")
    if path is None:
        return None
    probe = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True, timeout=10, check=False)
    if probe.stdout.strip() == "(3, 8)":
        return path
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found = sorted(pyenv_root.glob("versions/3.8.*/bin/python3.8"))
    return str(found[-1]) if found else None


def test_worker_runs_on_python38(tmp_path: Path) -> None:
    """Hosts may be old Ubuntu: the worker must run, not only parse, on 3.8."""
    python38 = find_python38()
    if python38 is None:
        pytest.skip("no python3.8 on this machine")
    configs = mesh(2, duration_s=0.4, warmup_s=0.1)
    for summary, out, code in run_workers(tmp_path, configs, python=python38):
        assert code == 0 and summary["errors"] == [], summary
        header, rec = read_echo_file(out)
        assert header["python"].startswith("3.8.")
        assert_complete(rec, 25, [0, 1])


def test_worker_is_stdlib_only_and_py38_syntax() -> None:
    """Every file the echo kind ships parses as Python 3.8 and imports the stdlib or its own
    files only; every file of the worker it imports is shipped."""
    import ast

    shipped = {Path(f).stem for f in EchoKind.worker_files}
    imported: set[str] = set()
    siblings: set[str] = set()
    for stem in sorted(shipped):
        tree = ast.parse((WORKER.parent / f"{stem}.py").read_text(), feature_version=(3, 8))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from .echo_protocol import` in the package, `from echo_protocol import` on a host
                (siblings if node.level or node.module.startswith("echo") else imported).add(
                    node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert siblings and siblings <= shipped, f"imported but not shipped: {siblings - shipped}"
    assert worker.WORKER_VERSION == "4" and protocol.SCHEMA == 2


def test_the_shipped_files_alone_run_the_worker(tmp_path: Path) -> None:
    """As deployed: the echo kind's files side by side in a directory of their own, run as a
    script (the sibling modules imported without the package), on every python found."""
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    for name in EchoKind.worker_files:
        shutil.copy(WORKER.parent / name, host_dir / name)
    pythons = [sys.executable] + [p for p in [find_python38()] if p]
    for python in pythons:
        for connection in ("persistent", "per_round"):
            configs = mesh(2, duration_s=0.4, warmup_s=0.1, connection=connection)
            for summary, out, code in run_workers(tmp_path, configs, python=python,
                                                  worker=host_dir / "echo.py"):
                # a per-round connection may not be set up within a round on a loaded machine
                assert code == 0 and not [e for e in summary["errors"] if "round not finished" not in e], \
                    (python, connection, summary)
                _, rec = read_echo_file(out)
                assert_complete(rec, 25, [0, 1])


# --------------------------------------------------------------------------- connections


def test_per_round_opens_a_connection_per_round_and_peer_and_times_its_handshake(tmp_path: Path) -> None:
    configs = mesh(2, connection="per_round", rate=10.0, duration_s=1.0, warmup_s=0.2, timeout_s=0.09,
                   payload=4096)
    results = run_workers(tmp_path, configs)
    rounds = 12  # (1.0 s + 0.2 s) at 10/s
    for summary, out, code in results:
        assert code == 0, summary
        header, rec = read_echo_file(out)
        assert header["connection"] == "per_round" and header["schema"] == 2
        assert_complete(rec, rounds, [0, 1])
        ok = rec[(rec["flags"] & FLAG_TIMEOUT) == 0]
        assert len(ok) >= 0.8 * len(rec), summary["errors"]
        # Every answered round had its own handshake, timed apart from its echo: both
        # positive, and the echo starts after the handshake ended (send_ns >= start + connect).
        assert (ok["connect_ns"] > 0).all() and (ok["connect_ns"] < 90_000_000).all()
        assert (rtt_us(ok) > 0).all()
        scheduled = header["t0_ns"] + ok["round"].astype(np.int64) * 100_000_000  # 1/rate apart
        assert (ok["send_ns"] >= scheduled + ok["connect_ns"]).all()
        assert summary["connects"] >= len(ok)  # one handshake per answered (round, peer)
        # a server outlives its own sender until the peers' per-round connections stop
        assert not [e for e in summary["errors"] if "refused" in e], summary["errors"]
        assert len(np.unique(ok["connect_ns"])) > 1  # measured each time, not copied


def test_per_round_connections_are_new_ones_each_round(tmp_path: Path) -> None:
    """A handshake per round (after the connect phase's), each recorded in its round's row."""
    addr = "127.0.0.2"
    port = free_port(addr)
    cfg = host_config("h0", 0, addr, port, [{"id": 0, "name": "h0", "addr": addr, "port": port}],
                      connection="per_round", rate=10.0, duration_s=0.6, warmup_s=0.0, timeout_s=0.09)
    cfg_path = tmp_path / "h0.json"
    cfg_path.write_text(json.dumps(cfg))
    f = open(tmp_path / "h0.bin", "wb", buffering=0)  # noqa: SIM115 - closed in finally
    try:
        sender, errors, interrupted = worker._measure(protocol.Config(cfg), str(cfg_path), f)
    finally:
        f.close()
    assert interrupted == 0 and not [e for e in errors if "refused" in e or "server" in e], errors
    assert sender.w.rows == 6 and sender.connections.connects >= 5  # 0.6 s at 10/s, one peer
    _, rec = read_echo_file(tmp_path / "h0.bin")
    assert int((rec["connect_ns"] > 0).sum()) == sender.connections.connects  # each handshake in its own row
    assert ((rec["flags"] & FLAG_TIMEOUT) == 0).sum() >= 5


def test_the_server_forgets_the_threads_of_closed_connections(tmp_path: Path) -> None:
    """Per-round connections come and go all trial long: the server keeps no thread per past one."""
    addr = "127.0.0.2"
    cfg = protocol.Config(host_config("h0", 0, addr, free_port(addr), [{"id": 1, "name": "h1", "addr": addr,
                                                                      "port": 1}]))
    with socket.create_server((addr, 0)) as listener:
        server = worker.EchoServer(cfg, listener)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        for _ in range(3 * server.max_conns):
            with socket.create_connection((addr, port), timeout=2) as c:
                deadline = time.monotonic() + 2
                while not select.select([listener], [], [], 0.1)[0] and time.monotonic() < deadline:
                    pass
                server._accept()
                c.sendall(protocol.HELLO.pack(protocol.HELLO_ACK_MAGIC, 1, len(TOKEN)) + TOKEN.encode())
                assert c.recv(1) == protocol.ACK  # authenticated: its echo thread runs
        assert server.accepted == 3 * server.max_conns
        assert len(server.threads) <= 2 * server.max_conns + 1
        server._shutdown()


def test_per_round_unreachable_peer_gives_conn_lost_rows_without_a_handshake(tmp_path: Path) -> None:
    addr = "127.0.0.2"
    port = free_port(addr)
    dead_port = free_port("127.0.0.6")
    peers = [{"id": 0, "name": "h0", "addr": addr, "port": port},
             {"id": 3, "name": "gone", "addr": "127.0.0.6", "port": dead_port}]
    cfg = host_config("h0", 0, addr, port, peers, connection="per_round", duration_s=1.0, warmup_s=0.0,
                      connect_timeout_s=0.3, rate=10.0, timeout_s=0.09)
    [(summary, out, code)] = run_workers(tmp_path, [cfg])
    assert code == 0, summary
    _, rec = read_echo_file(out)
    assert_complete(rec, 10, [0, 3])
    gone = rec[rec["peer"] == 3]
    assert ((gone["flags"] & (FLAG_TIMEOUT | FLAG_CONN_LOST)) == FLAG_TIMEOUT | FLAG_CONN_LOST).all()
    assert (gone["connect_ns"] == -1).all()
    mine = rec[rec["peer"] == 0]
    assert ((mine["flags"] & FLAG_TIMEOUT) == 0).sum() >= 8 and (mine["connect_ns"] > 0).sum() >= 8


def test_persistent_rows_have_no_handshake_of_their_own(tmp_path: Path) -> None:
    configs = mesh(2, rate=20.0, duration_s=0.3, warmup_s=0.0)
    for summary, out, code in run_workers(tmp_path, configs):
        assert code == 0, summary
        header, rec = read_echo_file(out)
        assert header["connection"] == "persistent" and summary["connects"] == 0
        assert len(rec) == 12 and (rec["connect_ns"] == -1).all()


def test_idle_spaces_each_peers_messages_idle_apart(tmp_path: Path) -> None:
    # rate is ignored under idle: 1.0 s + 0.2 s at one round per 0.3 s is 4 rounds.
    configs = mesh(2, idle_s=0.3, rate=50.0, duration_s=1.0, warmup_s=0.2)
    for summary, out, code in run_workers(tmp_path, configs):
        assert code == 0, summary
        header, rec = read_echo_file(out)
        assert header["idle_s"] == 0.3
        assert_complete(rec, 4, [0, 1])
        for peer in (0, 1):
            sends = np.sort(rec[rec["peer"] == peer]["send_ns"])
            gaps_s = np.diff(sends) / 1e9
            # on schedule (a late round is followed by one at most twice as fast), never a burst
            assert abs(float(np.median(gaps_s)) - 0.3) < 0.03 and (gaps_s > 0.12).all(), gaps_s
        assert ((rec["flags"] & FLAG_TIMEOUT) == 0).all() and (rec["connect_ns"] == -1).all()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"connection": "sometimes"}, "'connection' must be one of persistent, per_round"),
     ({"connection": "per_round", "idle_s": 1.0}, "'idle_s' needs connection"),
     ({"idle_s": -1.0}, "'idle_s' must be a number")],
)
def test_bad_connection_settings_are_refused(overrides: dict[str, Any], message: str) -> None:
    cfg = host_config("h0", 0, "127.0.0.2", 9, [], **overrides)
    with pytest.raises(protocol.ConfigError, match=message):
        protocol.Config(cfg)


# --------------------------------------------------------------------------- reader


def write_file(path: Path, header: dict[str, Any], records: Sequence[tuple[int, ...]],
               extra: bytes = b"", magic: bytes = MAGIC) -> None:
    blob = json.dumps(header).encode()
    body = b"".join(RECORD.pack(*r) for r in records)
    path.write_bytes(magic + struct.pack(">I", len(blob)) + blob + body + extra)


HEADER: dict[str, Any] = {
    "schema": 1, "worker_version": "1", "clock": "CLOCK_MONOTONIC", "host": "h0", "host_id": 0,
    "peers": [], "rate": 10.0, "payload": 8, "timeout_s": 1.0, "warmup_s": 0.0, "t0_ns": 1000,
}


def test_reader_sorts_and_tolerates_a_truncated_final_record(tmp_path: Path) -> None:
    path = tmp_path / "t.bin"
    rows = [(1, 2, 0, 300, 400), (0, 2, FLAG_TIMEOUT, 100, 0), (0, 1, 0, 100, 150)]
    write_file(path, HEADER, rows, extra=RECORD.pack(2, 1, 0, 500, 600)[:13])
    header, rec = read_echo_file(path)
    assert header["truncated"] is True
    assert rec.dtype.names == ("round", "peer", "flags", "send_ns", "recv_ns", "connect_ns")
    assert rec["connect_ns"].tolist() == [-1, -1, -1]  # schema 1: persistent connections only
    assert rec["round"].tolist() == [0, 0, 1]
    assert rec["peer"].tolist() == [1, 2, 2]
    assert rec["flags"].tolist() == [0, FLAG_TIMEOUT, 0]
    assert rec["recv_ns"].tolist() == [150, 0, 400]

    write_file(path, HEADER, rows)
    header, rec = read_echo_file(path)
    assert header["truncated"] is False and len(rec) == 3

    write_file(path, HEADER, [])
    header, rec = read_echo_file(path)
    assert len(rec) == 0 and header["truncated"] is False


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: write_file(p, HEADER, [], magic=b"CBECHO9\n"), "not an echo worker file"),
        (lambda p: write_file(p, {**HEADER, "schema": 3}, []), "echo worker file schema 3 is unknown"),
        (lambda p: write_file(p, {k: v for k, v in HEADER.items() if k != "t0_ns"}, []),
         "lacks t0_ns"),
        (lambda p: p.write_bytes(MAGIC + struct.pack(">I", 5) + b"{nope"), "not valid JSON"),
        (lambda p: p.write_bytes(MAGIC + struct.pack(">I", 500) + b"{}"), "truncated"),
        (lambda p: p.write_bytes(b"CBEC"), "not an echo worker file"),
    ],
)
def test_reader_refuses_bad_files(tmp_path: Path, mutate: Any, message: str) -> None:
    path = tmp_path / "bad.bin"
    mutate(path)
    with pytest.raises(ResultError, match=message) as info:
        read_echo_file(path)
    assert info.value.path == str(path)


def test_reader_reads_what_the_worker_wrote_byte_for_byte(tmp_path: Path) -> None:
    """The worker's record struct and the reader's dtype agree field by field."""
    assert protocol.RECORD.format == RECORD2.format and protocol.RECORD.size == 32
    assert protocol.MAGIC == MAGIC
    path = tmp_path / "w.bin"
    header = {**HEADER, "schema": 2}
    with open(path, "wb", buffering=0) as f:
        w = protocol.RecordWriter(f)
        blob = json.dumps(header).encode()
        f.write(protocol.MAGIC + protocol.HEADER_LEN.pack(len(blob)) + blob)
        w.add(2**32 - 1, 65535, 0xF, -5, 2**62, 2**40)
        w.add(1, 2, 0, 10, 20)  # persistent: no handshake of its own
        w.flush()
    _, rec = read_echo_file(path)
    assert rec.tolist() == [(1, 2, 0, 10, 20, -1), (2**32 - 1, 65535, 15, -5, 2**62, 2**40)]
    assert os.path.getsize(path) % 32 == (len(MAGIC) + 4 + len(blob)) % 32


def tree_rss_kib(pid: int) -> int:
    """RSS of a process and its children (the sender and its echo-server child)."""
    total = rss_kib(pid)
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        total += rss_kib(int(child))
    return total


@pytest.mark.slow
def test_memory_stays_flat_over_a_long_fast_trial(tmp_path: Path) -> None:
    """2,000 rounds/s for 16 s to 2 peers: every (round, peer) row is there, RSS does not grow.

    Rows stream to the file and per-peer state is bounded, so what a worker holds at 3-5 s
    is what it holds from 11 s on (a 6-hour trial is the same loop, longer; RSS is flat from
    0.5 s on, to 0.1 MiB). Between the first early and the last late sample (about 10 s apart,
    at least 6), each worker handles 4,000 rows a second: a leak of 100 B per row adds 2.3-3.8
    MiB, over the 2 MiB allowed (measured: a 67-byte bytes object kept per row, +4.2 MiB;
    without, +0.0 MiB).
    """
    rate, seconds = 2000.0, 16.0
    configs = mesh(2, rate=rate, duration_s=seconds, warmup_s=0.0, timeout_s=1.0)
    cmds, outs = [], []
    for cfg in configs:
        cfg_path = tmp_path / f"{cfg['host']}.json"
        cfg_path.write_text(json.dumps(cfg))
        outs.append(tmp_path / f"{cfg['host']}.bin")
        cmds.append([sys.executable, str(WORKER), "run", str(cfg_path), str(outs[-1])])
    samples: dict[int, list[tuple[float, int]]] = {}
    with started(cmds, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as procs:
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds - 3 and all(p.poll() is None for p in procs):
            for i, p in enumerate(procs):
                with contextlib.suppress(OSError, AssertionError):
                    samples.setdefault(i, []).append((time.monotonic() - t0, tree_rss_kib(p.pid)))
            time.sleep(1.0)
        results = [p.communicate(timeout=seconds) for p in procs]
    rounds = int(rate * seconds)
    for (stdout, stderr), out, proc in zip(results, outs, procs, strict=True):
        assert proc.returncode == 0, stderr
        summary = json.loads(stdout.strip().splitlines()[-1])
        _, rec = read_echo_file(out)
        assert summary["rows"] == len(rec) and summary["errors"] == []
        assert_complete(rec, rounds, [0, 1])
    for i, series in samples.items():
        early = [kib for t, kib in series if 3 <= t <= 5]
        late = [kib for t, kib in series if t >= seconds - 5]
        assert early and late, series
        growth_kib = max(late) - min(early)
        print(f"\nworker {i}: RSS {min(early) / 1024:.1f} MiB at 3-5 s, {max(late) / 1024:.1f} MiB "
              f"at {seconds - 5:.0f}+ s ({growth_kib / 1024:+.1f} MiB) over {rounds * 2:,} rows")
        assert growth_kib <= 2 * 1024, series  # flat: a leak of 100 B per row would add 2.3-3.8 MiB here


def test_every_shipped_file_of_the_worker_is_in_the_version_the_pooling_guard_compares(tmp_path: Path) -> None:
    """A change to any of the worker's files, not only echo.py, changes the manifest's workers."""
    bundle = worker_bundle(["echo"])
    assert {f.name for f in bundle} >= set(EchoKind.worker_files)
    before = worker_versions(bundle)
    assert before["echo"]["version"] == worker.WORKER_VERSION
    for name in EchoKind.worker_files:
        copies = []
        for f in bundle:
            shutil.copy(f, tmp_path / f.name)
            copies.append(tmp_path / f.name)
        with (tmp_path / name).open("a") as edited:
            edited.write("\n# edited\n")
        after = worker_versions(copies)
        assert [k for k in before if before[k] != after[k]] == [Path(name).stem], name
