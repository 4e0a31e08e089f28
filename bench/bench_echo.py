"""Benchmarks of the echo RTT worker (cloudbench/workers/echo.py).

fidelity (needs root): network namespaces ``cbbench<pid>a`` / ``cbbench<pid>b`` joined
by a veth pair on 198.18.250.0/24, every process pinned to CPU 0 (``taskset -c 0``).
sockperf ping-pong (TCP, 1024 B messages, ``--full-rtt --full-log``) and the worker
(one peer, no self-loop, 10 B header + 1014 B payload = 1024 B frames) run at the
same message rate in alternating blocks, so both see the same machine. Targets:
worker/sockperf p50 <= 1.15 and p99 <= 1.3 over the pooled samples.

    The worker's receive time is the kernel's receive timestamp (its default,
    as ping's), so its RTT leaves out its own wakeup after the echo arrived,
    which sockperf's user-space stamp includes. A third tool in each block, the
    worker stamping echoes when it reads them (``rx_stamp: user``), is printed
    beside it as the like-for-like figure; the verdict is on the default.

    sockperf's client busy-waits between messages, so CPU 0 never halts while it
    runs; the worker sleeps between rounds, as it must. On a VM a vCPU that halts
    between messages runs the next round trip markedly slower (here a C client:
    ~26 µs sleeping vs ~18 µs spinning, same server). That is the CPU's power
    state, not the tool, so by default a SCHED_IDLE spinner keeps CPU 0 busy during
    *both* tools' blocks; it yields at once to any other task. ``--filler none``
    shows the raw comparison.

cost: 8 worker instances on 127.0.0.11..18, all-to-all including self-loops, 100
rounds/s, 1 KiB payload: CPU time per host (the worker process and any children,
every thread) over wall time while the rounds run, from the scheduler's exact run
time per thread (/proc/<pid>/task/*/schedstat); printed also split into the sender
(the worker process) and the echo server (its child). On loopback each send also runs
the receiving side's TCP processing (softirq) in the sender's context, so this
counts the kernel's network work for the host's traffic too. Target <= 5 % of one
core per host.

Usage: .venv/bin/python bench/bench_echo.py [--seconds N] [--mps N] [--blocks N]
                                    [--filler idle|none] [--only fidelity|cost]
Prints a table and, last, one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.core.netns import connect_in_netns, ip_batch  # noqa: E402
from cloudbench.errors import CloudbenchError  # noqa: E402
from cloudbench.workloads.echo.reader import FLAG_TIMEOUT, FLAG_WARMUP, read_echo_file  # noqa: E402

WORKER = ROOT / "cloudbench" / "workers" / "echo.py"
NET = "198.18.250"  # the only range this benchmark ever configures
ADDR_A = f"{NET}.1"
ADDR_B = f"{NET}.2"
SOCKPERF_PORT = 11111
ECHO_PORT = 7100
MSG_BYTES = 1024
FRAME_HEADER = 10  # the worker's frame header: round u32, sender u16, length u32
P50_TARGET = 1.15
P99_TARGET = 1.3
CPU_TARGET = 5.0
COST_HOSTS = 8
COST_RATE = 100.0


class Procs:
    """Every process this benchmark starts, so that exactly those are killed."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, cmd: list[str], **kw: Any) -> subprocess.Popen[Any]:
        proc: subprocess.Popen[Any] = subprocess.Popen(cmd, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc, timeout=2.0)
        self.procs.clear()


def pinned(ns: str, cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, "taskset", "-c", "0", *cmd]


def pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def distribution(x: np.ndarray) -> dict[str, Any]:
    """Count and p50/p90/p99 (µs) of pooled RTT samples."""
    return {"n": len(x), "p50_us": pct(x, 50), "p90_us": pct(x, 90), "p99_us": pct(x, 99)}


# --------------------------------------------------------------------------- fidelity


@contextlib.contextmanager
def veth_pair(tag: str) -> Iterator[tuple[str, str]]:
    """Two namespaces joined by a veth pair on 198.18.250.0/24; removed on the way out."""
    ns_a, ns_b = f"cbbench{tag}a", f"cbbench{tag}b"
    if_a, if_b = f"cbb{tag}a", f"cbb{tag}b"
    try:
        ip_batch([f"netns add {ns_a}", f"netns add {ns_b}",
                  f"link add {if_a} netns {ns_a} type veth peer name {if_b} netns {ns_b}"])
        for ns, ifname, addr in ((ns_a, if_a, ADDR_A), (ns_b, if_b, ADDR_B)):
            ip_batch([f"addr add {addr}/24 dev {ifname}", f"link set {ifname} up",
                      "link set lo up"], ns=ns)
        yield ns_a, ns_b
    finally:
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def filler_cmd() -> list[str]:
    code = ("import os\n"
            "os.sched_setaffinity(0, {0})\n"
            "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
            "while True:\n    pass\n")
    return [sys.executable, "-c", code]


def wait_listening(ns: str, addr: str, port: int, limit_s: float = 5.0) -> None:
    """Poll (from inside the namespace) until something accepts on addr:port."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            connect_in_netns(ns, addr, port, timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {addr}:{port} in {ns} after {limit_s:.0f} s")


def sockperf_block(procs: Procs, ns_a: str, ns_b: str, mps: int, seconds: float,
                   tmp: Path) -> np.ndarray:
    """One sockperf ping-pong block; full round-trip samples in µs."""
    server = procs.start(pinned(ns_b, ["sockperf", "server", "--tcp", "-i", ADDR_B,
                                       "-p", str(SOCKPERF_PORT)]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp / "sockperf.csv"
    try:
        wait_listening(ns_a, ADDR_B, SOCKPERF_PORT)
        client = subprocess.run(
            pinned(ns_a, ["sockperf", "ping-pong", "--tcp", "-i", ADDR_B, "-p",
                          str(SOCKPERF_PORT), "-m", str(MSG_BYTES), "--mps", str(mps),
                          "-t", str(max(1, round(seconds))), "--full-rtt",
                          "--full-log", str(log)]),
            capture_output=True, text=True, timeout=seconds + 60, check=False)
        if client.returncode != 0:
            raise RuntimeError(f"sockperf ping-pong failed: {client.stderr[-500:]}")
    finally:
        procs.stop(server)
    samples = []
    for line in log.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4 and parts[0].isdigit():
            samples.append(float(parts[3]))  # rtt(usec) with --full-rtt
    return np.array(samples)


def worker_block(procs: Procs, ns_a: str, ns_b: str, mps: int, seconds: float,
                 tmp: Path, rx_stamp: str = "kernel") -> tuple[np.ndarray, dict[str, Any]]:
    """One worker block (A sends, B only serves); RTT samples in µs and A's summary."""
    token = secrets.token_hex(16)
    peer_a = {"id": 0, "name": "a", "addr": ADDR_A, "port": ECHO_PORT}
    peer_b = {"id": 1, "name": "b", "addr": ADDR_B, "port": ECHO_PORT}
    common = {"schema": 1, "token": token, "port": ECHO_PORT, "rate": float(mps),
              "payload": MSG_BYTES - FRAME_HEADER, "duration_s": seconds, "warmup_s": 0.5,
              "timeout_s": 1.0, "connect_timeout_s": 5.0, "linger_s": 1.0, "rx_stamp": rx_stamp}
    cfg_a = {**common, "host": "a", "host_id": 0, "listen": ADDR_A, "peers": [peer_b]}
    cfg_b = {**common, "host": "b", "host_id": 1, "listen": ADDR_B, "peers": [peer_a]}
    (tmp / "a.json").write_text(json.dumps(cfg_a))
    (tmp / "b.json").write_text(json.dumps(cfg_b))
    out = tmp / "a.bin"
    server = procs.start(pinned(ns_b, [sys.executable, str(WORKER), "serve",
                                       str(tmp / "b.json")]),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdin is not None
        if server.stdout.readline() != "READY\n":
            raise RuntimeError("the worker's echo server did not start")
        sender = subprocess.run(
            pinned(ns_a, [sys.executable, str(WORKER), "run", str(tmp / "a.json"), str(out)]),
            capture_output=True, text=True, timeout=seconds + 60, check=False)
        if sender.returncode != 0:
            raise RuntimeError(f"echo worker failed: {sender.stderr[-500:]}")
        summary: dict[str, Any] = json.loads(sender.stdout)
        server.stdin.close()  # the sender is done; the server exits once A disconnected
        server.wait(timeout=10)
    finally:
        procs.stop(server)
    _, rec = read_echo_file(out)
    ok = rec[(rec["flags"] & (FLAG_TIMEOUT | FLAG_WARMUP)) == 0]
    rtt = (ok["recv_ns"].astype(np.int64) - ok["send_ns"].astype(np.int64)) / 1000.0
    return rtt, summary


def fidelity(seconds: float, mps: int, blocks: int, filler: str) -> dict[str, Any]:
    for tool in ("sockperf", "ip", "taskset"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed")
    if os.geteuid() != 0:
        raise RuntimeError("the fidelity benchmark needs root (network namespaces)")
    per_block = seconds / blocks
    procs = Procs()
    sp_all: list[np.ndarray] = []
    wk_all: list[np.ndarray] = []
    wu_all: list[np.ndarray] = []  # the worker stamping echoes on read (rx_stamp "user")
    rows: list[dict[str, Any]] = []
    worker_stats: list[dict[str, Any]] = []
    with veth_pair(str(os.getpid())) as (ns_a, ns_b), \
            tempfile.TemporaryDirectory(prefix="cbbench-echo-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            if filler == "idle":
                procs.start(filler_cmd())
            for b in range(blocks):
                sp = sockperf_block(procs, ns_a, ns_b, mps, per_block, tmp)
                wk, summary = worker_block(procs, ns_a, ns_b, mps, per_block, tmp)
                wu, _ = worker_block(procs, ns_a, ns_b, mps, per_block, tmp, rx_stamp="user")
                wu_all.append(wu)
                sp_all.append(sp)
                wk_all.append(wk)
                worker_stats.append(summary)
                rows.append({"block": b, "sockperf_p50": pct(sp, 50), "sockperf_p99": pct(sp, 99),
                             "worker_p50": pct(wk, 50), "worker_p99": pct(wk, 99),
                             "worker_user_p50": pct(wu, 50), "worker_user_p99": pct(wu, 99),
                             "worker_kernel_stamps": summary["kernel_stamps"],
                             "worker_user_stamps": summary["user_stamps"],
                             "sockperf_n": len(sp), "worker_n": len(wk),
                             "worker_late_sends": summary["late_sends"],
                             "worker_timeouts": summary["timeouts"]})
                r = rows[-1]
                print(f"  block {b}: sockperf p50 {r['sockperf_p50']:6.1f} p99 "
                      f"{r['sockperf_p99']:7.1f} | worker p50 {r['worker_p50']:6.1f} p99 "
                      f"{r['worker_p99']:7.1f} | on read p50 {r['worker_user_p50']:6.1f} p99 "
                      f"{r['worker_user_p99']:7.1f} µs  (late sends {r['worker_late_sends']})",
                      flush=True)
        finally:
            procs.stop_all()
    sp = np.concatenate(sp_all)
    wk = np.concatenate(wk_all)
    wu = np.concatenate(wu_all)
    res: dict[str, Any] = {
        "mps": mps, "seconds_per_tool": seconds, "blocks": blocks, "filler": filler,
        "sockperf": distribution(sp),
        "worker": {**distribution(wk),
                   "timeouts": sum(s["timeouts"] for s in worker_stats),
                   "late_sends": sum(s["late_sends"] for s in worker_stats),
                   "max_send_lag_us": max(s["max_send_lag_us"] for s in worker_stats),
                   "kernel_stamps": sum(s["kernel_stamps"] for s in worker_stats),
                   "user_stamps": sum(s["user_stamps"] for s in worker_stats)},
        "worker_user": distribution(wu),
        "blocks_detail": rows,
    }
    res["p50_ratio"] = res["worker"]["p50_us"] / res["sockperf"]["p50_us"]
    res["p99_ratio"] = res["worker"]["p99_us"] / res["sockperf"]["p99_us"]
    res["block_median_p50_ratio"] = float(np.median(
        [r["worker_p50"] / r["sockperf_p50"] for r in rows]))
    res["block_median_p99_ratio"] = float(np.median(
        [r["worker_p99"] / r["sockperf_p99"] for r in rows]))
    res["user_p50_ratio"] = res["worker_user"]["p50_us"] / res["sockperf"]["p50_us"]
    res["user_p99_ratio"] = res["worker_user"]["p99_us"] / res["sockperf"]["p99_us"]
    res["pass"] = bool(res["p50_ratio"] <= P50_TARGET and res["p99_ratio"] <= P99_TARGET)
    return res


# --------------------------------------------------------------------------- cost


def proc_cpu_s(pid: int) -> float:
    """CPU time of a process (all its threads), in seconds; 0 once it is gone.

    The sum of the scheduler's exact run time per thread (/proc/PID/task/*/schedstat,
    nanoseconds), rather than utime + stime, which the kernel samples at its tick
    (4 ms at HZ=250): short bursts are then charged a whole tick or nothing. Both
    include softirq work done in the process's context (no IRQ time accounting).
    """
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(c) for c in text.split()]


def cost(seconds: float) -> dict[str, Any]:
    addrs = [f"127.0.0.{11 + i}" for i in range(COST_HOSTS)]
    port = 47100
    for a in addrs:  # fail early with a clear message if the port is taken
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((a, port))
    token = secrets.token_hex(16)
    peers = [{"id": i, "name": f"c{i}", "addr": a, "port": port} for i, a in enumerate(addrs)]
    warmup = 1.0
    procs = Procs()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cbbench-cost-") as tmpdir:
        tmp = Path(tmpdir)
        runs: list[subprocess.Popen[str]] = []
        try:
            for i, a in enumerate(addrs):
                cfg = {"schema": 1, "host": f"c{i}", "host_id": i, "listen": a, "port": port,
                       "token": token, "peers": peers, "rate": COST_RATE, "payload": 1024,
                       "duration_s": seconds, "warmup_s": warmup, "timeout_s": 1.0,
                       "connect_timeout_s": 10.0, "linger_s": 3.0}
                (tmp / f"c{i}.json").write_text(json.dumps(cfg))
                runs.append(procs.start([sys.executable, str(WORKER), "run",
                                         str(tmp / f"c{i}.json"), str(tmp / f"c{i}.bin")],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True))
            # Sample from 2 s into the rounds to 1 s before their end: steady state only.
            time.sleep(warmup + 2.0)
            pids = [[r.pid, *children(r.pid)] for r in runs]
            t_a = time.monotonic()
            cpu_a = [[proc_cpu_s(p) for p in ps] for ps in pids]
            time.sleep(max(seconds - 3.0, 1.0))
            t_b = time.monotonic()
            cpu_b = [[proc_cpu_s(p) for p in ps] for ps in pids]
            for i, r in enumerate(runs):
                stdout, stderr = r.communicate(timeout=seconds + 60)
                if r.returncode != 0:
                    raise RuntimeError(f"worker c{i} failed: {stderr[-500:]}")
                summary = json.loads(stdout)
                results.append({
                    "host": f"c{i}", "processes": len(pids[i]),
                    "cpu_pct": 100.0 * (sum(cpu_b[i]) - sum(cpu_a[i])) / (t_b - t_a),
                    # the worker process (sender) and its child (the echo server)
                    "sender_cpu_pct": 100.0 * (cpu_b[i][0] - cpu_a[i][0]) / (t_b - t_a),
                    "server_cpu_pct": 100.0 * (sum(cpu_b[i][1:]) - sum(cpu_a[i][1:])) / (t_b - t_a),
                    "whole_run_cpu_pct": 100.0 * summary["cpu_s"] / summary["wall_s"],
                    "rows": summary["rows"], "timeouts": summary["timeouts"],
                    "late_sends": summary["late_sends"], "errors": summary["errors"],
                })
        finally:
            procs.stop_all()
    worst = max(r["cpu_pct"] for r in results)
    return {"hosts": COST_HOSTS, "rate": COST_RATE, "peers_per_host": COST_HOSTS,
            "seconds": seconds, "per_host": results, "max_cpu_pct": worst,
            "mean_cpu_pct": float(np.mean([r["cpu_pct"] for r in results])),
            "pass": worst <= CPU_TARGET}


# --------------------------------------------------------------------------- main


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # so that the finally blocks remove what we created


def section(out: dict[str, Any], name: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one benchmark into ``out[name]``; a failure to run it is a failed figure, not a traceback."""
    try:
        res = measure()
    except (RuntimeError, subprocess.SubprocessError, OSError, CloudbenchError) as e:
        print(f"  {name}: ERROR {e}")
        res = {"error": str(e), "pass": False}
    out[name] = res
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="seconds of samples per tool (fidelity) and of rounds (cost)")
    ap.add_argument("--mps", type=int, default=1000, help="messages (rounds) per second")
    ap.add_argument("--blocks", type=int, default=5, help="alternating blocks per tool")
    ap.add_argument("--filler", choices=("idle", "none"), default="idle")
    ap.add_argument("--only", choices=("fidelity", "cost"))
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)  # even where the shell started us with it ignored
    out: dict[str, Any] = {"load_avg_before": os.getloadavg()[0]}
    ok = True
    if args.only in (None, "fidelity"):
        print(f"fidelity: sockperf vs worker, TCP {MSG_BYTES} B, {args.mps} msg/s, "
              f"{args.seconds:g} s each in {args.blocks} alternating blocks, CPU 0, "
              f"filler={args.filler}", flush=True)
        f = section(out, "fidelity", lambda: fidelity(args.seconds, args.mps, args.blocks, args.filler))
        ok &= f["pass"]
        if "error" not in f:
            print(f"  {'':14} {'n':>7} {'p50 µs':>8} {'p90 µs':>8} {'p99 µs':>8}")
            for tool, label in (("sockperf", "sockperf"), ("worker", "worker"),
                                ("worker_user", "worker on read")):
                t = f[tool]
                print(f"  {label:14} {t['n']:7d} {t['p50_us']:8.1f} {t['p90_us']:8.1f} "
                      f"{t['p99_us']:8.1f}")
            print(f"  p50 ratio {f['p50_ratio']:.3f} (target <= {P50_TARGET}), "
                  f"p99 ratio {f['p99_ratio']:.3f} (target <= {P99_TARGET}); "
                  f"median over blocks {f['block_median_p50_ratio']:.3f} / "
                  f"{f['block_median_p99_ratio']:.3f}; worker late sends "
                  f"{f['worker']['late_sends']}, timeouts {f['worker']['timeouts']}, "
                  f"echoes stamped by the kernel {f['worker']['kernel_stamps']}, on read "
                  f"{f['worker']['user_stamps']}  {'PASS' if f['pass'] else 'FAIL'}", flush=True)
            print(f"  (not the verdict) the worker stamping echoes on read (rx_stamp: user): "
                  f"p50 ratio {f['user_p50_ratio']:.3f}, p99 ratio {f['user_p99_ratio']:.3f}",
                  flush=True)
    if args.only in (None, "cost"):
        print(f"cost: {COST_HOSTS} workers on 127.0.0.11..18, {COST_HOSTS} peers each "
              f"(self included), {COST_RATE:g} rounds/s, {args.seconds:g} s", flush=True)
        c = section(out, "cost", lambda: cost(args.seconds))
        ok &= c["pass"]
        if "error" not in c:
            print(f"  {'host':6} {'CPU %':>6} {'sender':>7} {'server':>7} {'whole run %':>12} "
                  f"{'rows':>7} {'timeouts':>9} {'late':>5}")
            for r in c["per_host"]:
                print(f"  {r['host']:6} {r['cpu_pct']:6.2f} {r['sender_cpu_pct']:7.2f} "
                      f"{r['server_cpu_pct']:7.2f} {r['whole_run_cpu_pct']:12.2f} "
                      f"{r['rows']:7d} {r['timeouts']:9d} {r['late_sends']:5d}")
            print(f"  max {c['max_cpu_pct']:.2f} % of one core per host (target <= "
                  f"{CPU_TARGET:g} %)  {'PASS' if c['pass'] else 'FAIL'}", flush=True)
    out["load_avg_after"] = os.getloadavg()[0]
    out["pass"] = ok
    print(json.dumps(out, separators=(",", ":"), default=float))
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; namespaces and processes removed", file=sys.stderr)
        sys.exit(130)
