"""Record real nuttcp / iperf3 outputs and worker records for the parser tests.

Run as root from the repository root: ``python tests/data/record_tput.py``.
It builds two namespaces joined by a veth pair (198.18.254.0/24), shapes the
sender with tc where a case needs it, runs ``workers/throughput.py`` there, and writes
``tests/data/tput/*.txt|json|jsonl``. The namespaces and every process are
removed in ``finally``. The files in git were made on a 2-vCPU Debian VM with
nuttcp 6.1.2 and iperf3 3.12.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "cloudbench" / "workers" / "throughput.py"
OUT = Path(__file__).resolve().parent / "tput"
A, B = "cbrec-a", "cbrec-b"
ADDR_A, ADDR_B = "198.18.254.1", "198.18.254.2"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def in_ns(ns: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *cmd)


def up() -> None:
    sh("ip", "netns", "add", A)
    sh("ip", "netns", "add", B)
    sh("ip", "link", "add", "eth0", "netns", A, "type", "veth", "peer", "name", "eth0", "netns", B)
    for ns, addr in ((A, ADDR_A), (B, ADDR_B)):
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def down() -> None:
    for ns in (A, B):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        for p in pids:
            sh("kill", "-9", p, check=False)
        sh("ip", "netns", "del", ns, check=False)


def shape(*args: str) -> None:
    sh("tc", "-n", A, "qdisc", "replace", "dev", "eth0", "root", *args)


def unshape() -> None:
    sh("tc", "-n", A, "qdisc", "del", "dev", "eth0", "root", check=False)


def serve(tmp: Path, tool: str, port: int) -> int:
    cfg = tmp / f"serve-{tool}.json"
    cfg.write_text(json.dumps({"tool": tool, "port": port, "log": str(tmp / f"{tool}.log"),
                               "listen": ADDR_B}))
    r = in_ns(B, sys.executable, str(WORKER), "serve", str(cfg))
    return int(json.loads(r.stdout)["pid"])


def client(tmp: Path, name: str, cfg: dict[str, object]) -> Path:
    path = tmp / f"{name}.json"
    full = {"schema": 1, "host": "a", "target": ADDR_B, "source": ADDR_A, "streams": 1,
            "length": None, "reverse": False, "udp_rate_bps": 0, **cfg}
    path.write_text(json.dumps(full))
    out = tmp / f"{name}.jsonl"
    in_ns(A, sys.executable, str(WORKER), "client", str(path), str(out))
    return out


def tool_text(record: Path) -> str:
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    last = max(r.get("attempt", 0) for r in lines if r.get("type") == "start")
    return "".join(r["text"] + "\n" for r in lines
                   if r.get("type") == "out" and r.get("attempt") == last)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="cbrec-"))
    pids: list[int] = []
    try:
        up()
        pids.append(serve(tmp, "nuttcp", 5300))
        pids.append(serve(tmp, "iperf3", 5310))
        one = [{"seconds": 3, "stop": "time"}]
        cases: list[tuple[str, str, dict[str, object], list[str] | None]] = [
            ("nuttcp_tcp", "nuttcp", {"protocol": "tcp"}, None),
            ("nuttcp_tcp_reverse", "nuttcp", {"protocol": "tcp", "reverse": True}, None),
            ("nuttcp_tcp_n2", "nuttcp", {"protocol": "tcp", "streams": 2}, None),
            ("nuttcp_udp_cap", "nuttcp", {"protocol": "udp", "udp_rate_bps": 300e6},
             ["tbf", "rate", "100000000bit", "burst", "131072", "latency", "50ms"]),
            ("iperf3_tcp", "iperf3", {"protocol": "tcp"}, None),
            ("iperf3_tcp_reverse", "iperf3", {"protocol": "tcp", "reverse": True}, None),
            ("iperf3_tcp_p2", "iperf3", {"protocol": "tcp", "streams": 2}, None),
            ("iperf3_udp_cap", "iperf3", {"protocol": "udp", "udp_rate_bps": 300e6},
             ["tbf", "rate", "100000000bit", "burst", "131072", "latency", "50ms"]),
        ]
        for name, tool, extra, qdisc in cases:
            if qdisc:
                shape(*qdisc)
            port = 5300 if tool == "nuttcp" else 5310
            rec = client(tmp, name, {"tool": tool, "port": port, "interval_s": 1.0,
                                     "bursts": one, **extra})
            ext = "txt" if tool == "nuttcp" else "json"
            (OUT / f"{name}.{ext}").write_text(tool_text(rec))
            unshape()
        tb = ["tbf", "rate", "50000000bit", "burst", str(75 * 2**20), "peakrate", "200000000bit",
              "mtu", "65536", "latency", "50ms"]
        shape(*tb)
        rec = client(tmp, "drain", {
            "tool": "nuttcp", "port": 5300, "protocol": "tcp", "interval_s": 0.5,
            "drain": {"window_s": 2.0, "factor": 0.75},
            "bursts": [{"seconds": 30, "stop": "drain", "pause_after_s": 5.0},
                       {"seconds": 30, "stop": "drain"}]})
        shutil.copy(rec, OUT / "record_nuttcp_drain_tb_small.jsonl")
        unshape()
        shape(*tb)
        rec = client(tmp, "drain3", {
            "tool": "iperf3", "port": 5310, "protocol": "tcp", "interval_s": 0.5, "source": ADDR_A,
            "drain": {"window_s": 2.0, "factor": 0.75},
            "bursts": [{"seconds": 30, "stop": "drain"}]})
        shutil.copy(rec, OUT / "record_iperf3_drain_tb_small.jsonl")
        unshape()
        shape("tbf", "rate", "100000000bit", "burst", "131072", "latency", "50ms")
        rec = client(tmp, "onoff", {
            "tool": "nuttcp", "port": 5300, "protocol": "tcp", "interval_s": 1.0,
            "bursts": [{"seconds": 2, "stop": "time", "pause_after_s": 1.0},
                       {"seconds": 2, "stop": "time", "pause_after_s": 1.0}]})
        shutil.copy(rec, OUT / "record_nuttcp_onoff_cap100.jsonl")
    finally:
        for pid in pids:
            sh("kill", str(pid), check=False)
        down()
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(sorted(p.name for p in OUT.iterdir())))


if __name__ == "__main__":
    main()
