"""Accuracy and capacity of the WAN delay line (needs root).

Two hosts in two regions of the namespace testbed, joined by one emulated WAN
link. RTT: a UDP ping-pong (64 B, one probe every 2 ms, timestamps in the
payload, CLOCK_MONOTONIC) between the hosts; the reference is the same probe
over the testbed without ``wan:`` (core router). Added RTT = RTT − reference
median − 2·delay, reported as p50 and p99. Throughput: iperf3 TCP (one flow,
5 s) and UDP (1 Gbit/s offered, 5 s) through a link of 0, 2 and 30 ms.

Usage: .venv/bin/python bench/bench_wan.py [--probes N] [--forwarder c|python] [--realtime]
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.core.cluster import Cluster  # noqa: E402
from cloudbench.core.netns import in_netns  # noqa: E402
from cloudbench.providers.netns import NetnsProvider  # noqa: E402
from cloudbench.workloads import parse_spec  # noqa: E402

PORT = 7411
SERVER = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind((sys.argv[1],int(sys.argv[2])))\n"
    "s.settimeout(120)\n"
    "while True:\n"
    "    d,a=s.recvfrom(2048)\n"
    "    if d==b'stop':break\n"
    "    s.sendto(d,a)\n"
)


def spec_text(wan: str) -> str:
    return f"""
name: benchwan
providers:
  netns:
    regions:
      ra: {{zones: {{ra-1: {{subnets: {{sa: {{hosts: 1}}}}}}}}}}
      rb: {{zones: {{rb-1: {{subnets: {{sb: {{hosts: 1}}}}}}}}}}
{wan}
workloads: [{{kind: echo}}]
"""


def wan_section(delay_ms: float, forwarder: str, realtime: bool) -> str:
    return (f"wan: {{forwarder: {forwarder}, realtime: {str(realtime).lower()}, "
            f"links: [{{between: [ra, rb], delay: {delay_ms}ms}}]}}")


def ping(cluster: Cluster, probes: int, interval_s: float) -> np.ndarray:
    """RTTs in µs of ``probes`` UDP probes from the first host to the second."""
    a, b = cluster.hosts
    assert a.netns and b.netns
    srv = subprocess.Popen(["ip", "netns", "exec", b.netns, sys.executable, "-c", SERVER, b.address,
                            str(PORT)], stdin=subprocess.DEVNULL)
    try:
        sock: socket.socket = in_netns(a.netns, lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        sock.setblocking(False)
        deadline = time.monotonic() + 5
        while True:  # wait for the server to answer
            sock.sendto(struct.pack("<qi", 0, -1), (b.address, PORT))
            r, _, _ = select.select([sock], [], [], 0.2)
            if r:
                sock.recv(64)
                break
            if time.monotonic() > deadline:
                raise SystemExit("bench_wan: echo server did not answer")
        rtts = np.full(probes, np.nan)
        sent = 0
        got = 0
        nxt = time.monotonic_ns()
        end = nxt + int((probes * interval_s + 5) * 1e9)
        pad = b"\0" * 52
        while got < probes and time.monotonic_ns() < end:
            now = time.monotonic_ns()
            if sent < probes and now >= nxt:
                sock.sendto(struct.pack("<qi", now, sent) + pad, (b.address, PORT))
                sent += 1
                nxt += int(interval_s * 1e9)
            wait = max(nxt - time.monotonic_ns(), 0) / 1e9 if sent < probes else 0.1
            r, _, _ = select.select([sock], [], [], wait)
            if r:
                data = sock.recv(2048)
                t = time.monotonic_ns()
                ts, i = struct.unpack_from("<qi", data)
                if i >= 0:
                    rtts[i] = (t - ts) / 1e3
                    got += 1
        sock.sendto(b"stop", (b.address, PORT))
        sock.close()
        return np.asarray(rtts[~np.isnan(rtts)])
    finally:
        try:
            srv.wait(timeout=2)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def iperf(cluster: Cluster, udp: bool, seconds: int = 5) -> dict[str, float]:
    a, b = cluster.hosts
    assert a.netns and b.netns
    srv = subprocess.Popen(["ip", "netns", "exec", b.netns, "iperf3", "-s", "-1", "-B", b.address,
                            "-p", "5211"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)  # iperf3 has no readiness signal; its first connect retries are not ours
        cmd = ["ip", "netns", "exec", a.netns, "iperf3", "-c", b.address, "-p", "5211", "-t",
               str(seconds), "-J"]
        if udp:
            cmd += ["-u", "-b", "1G", "-l", "1400"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30, check=False)
        res = json.loads(out.stdout)
        if udp:
            s = res["end"]["sum"]
            return {"mbps": s["bits_per_second"] * (1 - s["lost_percent"] / 100) / 1e6,
                    "loss_pct": s["lost_percent"]}
        s = res["end"]["sum_received"]
        return {"mbps": s["bits_per_second"] / 1e6,
                "retrans": float(res["end"]["sum_sent"].get("retransmits", 0))}
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def with_testbed(wan: str, fn: Any) -> Any:
    provider = NetnsProvider()
    spec = parse_spec(spec_text(wan), "bench.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        cluster = provider.provision(spec.topology(), Path(tmp))
        try:
            return fn(cluster)
        finally:
            provider.destroy(cluster)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--probes", type=int, default=1500)
    ap.add_argument("--forwarder", default="c", choices=["c", "python"])
    ap.add_argument("--realtime", action="store_true")
    ap.add_argument("--no-throughput", action="store_true")
    args = ap.parse_args()
    interval = 0.002
    def reference(c: Cluster) -> dict[str, Any]:
        r = ping(c, args.probes, interval)
        row: dict[str, Any] = {"case": "no wan (core router)", "delay_ms": 0.0,
                               "rtt_p50_us": float(np.median(r)), "rtt_p99_us": float(np.percentile(r, 99)),
                               "added_p50_us": 0.0,
                               "added_p99_us": float(np.percentile(r, 99) - np.median(r))}
        if not args.no_throughput:
            row["tcp_mbps"] = iperf(c, udp=False)["mbps"]
            u = iperf(c, udp=True)
            row["udp_mbps"], row["udp_loss_pct"] = u["mbps"], u["loss_pct"]
        return row

    rows: list[dict[str, Any]] = [with_testbed("", reference)]
    ref = float(rows[0]["rtt_p50_us"])
    for delay in (0.0, 2.0, 30.0):
        def measure(c: Cluster, delay: float = delay) -> dict[str, Any]:
            r = ping(c, args.probes, interval)
            row: dict[str, Any] = {"case": f"{args.forwarder} forwarder", "delay_ms": delay,
                                   "rtt_p50_us": float(np.median(r)),
                                   "rtt_p99_us": float(np.percentile(r, 99))}
            added = r - ref - 2000 * delay
            row["added_p50_us"] = float(np.median(added))
            row["added_p99_us"] = float(np.percentile(added, 99))
            if not args.no_throughput:
                row["tcp_mbps"] = iperf(c, udp=False)["mbps"]
                u = iperf(c, udp=True)
                row["udp_mbps"], row["udp_loss_pct"] = u["mbps"], u["loss_pct"]
            return row

        rows.append(with_testbed(wan_section(delay, args.forwarder, args.realtime), measure))
    cols = ["case", "delay_ms", "rtt_p50_us", "rtt_p99_us", "added_p50_us", "added_p99_us",
            "tcp_mbps", "udp_mbps", "udp_loss_pct"]
    print(" | ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>14.1f}" if isinstance(r.get(c), float) else f"{r.get(c, ''):>14}"
                         for c in cols))
    print(json.dumps({"bench": "wan", "forwarder": args.forwarder, "realtime": args.realtime,
                      "probes": args.probes, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
