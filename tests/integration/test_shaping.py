"""A host that saturates its own shaper still returns the ACKs of what it receives at once.

a and b are capped at 20 Mbit/s (a queue of 50 ms at that rate plus the bucket:
102 ms). a sends to b at full speed, which fills a's queue; b sends to a at half
its cap, so b's own queue stays empty and the RTT of b's connection is the time
a's ACKs take to leave a. a's own connection, whose data waits in that queue,
measures its depth. With the ACKs served first
(:func:`cloudbench.providers.netns.shaping.acks_first_commands`) an ACK waits at
most for the packet the shaper holds at its head, up to a 64 KiB GSO packet
(26 ms at 20 Mbit/s): b's RTTs were 6-16 ms. With one FIFO, as before, they
were the depth of a's queue: 31-69 ms.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.workloads import parse_spec

from .conftest import in_ns, provisioned, wait_listening

pytestmark = pytest.mark.integration

SPEC = """\
name: acks
vm_types:
  c20: {shaping: cap, rate: 20mbit, qdisc: QDISC}
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: [a, b], vm_type: c20}
workloads:
  - kind: echo
    duration: 1s
"""
PORT = 5400
SECONDS = 6
PACED = 10  # Mbit/s of b's flow


@pytest.fixture(params=["tbf", "htb"])
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    with provisioned(parse_spec(SPEC.replace("QDISC", request.param)).topology(), tmp_path) as c:
        yield c


def _ns(cluster: Cluster, name: str) -> str:
    return str(cluster.host(name).netns)


def _rtts_ms(ns: str, dst: str) -> list[float]:
    """Smoothed RTTs of the connections from namespace ``ns`` to ``dst``'s data port."""
    text = in_ns(ns, "ss", "-tin", "dst", f"{dst}:{PORT + 1}").stdout
    return [float(m) for m in re.findall(r"\brtt:([0-9.]+)/", text)]


def _pure_acks_first(cmd: str) -> bool:
    return "flowid 10:10" in cmd and "u32" in cmd


def test_a_busy_sender_returns_acks_first(cluster: Cluster) -> None:
    a, b = cluster.host("a"), cluster.host("b")
    servers = [subprocess.Popen(["ip", "netns", "exec", _ns(cluster, n), "nuttcp", "-S",
                                 "--nofork", f"-P{PORT}", f"-p{PORT + 1}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for n in ("a", "b")]
    clients: list[subprocess.Popen[str]] = []
    try:
        for n in ("a", "b"):
            wait_listening(_ns(cluster, n), PORT)
        clients = [subprocess.Popen(["ip", "netns", "exec", _ns(cluster, s), "nuttcp",
                                     f"-P{PORT}", f"-p{PORT + 1}", f"-T{SECONDS}", *opts,
                                     "-fparse", cluster.host(d).address],
                                    stdout=subprocess.PIPE, text=True)
                   for s, d, opts in (("a", "b", ["-N2"]), ("b", "a", [f"-R{PACED}m", "-l8192"]))]
        rtts: list[float] = []  # b's connection: a's ACK delay
        depth: list[float] = []  # a's connections: a's queue
        time.sleep(1)
        for _ in range(8):  # sampled through the middle of the transfer
            time.sleep(SECONDS / 16)
            rtts += _rtts_ms(_ns(cluster, "b"), a.address)
            depth += _rtts_ms(_ns(cluster, "a"), b.address)
        rates = []
        for client in clients:
            out, _ = client.communicate(timeout=SECONDS + 20)
            line = [x for x in out.splitlines() if "rate_Mbps=" in x][-1]
            rates.append(float(line.split("rate_Mbps=")[1].split()[0]))
        stats = in_ns(_ns(cluster, "a"), "tc", "-s", "class", "show", "dev", "eth0").stdout
    finally:
        for proc in (*clients, *servers):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
    acked = re.search(r"class htb 10:10 .*?Sent (\d+) bytes (\d+) pkt", stats, re.S)
    print(f"\na->b {rates[0]:.1f}, b->a {rates[1]:.1f} Mbit/s; b's RTTs to a (ms): "
          f"{sorted(rtts)}; a's own (its queue): {sorted(depth)}; a's ACK class: "
          f"{acked.group(2) if acked else None} packets")
    assert len(rtts) >= 4 and len(depth) >= 4
    assert statistics.median(depth) > 25, "a's queue did not fill: the test shows nothing"
    assert statistics.median(rtts) < min(25.0, statistics.median(depth) / 3), \
        "b's flow waits for ACKs behind a's own data"
    # b sent PACED Mbit/s for SECONDS in 1448-byte segments; GRO lets a acknowledge several
    # at once (about 1 ACK in 4 here), but not one in ten
    segments = PACED * 1e6 / 8 * SECONDS / 1448
    assert acked is not None and int(acked.group(2)) > segments / 10
    assert rates[0] == pytest.approx(20 * goodput_fraction("tcp"), rel=0.05)
    assert rates[1] == pytest.approx(PACED, rel=0.05)
    assert any(_pure_acks_first(c) for c in b.facts["shaping"]["commands"])
