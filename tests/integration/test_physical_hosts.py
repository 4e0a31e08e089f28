"""A shared NIC on the testbed, measured with nuttcp directly.

p1 and p2 sit on physical host `ph` (NIC 100 Mbit/s), each with its own 80 Mbit/s
vm_type cap; q has a NIC of its own. Alone, p1 gets its own cap; p1 and p2 sending
at once get half the NIC each; q beside them keeps its cap. As TCP goodput
(1448/1514 of the wire rate), within 10 %.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.workloads import parse_spec

from .conftest import in_ns, provisioned, wait_listening

pytestmark = pytest.mark.integration

SPEC = """\
name: nic
vm_types:
  c80: {shaping: cap, rate: 80mbit}
physical_hosts:
  ph: {nic: 100mbit}
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: [p1, p2], vm_type: c80, physical_host: ph}
              s2: {hosts: [q, r1, r2, r3], vm_type: c80}
workloads:
  - kind: echo
    duration: 1s
"""
TCP = goodput_fraction("tcp")
PORT = 5300


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with provisioned(parse_spec(SPEC).topology(), tmp_path) as c:
        yield c


def blast(cluster: Cluster, flows: dict[str, str], seconds: int = 4) -> dict[str, float]:
    """Mbit/s of each sender -> receiver flow, all at once (nuttcp, 4 streams)."""
    procs = {s: subprocess.Popen(
        ["ip", "netns", "exec", str(cluster.host(s).netns), "nuttcp", f"-P{PORT}",
         f"-p{PORT + 1}", f"-T{seconds}", "-N4", "-fparse", cluster.host(d).address],
        stdout=subprocess.PIPE, text=True) for s, d in flows.items()}
    out = {}
    for s, p in procs.items():
        text, _ = p.communicate(timeout=seconds + 20)
        line = [x for x in text.splitlines() if "rate_Mbps=" in x][-1]
        out[s] = float(line.split("rate_Mbps=")[1].split()[0])
    return out


def test_hosts_on_one_physical_host_share_its_nic(cluster: Cluster) -> None:
    phys = cluster.facts["physical_hosts"]["ph"]
    assert phys["hosts"] == ["p1", "p2"] and phys["nic_bps"] == 100e6
    assert cluster.host("q").facts.get("physical_host") is None
    router = phys["router"]
    assert "htb" in in_ns(router, "tc", "qdisc", "show", "dev", phys["device"]).stdout
    servers = [subprocess.Popen(["ip", "netns", "exec", str(cluster.host(n).netns), "nuttcp",
                                 "-S", "--nofork", f"-P{PORT}", f"-p{PORT + 1}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for n in ("r1", "r2", "r3")]
    try:
        for n in ("r1", "r2", "r3"):
            wait_listening(str(cluster.host(n).netns), PORT)
        alone = blast(cluster, {"p1": "r1"})
        together = blast(cluster, {"p1": "r1", "p2": "r2", "q": "r3"})
    finally:
        for s in servers:
            s.terminate()
            s.wait(timeout=10)
    print(f"\np1 alone {alone['p1']:.1f}; together p1 {together['p1']:.1f} p2 "
          f"{together['p2']:.1f} q {together['q']:.1f} Mbit/s")
    assert alone["p1"] == pytest.approx(80 * TCP, rel=0.10)
    assert together["p1"] == pytest.approx(50 * TCP, rel=0.10)
    assert together["p2"] == pytest.approx(50 * TCP, rel=0.10)
    assert together["q"] == pytest.approx(80 * TCP, rel=0.10)
