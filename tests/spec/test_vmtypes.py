"""VM types of the testbed: the catalogue, the spec's own types, and their tc commands."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from cloudbench.core.topology import Topology
from cloudbench.errors import SpecError
from cloudbench.providers.netns.shaping import acks_first_commands, cap_burst, queue_limit, tc_commands
from cloudbench.spec.vmtypes import BUILTIN_VM_TYPES, VmTypeModel, expected_goodput, goodput_fraction, resolve_vm_type
from cloudbench.workloads import parse_spec

SPEC = """\
name: shaped
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: [a, b], vm_type: tb-test}
              s2: {hosts: [c], vm_type: local.1g}
vm_types:
  tb-test: {shaping: token_bucket, high_rate: 200mbit, low_rate: 50mbit, budget: 75MiB}
workloads:
  - kind: tbdrain
    pairs: [[a, b]]
"""


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def spec_error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, "bad.yaml")
    return info.value


def test_builtin_catalogue_is_valid_and_has_the_three_kinds() -> None:
    shapings = {t.shaping for t in BUILTIN_VM_TYPES.values()}
    assert shapings == {"none", "cap", "token_bucket"}
    tb = BUILTIN_VM_TYPES["local.tb-small"]
    assert tb.time_to_empty() == pytest.approx(75 * 2**20 * 8 / 150e6)
    assert BUILTIN_VM_TYPES["local"].time_to_empty() is None


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"shaping": "cap"}, "needs rate"),
        ({"shaping": "cap", "rate": "1gbit", "budget": "1MiB"}, "takes no budget"),
        ({"shaping": "token_bucket", "high_rate": "50mbit", "low_rate": "200mbit",
          "budget": "1MiB"}, "high_rate must be above low_rate"),
        ({"shaping": "token_bucket", "high_rate": "200mbit", "budget": "1MiB"}, "needs low_rate"),
        ({"shaping": "none", "rate": "1gbit"}, "takes no rate"),
        ({"shaping": "cap", "rate": "fast"}, "bad bit rate"),
    ],
)
def test_vm_type_model_rejects(fields: dict[str, str], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        VmTypeModel.model_validate(fields)


def test_units_are_bits_and_bytes_not_tc_units() -> None:
    t = VmTypeModel.model_validate({"shaping": "token_bucket", "high_rate": "200mbit",
                                    "low_rate": "50mbit", "budget": "75MiB"})
    assert (t.high_rate, t.low_rate, t.budget) == (200e6, 50e6, 75 * 2**20)
    assert VmTypeModel.model_validate({"shaping": "cap", "rate": "1gbit"}).rate == 1e9


def test_tc_commands_tbf_token_bucket_spell_out_bits_and_bytes() -> None:
    cmd, *queue = tc_commands(BUILTIN_VM_TYPES["local.tb-small"])
    assert cmd == ["qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "tbf",
                   "rate", "50000000bit", "burst", str(75 * 2**20), "peakrate", "200000000bit",
                   "mtu", "65536", "latency", "50ms"]
    # tc's limit for TBF: min(low * latency + budget, high * latency + peak bucket)
    assert queue == acks_first_commands("eth0", "1:1", 200_000_000 // 8 // 20 + 65536, 50e6, 200e6)


def test_tc_commands_cap_and_htb() -> None:
    cap, *queue = tc_commands(BUILTIN_VM_TYPES["local.1g"])
    assert cap[7:] == ["tbf", "rate", "1000000000bit", "burst", str(cap_burst(1e9)), "latency",
                       "50ms"]
    assert queue == acks_first_commands("eth0", "1:1", 10**9 // 8 // 20 + 250_000, 1e9, 1e9)
    assert cap_burst(1e9) == 250_000 and cap_burst(10e6) == 128 * 1024
    htb = VmTypeModel.model_validate({"shaping": "token_bucket", "high_rate": "200mbit",
                                      "low_rate": "50mbit", "budget": "10MiB", "qdisc": "htb"})
    q, c, *queue = tc_commands(htb, dev="eth1")
    assert q == ["qdisc", "replace", "dev", "eth1", "root", "handle", "1:", "htb", "default", "1"]
    assert c[-8:] == ["rate", "50000000bit", "ceil", "200000000bit", "burst", str(10 * 2**20),
                      "cburst", "65536"]
    assert queue == acks_first_commands("eth1", "1:1", 200_000_000 // 8 // 20 + 65536, 50e6, 200e6)
    assert tc_commands(BUILTIN_VM_TYPES["local"]) == []


@pytest.mark.parametrize(("fields", "limit"), [
    ({"shaping": "cap", "rate": "20mbit"}, 20_000_000 // 8 // 20 + 128 * 1024),
    ({"shaping": "cap", "rate": "20mbit", "latency": "0.0104s"}, 20_000_000 // 8 // 100 + 128 * 1024),
    # the bucket term wins when the budget is small: low * latency + budget
    ({"shaping": "token_bucket", "high_rate": "1gbit", "low_rate": "10mbit", "budget": 100_000},
     10_000_000 // 8 // 20 + 100_000),
])
def test_queue_limit_is_what_tc_computes_for_latency(fields: dict[str, Any], limit: int) -> None:
    assert queue_limit(VmTypeModel.model_validate(fields)) == limit


def _ip_packet(*, flags: int = 0x10, tcp_options: int = 12, payload: int = 0, proto: int = 6,
               ihl: int = 5, ack: int = 1, fill: int = 0) -> bytes:
    """An IPv4 packet's first bytes: TCP (flags, options, payload) or, for proto 17, UDP."""
    l4 = (struct.pack("!HHIIBBHHH", 40000, 5001, 1, ack, (20 + tcp_options) // 4 << 4, flags, 512, 0, 0)
          + bytes(tcp_options) if proto == 6 else struct.pack("!HHHH", 40000, 5001, 8 + payload, 0))
    opts = bytes(4 * (ihl - 5))
    total = 4 * ihl + len(l4) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, total, 0, 0x4000, 64, proto, 0,
                     bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2]))
    return ip + opts + l4 + bytes([fill]) * payload


def _u32_matches(cmd: list[str]) -> Callable[[bytes], bool]:
    """A function: does tc's ``u32 match uN value mask at off`` list in ``cmd`` match a packet."""
    sizes = {"u8": 1, "u16": 2, "u32": 4}
    tests = [(sizes[cmd[i + 1]], int(cmd[i + 2], 16), int(cmd[i + 3], 16), int(cmd[i + 5]))
             for i, w in enumerate(cmd) if w == "match"]
    assert tests and all(cmd[i + 4] == "at" for i, w in enumerate(cmd) if w == "match")
    return lambda pkt: all(int.from_bytes(pkt[at:at + n], "big") & mask == value
                           for n, value, mask, at in tests)


@pytest.mark.parametrize(("packet", "first"), [
    ({"tcp_options": 0}, True),                      # a bare ACK (40 bytes)
    ({}, True),                                      # with timestamps (52)
    ({"tcp_options": 40}, True),                     # timestamps and 3 SACK blocks (80)
    ({"payload": 75}, True),                         # 127 bytes, ACK only: counted as an ACK
    ({"payload": 76}, False),                        # 128 bytes
    ({"flags": 0x18, "payload": 64}, False),         # PSH|ACK: an echo message
    ({"flags": 0x18, "payload": 1448}, False),       # bulk data
    ({"flags": 0x10, "payload": 1448}, False),       # bulk data without PSH
    ({"flags": 0x11}, False),                        # FIN|ACK
    ({"flags": 0x12}, False),                        # SYN|ACK
    ({"flags": 0x50}, False),                        # ECE|ACK
    ({"ihl": 6, "ack": 0x100000}, False),            # IP options: byte 33 is 0x10 but no flag
    ({"proto": 17, "payload": 20, "fill": 0x10}, False),  # UDP, 0x10 at byte 33
])
def test_the_acks_first_filter_matches_pure_acks_only(packet: dict[str, int], first: bool) -> None:
    *_, flt = acks_first_commands("eth0", "1:1", 700_000, 20e6, 20e6)
    assert flt[flt.index("flowid") + 1] == "10:10"
    assert _u32_matches(flt)(_ip_packet(**packet)) is first


def test_acks_first_classes_only_order_packets() -> None:
    q, top, ack, rest, ackq, fifo, _ = acks_first_commands("eth0", "1:1", 700_000, 20e6, 30e6)
    assert q[4:] == ["parent", "1:1", "handle", "10:", "htb", "default", "20"]
    assert fifo == ["qdisc", "replace", "dev", "eth0", "parent", "10:20", "bfifo", "limit", "700000"]
    assert ackq[5:8] == ["10:10", "pfifo", "limit"]

    def arg(cmd: list[str], key: str) -> str:
        return cmd[cmd.index(key) + 1]

    assert arg(top, "rate") == "100000000000bit"
    assert [arg(c, "classid") for c in (ack, rest)] == ["10:10", "10:20"]
    assert [arg(c, "prio") for c in (ack, rest)] == ["0", "1"]
    # ACKs guaranteed 2 % of the sustained rate, data the rest; both may borrow up to the top
    assert [arg(c, "rate") for c in (ack, rest)] == ["400000bit", "19600000bit"]
    assert {arg(c, "ceil") for c in (ack, rest)} == {arg(top, "rate")}
    huge = acks_first_commands("eth0", "1:1", 700_000, 40e9, 40e9)[1]
    assert arg(huge, "rate") == "400000000000bit"  # 10 x the peak when that is above 100 Gbit/s


def test_goodput_fraction_matches_frame_arithmetic() -> None:
    # MTU 1500, TCP with timestamps: 1448 payload bytes per 1514-byte frame;
    # the testbed measured 191 Mbit/s behind a 200 Mbit/s shaper.
    assert goodput_fraction("tcp") == pytest.approx(1448 / 1514)
    assert 200e6 * goodput_fraction("tcp") == pytest.approx(191.28e6, rel=1e-3)
    assert goodput_fraction("udp", payload=1472) == pytest.approx(1472 / 1514)
    # 8192-byte datagrams travel in 6 fragments of ≤ 1480 bytes, each with IP + Ethernet headers
    assert goodput_fraction("udp", payload=8192) == pytest.approx(8192 / (8192 + 8 + 6 * 34))
    exp = expected_goodput(BUILTIN_VM_TYPES["local.tb-small"])
    assert exp["time_to_empty"] == pytest.approx(78643200 * 8 / 150e6)
    assert exp["budget_bits"] == pytest.approx(78643200 * 8 * 1448 / 1514)


def test_spec_vm_types_reach_the_topology() -> None:
    spec = parse_spec(SPEC, "ok.yaml")
    topo = spec.topology()
    assert topo.vm_types["tb-test"]["budget"] == 75 * 2**20
    again = Topology.from_dict(topo.to_dict())
    assert again.vm_types == topo.vm_types
    got = resolve_vm_type("tb-test", {"tb-test": VmTypeModel.model_validate(topo.vm_types["tb-test"])})
    assert got is not None and got.high_rate == 200e6


def test_unknown_vm_type_on_netns_names_the_line() -> None:
    text = SPEC.replace("vm_type: local.1g", "vm_type: local.2g")
    e = spec_error(text)
    assert e.line == line_of(text, "local.2g")
    assert "unknown vm_type 'local.2g'" in str(e) and "tb-test" in str(e)
    assert e.field.endswith("subnets.s2.vm_type")


def test_a_user_type_may_not_shadow_a_builtin() -> None:
    text = SPEC.replace("  tb-test: {", "  local.1g: {").replace("vm_type: tb-test", "vm_type: local")
    e = spec_error(text)
    assert "built-in" in str(e) and e.line == line_of(text, "  local.1g: {")


def test_bad_vm_type_definition_names_the_line() -> None:
    text = SPEC.replace("low_rate: 50mbit, ", "")
    e = spec_error(text)
    assert e.line == line_of(text, "tb-test: {shaping")
    assert "needs low_rate" in str(e)


def test_unknown_key_in_vm_type_lists_known_keys() -> None:
    text = SPEC.replace("budget: 75MiB", "budget: 75MiB, bucket: 1")
    e = spec_error(text)
    assert "unknown key 'bucket'" in str(e) and "high_rate" in str(e)
