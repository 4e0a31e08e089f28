"""A shared NIC on the testbed, measured with nuttcp directly.

p1 and p2 sit on physical host `ph` (NIC 100 Mbit/s), each with its own 80 Mbit/s
vm_type cap; q has a NIC of its own. As TCP goodput (1448/1514 of the wire rate),
the test asserts what the shapers guarantee, not how CPU scheduling splits the NIC:

* alone, p1 sends at its own cap (80, not the NIC's 100): no more than 5 % over it
  (the shapers' own spread), at least 75 %;
* p1 and p2 at once keep the NIC busy and no more: together 90-105 % of it (each can
  fill 80 of its 100, so only two starved senders leave it idle);
* neither gets more than its bound (cap or NIC, + 5 %) nor less than half its fair
  share (nic / 2); q beside them keeps its own cap (75-105 %).

The split between p1 and p2 is printed, not asserted: each member's HTB class is
guaranteed nic / 2 only while its sender offers that much, which a sender waiting for
a busy core does not (the colocation test's split ranged -17..+16 % of the fair share
under load; here -3..+4 % in 8 runs beside a busy loop). A NIC cap that is not shared
(p1 + p2 = 153) or not applied (p1 and p2 at 80 each), or a member starved, fails.
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
    cap, nic = 80 * TCP, 100 * TCP
    print(f"\np1 alone {alone['p1']:.1f}; together p1 {together['p1']:.1f} p2 "
          f"{together['p2']:.1f} q {together['q']:.1f} Mbit/s; split p1 {together['p1'] / (nic / 2) - 1:+.1%} "
          f"p2 {together['p2'] / (nic / 2) - 1:+.1%} of the fair share")
    assert 0.75 * cap <= alone["p1"] <= 1.05 * cap, alone
    shared = together["p1"] + together["p2"]
    assert 0.90 * nic <= shared <= 1.05 * nic, (shared, nic)
    for h in ("p1", "p2"):
        assert 0.5 * nic / 2 <= together[h] <= 1.05 * min(cap, nic), (h, together[h])
    assert 0.75 * cap <= together["q"] <= 1.05 * cap, together
