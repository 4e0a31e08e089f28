"""``physical_host:`` on subnets and hosts, ``physical_hosts:`` at the top: the topology they
make, the tc/ip commands of a shared NIC, and located errors for what is wrong."""

from __future__ import annotations

import pytest

from cloudbench.errors import SpecError, SpecErrors
from cloudbench.providers.netns.shaping import NicMember, acks_first_commands, cap_burst, physical_host_commands
from cloudbench.workloads import parse_spec

SPEC = """\
name: coloc
physical_hosts:
  ph1: {nic: 180mbit}
  ph2: {nic: 150mbit}
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: 3, physical_host: ph1}
              s2: {hosts: [{name: b1, physical_host: ph2}, {name: b2, physical_host: ph2}, c1]}
              s3: {hosts: [d1, {name: d2}]}
workloads:
  - kind: echo
    duration: 1s
"""


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def errors_of(text: str) -> list[SpecError]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    e = info.value
    return e.errors if isinstance(e, SpecErrors) else [e]


def test_topology_places_hosts_on_physical_hosts() -> None:
    topo = parse_spec(SPEC).topology()
    placed = {h.name: h.physical_host for h in topo.hosts}
    assert placed == {"s1-1": "ph1", "s1-2": "ph1", "s1-3": "ph1", "b1": "ph2", "b2": "ph2",
                      "c1": None, "d1": None, "d2": None}
    assert topo.physical_hosts == {"ph1": {"nic": 180e6}, "ph2": {"nic": 150e6}}
    again = type(topo).from_dict(topo.to_dict())
    assert [h.physical_host for h in again.hosts] == [h.physical_host for h in topo.hosts]
    assert again.physical_hosts == topo.physical_hosts


def test_unknown_physical_host_is_located() -> None:
    text = SPEC.replace("{name: b2, physical_host: ph2}", "{name: b2, physical_host: ph9}")
    (err,) = errors_of(text)
    assert err.line == line_of(text, "ph9")
    assert err.field.endswith("subnets.s2.hosts[1].physical_host")
    assert "unknown physical host 'ph9'" in err.message and "ph1, ph2" in err.message


def test_unknown_key_in_a_host_entry_and_bad_nic() -> None:
    text = SPEC.replace("{name: b1, physical_host: ph2}", "{name: b1, physicalhost: ph2}")
    text = text.replace("{nic: 150mbit}", "{nic: fast}")
    errs = errors_of(text)
    by_field = {e.field: e for e in errs}
    key = by_field["providers.netns.regions.r1.zones.r1-a.subnets.s2.hosts[0].physicalhost"]
    assert key.line == line_of(text, "physicalhost") and "unknown key" in key.message
    nic = by_field["physical_hosts.ph2.nic"]
    assert nic.line == line_of(text, "nic: fast")


def test_a_physical_host_sits_in_one_zone() -> None:
    text = SPEC.replace("""              s3: {hosts: [d1, {name: d2}]}
""", """          r1-b:
            subnets:
              s3: {hosts: [d1, {name: d2, physical_host: ph1}]}
""")
    (err,) = errors_of(text)
    assert err.line == line_of(text, "name: d2")
    assert "already in zone 'r1-a'" in err.message
    assert f"line {line_of(text, 's1: {hosts: 3')}" in err.message


def test_physical_host_only_on_the_testbed() -> None:
    text = SPEC.replace("providers:\n  netns:", "providers:\n  aws:")
    errs = errors_of(text)
    msgs = [e.message for e in errs if "physical" in e.message]
    assert any("places hosts on the netns testbed" in m for m in msgs)
    assert any(e.field == "physical_hosts" for e in errs)


def test_unused_physical_host_is_a_warning() -> None:
    text = SPEC.replace("  ph2: {nic: 150mbit}\n", "  ph2: {nic: 150mbit}\n  ph3: {nic: 1gbit}\n")
    spec = parse_spec(text, "ok.yaml")
    assert any("'ph3' holds no host" in w and f"ok.yaml:{line_of(text, 'ph3')}" in w
               for w in spec.warnings)


def test_shared_nic_commands() -> None:
    members = [NicMember("a", "198.18.1.10", "cbx-_z0", "h0"),
               NicMember("b", "198.18.1.11", "cbx-_z0", "h1")]
    cmds = [" ".join(c) for c in physical_host_commands(200e6, members, "nic0")]
    b = cap_burst(200e6)
    assert cmds[0] == "ip link add nic0 type ifb"
    assert (f"tc class replace dev nic0 parent 1: classid 1:1 htb rate 200000000bit ceil "
            f"200000000bit burst {b} cburst {b}") in cmds
    # one guaranteed fair share per member, borrowing up to the NIC
    # the ACKs of what the members receive first, by the host queues' pure-ACK rule
    host_rule = " ".join(acks_first_commands("eth0", "1:1", 1, 1e6, 1e6)[-1])
    rule = host_rule[host_rule.index(" u32 "):host_rule.index(" flowid")]
    assert f"tc filter add dev nic0 parent 1: protocol ip prio 1{rule} flowid 1:2" in cmds
    for cls, addr, peer in (("1:a", "198.18.1.10", "h0"), ("1:b", "198.18.1.11", "h1")):
        assert (f"tc class replace dev nic0 parent 1:1 classid {cls} htb rate 98000000bit "
                f"ceil 200000000bit burst {b} cburst {b} prio 1") in cmds
        assert f"tc qdisc replace dev nic0 parent {cls} bfifo limit {1_250_000}" in cmds
        assert (f"tc filter add dev nic0 parent 1: protocol ip prio 2 u32 match ip src "
                f"{addr}/32 flowid {cls}") in cmds
        assert (f"tc filter add dev {peer} ingress protocol all prio 1 u32 match u32 0 0 "
                "action mirred egress redirect dev nic0") in cmds
    assert physical_host_commands(1e9, [], "nic1") == []
