"""Throughput worker: start/stop a nuttcp or iperf3 server, run client bursts (stdlib only).

Usage (on a measured host, with nothing but python3 and the Debian tools):

    python3 throughput.py serve CONFIG.json          start the server, print {"pid": …} when listening
    python3 throughput.py stop PID PORT              stop that server (only if it is ours)
    python3 throughput.py client CONFIG.json OUT     run the bursts, record the tool output in OUT

The client runs the tool once per burst (an on/off pattern is several bursts with
pauses; a token-bucket drain is a burst stopped when the rate has dropped and
stayed down, optionally followed by a rest and a second drain). It does not
parse the tool's numbers for the record: every stdout line goes to OUT as is,
with the monotonic time it arrived, and the controller parses them. OUT is JSON
lines, written as the run goes (memory stays bounded):

    {"type": "header", "schema": 1, "worker": "throughput", "version", "clock", "host", "config"}
    {"type": "start", "burst", "attempt", "t_ns", "argv"}
    {"type": "out", "burst", "attempt", "t_ns", "text"}         one per stdout line
    {"type": "sample", "burst", "attempt", "t_ns", "bytes"}     interface counter (iperf3 drains)
    {"type": "end", "burst", "attempt", "t_ns", "sent_until_ns", "rest_before_ns", "rc",
     "stop", "stderr"}                                          stop: time|drained|deadline|failed
    {"type": "skip", "burst", "reason"}

Times are ns of CLOCK_MONOTONIC since the header. Format history: schema 1 — first
(worker tput-1, then named tput.py and its header's ``worker`` "tput"); the same
format from worker throughput-2 on, the file renamed to throughput.py and ``worker``
"throughput" (the workload kind's word). Readers ignore ``worker``.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

SCHEMA = 1
WORKER_VERSION = "throughput-2"
READY_TIMEOUT_S = 5.0
STOP_GRACE_S = 3.0
# A tool that fails this fast without a single report never connected (server not
# yet accepting, iperf3 still busy with the previous test): retry it.
QUICK_FAIL_S = 3.0
MAX_ATTEMPTS = 4
# Beyond its own -T, a tool gets this long to finish before it is killed.
DEADLINE_SLACK_S = 15.0
# Second drain: the low level holds when every rate of the last window stays
# below low + this share of (high - low), both levels taken from the first drain.
LOW_BAND = 0.25


def _ms(ns: int) -> int:
    return ns // 1_000_000


# -- server ----------------------------------------------------------------------------------
def server_argv(cfg: dict[str, Any]) -> list[str]:
    port = int(cfg["port"])
    if cfg["tool"] == "nuttcp":
        return ["nuttcp", "-S", "--nofork", "-P%d" % port, "-p%d" % (port + 1)]
    argv = ["iperf3", "-s", "-J", "-p", str(port)]
    if cfg.get("listen"):
        argv += ["-B", str(cfg["listen"])]
    return argv


def _listening(port: int) -> bool:
    want = ":%04X" % port
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and parts[1].endswith(want) and parts[3] == "0A":
                        return True
        except (OSError, StopIteration):
            continue
    return False


def serve(cfg: dict[str, Any]) -> dict[str, Any]:
    argv = server_argv(cfg)
    if _listening(int(cfg["port"])):
        raise RuntimeError("port %s is already in use on this host; choose another `port`"
                           % cfg["port"])
    t0 = time.monotonic()
    with open(cfg["log"], "ab") as log:
        # A session of its own: the server outlives this SSH command and no signal
        # meant for the controller's session reaches it; it is stopped by PID.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    deadline = t0 + READY_TIMEOUT_S
    while not _listening(int(cfg["port"])):
        if proc.poll() is not None:
            raise RuntimeError("server exited (%s): %s" % (proc.returncode, _tail(cfg["log"])))
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("server not listening on port %s after %.0fs" % (cfg["port"],
                                                                                READY_TIMEOUT_S))
        time.sleep(0.01)
    return {"pid": proc.pid, "argv": argv, "ready_ms": round((time.monotonic() - t0) * 1000, 1)}


def _tail(path: str, n: int = 800) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")
    except OSError:
        return ""


def _cmdline(pid: int) -> str:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _gone(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop(pid: int, port: int) -> dict[str, Any]:
    cmd = _cmdline(pid)
    # Only a server we started: the PID may have been reused by anything else.
    ours = (("nuttcp" in cmd and "-P%d" % port in cmd)
            or ("iperf3" in cmd and " -p %d" % port in cmd))
    if not cmd or _gone(pid):
        return {"pid": pid, "was_running": False}
    if not ours:
        raise RuntimeError("pid %d is not our server on port %d: %r" % (pid, port, cmd[:200]))
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    killed = False
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)
        killed = True
    return {"pid": pid, "was_running": True, "killed": killed}


# -- client ----------------------------------------------------------------------------------
def client_argv(cfg: dict[str, Any], seconds: float) -> list[str]:
    port = int(cfg["port"])
    interval = float(cfg["interval_s"])
    udp = cfg["protocol"] == "udp"
    length = cfg.get("length")
    streams = int(cfg.get("streams", 1))
    if cfg["tool"] == "nuttcp":
        argv = ["nuttcp", "-P%d" % port, "-p%d" % (port + 1), "-i%g" % interval, "-fparse",
                "-T%g" % seconds]
        if udp:
            argv.append("-u")
            argv.append("-R%d" % max(1, round(float(cfg["udp_rate_bps"]) / 1000)))  # Kbps
        if length:
            argv.append("-l%d" % int(length))
        if streams > 1:
            argv.append("-N%d" % streams)
        if cfg.get("socket_buffer"):
            argv.append("-w%d" % max(1, int(cfg["socket_buffer"]) // 1024))  # KB
        if cfg.get("reverse"):
            argv.append("-r")
        return [*argv, str(cfg["target"])]
    # iperf3 reads -t as an integer number of seconds.
    argv = ["iperf3", "-c", str(cfg["target"]), "-p", str(port), "-i", "%g" % interval,
            "-t", str(max(1, int(-(-seconds // 1)))), "-J", "--get-server-output"]
    if udp:
        argv += ["-u", "-b", str(int(float(cfg["udp_rate_bps"])))]
    if length:
        argv += ["-l", str(int(length))]
    if streams > 1:
        argv += ["-P", str(streams)]
    if cfg.get("socket_buffer"):
        argv += ["-w", str(int(cfg["socket_buffer"]))]
    if cfg.get("reverse"):
        argv.append("-R")
    return argv


def window_intervals(cfg: dict[str, Any]) -> int:
    drain = cfg.get("drain") or {}
    return max(1, round(float(drain.get("window_s", 10.0)) / float(cfg["interval_s"])))


def nuttcp_rate(line: str) -> float | None:
    """Mbit/s of a nuttcp -fparse interval line (None for other lines)."""
    if "real_sec=" not in line:
        return None
    for item in line.split():
        if item.startswith("rate_Mbps="):
            try:
                return float(item.split("=", 1)[1])
            except ValueError:
                return None
    return None


def drained(rates: list[float], w: int, factor: float) -> bool:
    """Uta et al.'s rule, min(first w) × factor > max(last w), as the test goes: the
    first window is what precedes the last w intervals (at most w of them), so a
    budget that lasts less than w intervals is seen too (analysis/tokenbucket.py)."""
    n = len(rates)
    if n < w + 1:
        return False
    return min(rates[:min(w, n - w)]) * factor > max(rates[-w:])


def low_holds(rates: list[float], w: int, high: float, low: float) -> bool:
    return len(rates) >= w and max(rates[-w:]) < low + LOW_BAND * (high - low)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def iface_counter_path(address: str, reverse: bool) -> str:
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         check=False).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3].split("/")[0] == address:
            iface = parts[1].split("@")[0]
            return "/sys/class/net/%s/statistics/%s" % (iface, "rx_bytes" if reverse else "tx_bytes")
    raise RuntimeError("no interface has address %s" % address)


def _read_int(path: str) -> int:
    with open(path) as f:
        return int(f.read().strip())


class Recorder:
    """Writes the JSON-lines record, one line per event, from several threads."""

    def __init__(self, path: str) -> None:
        self.f: IO[str] = open(path, "w")  # noqa: SIM115 -- closed by close(), in client()'s finally
        self.t0 = time.monotonic_ns()
        self.lock = threading.Lock()

    def now(self) -> int:
        return time.monotonic_ns() - self.t0

    def write(self, rec: dict[str, Any]) -> None:
        with self.lock:
            self.f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def _pump(stream: IO[str], sink: queue.Queue[tuple[str, int] | None], rec: Recorder) -> None:
    for line in stream:
        sink.put((line.rstrip("\n"), rec.now()))
    sink.put(None)


class Burst:
    """One run of the tool; stops on its own (-T), when drained, or at a deadline."""

    def __init__(self, cfg: dict[str, Any], spec: dict[str, Any], index: int, rec: Recorder,
                 levels: tuple[float, float] | None) -> None:
        self.cfg = cfg
        self.spec = spec
        self.index = index
        self.rec = rec
        self.levels = levels  # (high, low) of the first drain, for a second drain
        self.rates: list[float] = []
        self.seen: tuple[float, float] | None = None  # (high, low) when it drained

    def run(self, attempt: int, rest_before_ns: int) -> dict[str, Any]:
        cfg, rec = self.cfg, self.rec
        seconds = float(self.spec["seconds"])
        stop_mode = self.spec.get("stop", "time")
        argv = client_argv(cfg, seconds)
        interval = float(cfg["interval_s"])
        w = window_intervals(cfg)
        factor = float(cfg.get("drain", {}).get("factor", 0.75))
        counter = None
        if stop_mode == "drain" and cfg["tool"] == "iperf3":
            # iperf3 3.x prints its JSON only at the end: watch the interface instead.
            counter = iface_counter_path(str(cfg["source"]), bool(cfg.get("reverse")))
        base = {"burst": self.index, "attempt": attempt}
        start = rec.now()
        rec.write({"type": "start", **base, "t_ns": start, "argv": argv})
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)
        assert proc.stdout is not None and proc.stderr is not None
        lines: queue.Queue[tuple[str, int] | None] = queue.Queue()
        errs: list[str] = []
        t_out = threading.Thread(target=_pump, args=(proc.stdout, lines, rec), daemon=True)
        t_err = threading.Thread(target=lambda: errs.extend(proc.stderr or []), daemon=True)
        t_out.start()
        t_err.start()
        deadline = start + int((seconds + DEADLINE_SLACK_S) * 1e9)
        stop = "time"
        sent_until: int | None = None
        step = int(interval * 1e9)
        next_sample = start + step
        last_t, last_bytes = start, (_read_int(counter) if counter else 0)
        n_reports = 0
        json_error = False  # iperf3 -J exits 0 when it cannot connect; the error is in the JSON
        done = False
        while not done:
            # Time-stopped runs sleep until the tool prints or the deadline: no wakeups
            # of ours compete with the tool while it measures. Sampling and the drain
            # grace need a short period.
            if counter is not None or sent_until is not None:
                wait_s = 0.05
            else:
                wait_s = max(0.01, (deadline - rec.now()) / 1e9)
            try:
                item = lines.get(timeout=wait_s)
            except queue.Empty:
                item = ("", -1)
            if item is None:
                done = True
            elif item[1] >= 0:
                rec.write({"type": "out", **base, "t_ns": item[1], "text": item[0]})
                if item[0].lstrip().startswith('"error":'):
                    json_error = True
                r = nuttcp_rate(item[0]) if cfg["tool"] == "nuttcp" else None
                if r is not None:
                    n_reports += 1
                    self.rates.append(r)
            now = rec.now()
            if counter and now >= next_sample and sent_until is None:
                b = _read_int(counter)
                rec.write({"type": "sample", **base, "t_ns": now, "bytes": b})
                self.rates.append((b - last_bytes) * 8 / ((now - last_t) / 1e9) / 1e6)
                last_t, last_bytes = now, b
                next_sample += step
            if stop_mode == "drain" and sent_until is None and self._drained(w, factor):
                stop = "drained"
                sent_until = rec.now()
                proc.send_signal(signal.SIGINT)
                n = len(self.rates)
                # the two windows the rule compared: what preceded the last w, and the last w
                self.seen = (_median(self.rates[: min(w, n - w)]), _median(self.rates[-w:]))
            late = sent_until is not None and now - sent_until > STOP_GRACE_S * 1e9
            if (now > deadline or late) and proc.poll() is None:
                stop = "deadline" if not late else stop
                proc.kill()
        rc = proc.wait()
        t_err.join(1.0)
        end = rec.now()
        if stop == "time" and (rc != 0 or json_error):
            stop = "failed"
        rec.write({"type": "end", **base, "t_ns": end, "sent_until_ns": sent_until or end,
                   "rest_before_ns": rest_before_ns, "rc": rc, "stop": stop,
                   "stderr": "".join(errs)[-2000:]})
        quick = (end - start) < QUICK_FAIL_S * 1e9 and n_reports == 0
        return {"burst": self.index, "attempt": attempt, "rc": rc, "stop": stop,
                "sent_until_ns": sent_until or end, "retry": stop == "failed" and quick}

    def _drained(self, w: int, factor: float) -> bool:
        if self.levels is None:
            return drained(self.rates, w, factor)
        high, low = self.levels
        return low_holds(self.rates, w, high, low)


def client(cfg: dict[str, Any], out: str) -> dict[str, Any]:
    rec = Recorder(out)
    results: list[dict[str, Any]] = []
    try:
        rec.write({"type": "header", "schema": SCHEMA, "worker": "throughput", "version": WORKER_VERSION,
                   "clock": "CLOCK_MONOTONIC", "host": cfg.get("host", ""), "config": cfg})
        levels: tuple[float, float] | None = None
        sent_until: int | None = None
        for i, spec in enumerate(cfg["bursts"]):
            if spec.get("stop") == "drain" and i > 0 and levels is None:
                rec.write({"type": "skip", "burst": i, "reason": "the first drain did not drain"})
                continue
            if sent_until is not None:
                time.sleep(max(0.0, float(cfg["bursts"][i - 1].get("pause_after_s", 0.0))
                               - (rec.now() - sent_until) / 1e9))
            burst = Burst(cfg, spec, i, rec, levels)
            rest = 0 if sent_until is None else rec.now() - sent_until
            for attempt in range(MAX_ATTEMPTS):
                r = burst.run(attempt, rest)
                if not r["retry"]:
                    break
                time.sleep(0.5)
            results.append(r)
            sent_until = r["sent_until_ns"]
            if spec.get("stop") == "drain" and i == 0 and r["stop"] == "drained":
                levels = burst.seen
    finally:
        rec.close()
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    me, tools = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    # what the worker itself cost, next to the tools it ran: it must stay out of the way
    cpu = {"worker_s": round(me.ru_utime + me.ru_stime, 3),
           "tools_s": round(tools.ru_utime + tools.ru_stime, 3),
           "wall_s": round(rec.now() / 1e9, 3)}
    return {"sha256": digest, "bursts": results, "worker": WORKER_VERSION, "cpu": cpu}


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "serve":
        with open(argv[1]) as f:
            print(json.dumps(serve(json.load(f))))
        return 0
    if len(argv) == 3 and argv[0] == "stop":
        print(json.dumps(stop(int(argv[1]), int(argv[2]))))
        return 0
    if len(argv) == 3 and argv[0] == "client":
        with open(argv[1]) as f:
            cfg = json.load(f)
        if cfg.get("schema") != SCHEMA:
            sys.stderr.write("throughput.py: config schema %r, this worker knows %d\n"
                             % (cfg.get("schema"), SCHEMA))
            return 2
        print(json.dumps(client(cfg, argv[2])))
        return 0
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except RuntimeError as e:
        sys.stderr.write("throughput.py: %s\n" % e)
        sys.exit(1)
