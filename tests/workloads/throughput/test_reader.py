"""Parsers of nuttcp / iperf3 output and of the throughput worker's record.

The inputs are real outputs recorded on this kind of machine by
``tests/data/record_tput.py`` (nuttcp 6.1.2, iperf3 3.12).
"""

from __future__ import annotations

import json

import pytest

from cloudbench.errors import RecordError
from cloudbench.workloads.throughput.reader import (
    MIB,
    data_start_ns,
    parse_iperf3,
    parse_nuttcp,
    parse_throughput_record,
    parse_tool,
)
from tests.paths import DATA as TESTS_DATA

DATA = TESTS_DATA / "tput"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_nuttcp_tcp_adds_the_tail_so_bytes_and_time_add_up() -> None:
    text = read("nuttcp_tcp.txt")
    run = parse_nuttcp(text)
    reported = [line for line in text.splitlines() if "real_sec=" in line]
    assert run.complete and not run.interrupted and run.error is None
    total = round(run.totals["megabytes"] * MIB)
    # this run printed all three intervals; what is left (< 50 ms) is end-of-run rounding
    assert not run.intervals[-1].derived and len(run.intervals) == len(reported) == 3
    assert sum(iv.bytes for iv in run.intervals) == pytest.approx(total, rel=1e-3)
    assert run.intervals[-1].end_s == pytest.approx(run.totals["real_seconds"], abs=0.01)
    for a, b in zip(run.intervals, run.intervals[1:], strict=False):
        assert a.end_s == pytest.approx(b.start_s)
    first = reported[0].split()
    assert run.intervals[0].bytes == round(float(first[0].split("=")[1]) * MIB)
    assert run.intervals[0].rate_bps == pytest.approx(float(first[2].split("=")[1]) * 1e6)
    assert all(iv.retrans is not None for iv in run.intervals)


def test_nuttcp_interval_length_is_bytes_over_rate() -> None:
    run = parse_nuttcp("megabytes=11.4375 real_sec=0.50 rate_Mbps=191.8545 retrans=0\n")
    (iv,) = run.intervals
    assert iv.seconds == pytest.approx(11.4375 * MIB * 8 / 191.8545e6)
    assert not run.complete and run.error is None
    assert parse_nuttcp("nuttcp-t: connect refused\n").error is not None


def test_nuttcp_udp_reports_loss_per_interval_and_in_the_tail() -> None:
    run = parse_nuttcp(read("nuttcp_udp_cap.txt"))
    # 3 s at 1 s intervals printed two lines: the third is derived from the total
    assert [iv.derived for iv in run.intervals] == [False, False, True]
    assert sum(iv.bytes for iv in run.intervals) == round(run.totals["megabytes"] * MIB)
    assert run.intervals[-1].end_s == pytest.approx(run.totals["real_seconds"], abs=0.01)
    assert all(iv.lost is not None and iv.packets for iv in run.intervals)
    assert sum(iv.lost or 0 for iv in run.intervals) == run.totals["drop"]
    assert sum(iv.packets or 0 for iv in run.intervals) == run.totals["pkt"]
    assert run.intervals[0].loss_pct == pytest.approx(100 * run.intervals[0].lost
                                                      / run.intervals[0].packets, rel=1e-3)


def test_nuttcp_multistream_has_no_retransmit_counts() -> None:
    run = parse_nuttcp(read("nuttcp_tcp_n2.txt"))
    assert run.complete and run.intervals
    assert all(iv.retrans is None for iv in run.intervals)


def test_iperf3_forward_rates_come_from_the_receiver_and_retransmits_from_the_sender() -> None:
    doc = json.loads(read("iperf3_tcp.json"))
    run = parse_iperf3(read("iperf3_tcp.json"))
    server = doc["server_output_json"]["intervals"]
    client = doc["intervals"]
    assert run.side == "receiver" and run.complete
    assert [iv.bytes for iv in run.intervals] == [i["sum"]["bytes"] for i in server]
    assert run.intervals[0].retrans == client[0]["sum"]["retransmits"]
    assert run.totals["retrans"] == doc["end"]["sum_sent"]["retransmits"]


def test_iperf3_reverse_uses_the_client_intervals() -> None:
    doc = json.loads(read("iperf3_tcp_reverse.json"))
    run = parse_iperf3(read("iperf3_tcp_reverse.json"), reverse=True)
    assert [iv.bytes for iv in run.intervals] == [i["sum"]["bytes"] for i in doc["intervals"]]
    assert run.side == "receiver"


def test_iperf3_udp_loss_fields() -> None:
    run = parse_tool("iperf3", read("iperf3_udp_cap.json"))
    assert all(iv.lost is not None and iv.packets and iv.jitter_ms is not None
               for iv in run.intervals)
    assert "loss_pct" in run.totals


def test_iperf3_interrupted_drain_falls_back_to_the_sender_side() -> None:
    rec = parse_throughput_record(read("record_iperf3_drain_tb_small.jsonl"))
    (burst,) = rec.bursts
    run = parse_iperf3(burst.text)
    assert run.interrupted and run.side == "sender"
    assert len(run.intervals) >= 8
    assert burst.stop == "drained" and burst.samples


def test_iperf3_garbage_is_an_error_not_an_exception() -> None:
    assert parse_iperf3("{not json").error is not None
    assert parse_iperf3("").error is not None
    with pytest.raises(ValueError):
        parse_tool("netperf", "")


def test_record_of_two_drains_with_rest() -> None:
    rec = parse_throughput_record(read("record_nuttcp_drain_tb_small.jsonl"))
    assert rec.header["schema"] == 1 and rec.header["config"]["tool"] == "nuttcp"
    first, second = rec.bursts
    assert first.stop == second.stop == "drained"
    assert second.rest_before_ns == pytest.approx(5e9, rel=0.05)
    assert second.start_ns - first.sent_until_ns == pytest.approx(second.rest_before_ns, abs=2e6)
    run = parse_nuttcp(first.text)
    assert run.interrupted and run.complete
    start = data_start_ns(first, run)
    # nuttcp connects in a few ms; the first report arrives one interval after data starts
    assert first.start_ns <= start < first.start_ns + 200_000_000


def _record(*lines: dict[str, object]) -> str:
    return "\n".join(json.dumps(x) for x in lines) + "\n"


HEADER = {"type": "header", "schema": 1, "worker": "tput", "config": {"tool": "nuttcp"}}


def test_record_keeps_the_last_attempt_of_a_burst() -> None:
    text = _record(
        HEADER,
        {"type": "start", "burst": 0, "attempt": 0, "t_ns": 0, "argv": ["nuttcp"]},
        {"type": "out", "burst": 0, "attempt": 0, "t_ns": 5, "text": "junk"},
        {"type": "end", "burst": 0, "attempt": 0, "t_ns": 10, "sent_until_ns": 10, "rc": 1,
         "stop": "failed", "stderr": "refused"},
        {"type": "start", "burst": 0, "attempt": 1, "t_ns": 20, "argv": ["nuttcp"]},
        {"type": "out", "burst": 0, "attempt": 1, "t_ns": 30, "text": "megabytes=1 real_sec=1"},
        {"type": "end", "burst": 0, "attempt": 1, "t_ns": 40, "sent_until_ns": 40, "rc": 0,
         "stop": "time", "stderr": ""},
        {"type": "skip", "burst": 1, "reason": "the first drain did not drain"},
    )
    rec = parse_throughput_record(text)
    (b,) = rec.bursts
    assert (b.attempt, b.rc, b.stop, b.lines, b.line_ns) == (1, 0, "time",
                                                            ["megabytes=1 real_sec=1"], [30])
    assert rec.skipped[0]["burst"] == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        (_record({"type": "start"}), "header"),
        (_record({**HEADER, "schema": 99}), "schema 99"),
        ('{"type": "header", "schema": 1}\n{broken\n', "line 2"),
    ],
)
def test_record_refuses_damage_and_unknown_schemas(text: str, words: str) -> None:
    with pytest.raises(RecordError, match=words):
        parse_throughput_record(text)


def test_record_of_an_on_off_pattern() -> None:
    rec = parse_throughput_record(read("record_nuttcp_onoff_cap100.jsonl"))
    assert [b.index for b in rec.bursts] == [0, 1]
    assert rec.bursts[1].rest_before_ns == pytest.approx(1e9, rel=0.05)
    for b in rec.bursts:
        run = parse_nuttcp(b.text)
        assert run.complete and sum(iv.seconds for iv in run.intervals) == pytest.approx(2.0, abs=0.2)
        # behind a 100 Mbit/s cap: 95.6 Mbit/s of TCP goodput
        assert run.totals["rate_Mbps"] == pytest.approx(100 * 1448 / 1514, rel=0.03)
