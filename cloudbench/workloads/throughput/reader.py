"""Parsers of throughput tool output (nuttcp ``-fparse``, iperf3 ``-J``) and of the
throughput worker's record (``workers/throughput.py``). Pure: text in, dataclasses out.

nuttcp ``-fparse`` prints ``key=value`` lines: one per interval (``megabytes=
real_sec= rate_Mbps=`` and ``retrans=`` for TCP or ``drop= pkt= data_loss=`` for
UDP) and a final line (``real_seconds=``, ``tx_cpu=``, ``rx_cpu=``, ``rtt_ms=``).
Its ``megabytes`` are MiB and its ``rate_Mbps`` 10⁶ bit/s; ``real_sec`` is
rounded to 10 ms, so an interval's length is taken as bytes / rate (exact to
about 10⁻⁵) when the rate is not zero. A run of T seconds at 1 s intervals
prints T−1 interval lines when it transmits (the last partial interval only
shows in the total): the parser adds that tail as a *derived* interval = total −
sum of the intervals, so that bytes and time add up.

iperf3 ``-J``: ``intervals[].sum`` is measured where the client runs (sender in
forward mode); with ``--get-server-output`` and a ``-J`` server the receiver's
intervals are in ``server_output_json``. Rates are taken at the receiver when it
is known (goodput), retransmits from the sender.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cloudbench.errors import RecordError
from cloudbench.store.formats import THROUGHPUT_RECORD

MIB = 1024 * 1024
# Below this, a remainder between the intervals and the total is rounding.
MIN_TAIL_S = 0.05


@dataclass
class Interval:
    """One report interval of a throughput tool: bytes and rate, and retransmits or UDP losses."""
    start_s: float  # since the tool's first report interval began
    end_s: float
    bytes: int
    rate_bps: float
    retrans: int | None = None
    lost: int | None = None  # UDP datagrams lost
    packets: int | None = None  # UDP datagrams expected (received + lost)
    loss_pct: float | None = None
    jitter_ms: float | None = None
    derived: bool = False  # computed from the total, not reported by the tool

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass
class ToolRun:
    """One run of a throughput tool, parsed: its intervals, totals and whether it finished."""
    tool: str
    intervals: list[Interval]
    totals: dict[str, float] = field(default_factory=dict)
    side: str = "receiver"  # where the intervals' bytes were counted
    complete: bool = False  # the tool printed its final summary
    interrupted: bool = False
    error: str | None = None


def parse_kv(line: str) -> dict[str, str]:
    """The ``key=value`` items of a line (nuttcp's -fparse output)."""
    out: dict[str, str] = {}
    for item in line.split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def _f(d: dict[str, str], key: str) -> float | None:
    try:
        return float(d[key])
    except (KeyError, ValueError):
        return None


def _i(d: dict[str, str], key: str) -> int | None:
    v = _f(d, key)
    return None if v is None else round(v)


def parse_nuttcp(text: str) -> ToolRun:
    """Intervals and totals of one nuttcp ``-fparse`` run (client stdout)."""
    run = ToolRun("nuttcp", [])
    t = 0.0
    for line in text.splitlines():
        if "transfer interrupted" in line:
            run.interrupted = True
            continue
        kv = parse_kv(line)
        if "real_sec" in kv:
            mb = _f(kv, "megabytes") or 0.0
            rate = (_f(kv, "rate_Mbps") or 0.0) * 1e6
            nbytes = round(mb * MIB)
            secs = nbytes * 8 / rate if rate > 0 else (_f(kv, "real_sec") or 0.0)
            drop, pkt = _i(kv, "drop"), _i(kv, "pkt")
            run.intervals.append(Interval(
                t, t + secs, nbytes, rate, retrans=_i(kv, "retrans"), lost=drop, packets=pkt,
                loss_pct=_f(kv, "data_loss")))
            t += secs
        elif "real_seconds" in kv:
            run.complete = True
            run.totals = {k: v for k in kv if (v := _f(kv, k)) is not None}
    if run.complete:
        _add_tail(run)
    elif not run.intervals:
        run.error = "no nuttcp report in the output"
    return run


def _add_tail(run: ToolRun) -> None:
    tot = run.totals
    total_bytes = round(tot.get("megabytes", 0.0) * MIB)
    total_s = tot.get("real_seconds", 0.0)
    rate = tot.get("rate_Mbps", 0.0) * 1e6
    if rate > 0:
        total_s = total_bytes * 8 / rate
    t = run.intervals[-1].end_s if run.intervals else 0.0
    rest_b = total_bytes - sum(iv.bytes for iv in run.intervals)
    rest_s = total_s - t
    if rest_s < MIN_TAIL_S or rest_b < 0:
        return

    def rest_of(key: str, attr: str) -> int | None:
        if key not in tot:
            return None
        parts = [getattr(iv, attr) for iv in run.intervals]
        if any(p is None for p in parts):
            return None
        return max(0, round(tot[key]) - sum(int(p) for p in parts))

    lost, pkts = rest_of("drop", "lost"), rest_of("pkt", "packets")
    loss = 100.0 * lost / pkts if lost is not None and pkts else None
    run.intervals.append(Interval(t, t + rest_s, rest_b, rest_b * 8 / rest_s,
                                  retrans=rest_of("retrans", "retrans"), lost=lost, packets=pkts,
                                  loss_pct=loss, derived=True))


def parse_iperf3(text: str, reverse: bool = False) -> ToolRun:
    """Intervals of one iperf3 ``-J`` client run; receiver-side when available."""
    try:
        doc: dict[str, Any] = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        return ToolRun("iperf3", [], error=f"iperf3 output is not JSON: {e}")
    client = doc.get("intervals") or []
    server = (doc.get("server_output_json") or {}).get("intervals") or []
    if reverse:
        recv, send = client, server
    else:
        recv, send = server, client
    side = "receiver"
    if not recv:
        recv, side = client, ("receiver" if reverse else "sender")
    run = ToolRun("iperf3", [], side=side, error=doc.get("error"))
    run.interrupted = bool(doc.get("error")) and "interrupt" in str(doc.get("error"))
    for k, iv in enumerate(recv):
        s = iv.get("sum") or {}
        if s.get("omitted"):
            continue
        retrans = None
        if k < len(send):
            r = (send[k].get("sum") or {}).get("retransmits")
            retrans = int(r) if r is not None else None
        elif side == "sender":
            r = s.get("retransmits")
            retrans = int(r) if r is not None else None
        lost = s.get("lost_packets")
        run.intervals.append(Interval(
            float(s.get("start", 0.0)), float(s.get("end", 0.0)), int(s.get("bytes", 0)),
            float(s.get("bits_per_second", 0.0)), retrans=retrans,
            lost=int(lost) if lost is not None else None,
            packets=int(s["packets"]) if "packets" in s and lost is not None else None,
            loss_pct=float(s["lost_percent"]) if "lost_percent" in s else None,
            jitter_ms=float(s["jitter_ms"]) if "jitter_ms" in s else None))
    end = doc.get("end") or {}
    if end:
        run.complete = "sum_received" in end or "sum" in end
        recv_sum = end.get("sum_received") or end.get("sum") or {}
        sent_sum = end.get("sum_sent") or {}
        cpu = end.get("cpu_utilization_percent") or {}
        run.totals = {
            "bytes": float(recv_sum.get("bytes", 0)),
            "seconds": float(recv_sum.get("seconds", 0.0)),
            "rate_bps": float(recv_sum.get("bits_per_second", 0.0)),
            "sent_bytes": float(sent_sum.get("bytes", 0)),
            "retrans": float(sent_sum.get("retransmits", 0) or 0),
            "tx_cpu": float(cpu.get("host_total", 0.0)),
            "rx_cpu": float(cpu.get("remote_total", 0.0)),
        }
        if "lost_percent" in recv_sum:
            run.totals["loss_pct"] = float(recv_sum["lost_percent"])
    if not run.intervals and run.error is None:
        run.error = "no iperf3 interval in the output"
    return run


def parse_tool(tool: str, text: str, reverse: bool = False) -> ToolRun:
    """Parse a tool's recorded output (nuttcp or iperf3)."""
    if tool == "nuttcp":
        return parse_nuttcp(text)
    if tool == "iperf3":
        return parse_iperf3(text, reverse)
    raise ValueError(f"no parser for tool {tool!r}")


# -- the worker's record ------------------------------------------------------------------


@dataclass
class BurstRecord:
    """One burst of a tput worker record: its times, the tool's exit code and output."""
    index: int
    attempt: int
    start_ns: int
    end_ns: int
    sent_until_ns: int
    rest_before_ns: int
    rc: int
    stop: str  # time | drained | deadline | failed
    stderr: str
    argv: list[str]
    lines: list[str] = field(default_factory=list)
    line_ns: list[int] = field(default_factory=list)  # when each line arrived
    samples: list[tuple[int, int]] = field(default_factory=list)  # (t_ns, counter bytes)

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.lines else "")


@dataclass
class ThroughputRecord:
    """A throughput worker record: its header, its bursts and the bursts it skipped."""
    header: dict[str, Any]
    bursts: list[BurstRecord]
    skipped: list[dict[str, Any]] = field(default_factory=list)


def parse_throughput_record(text: str, source: str = "worker record") -> ThroughputRecord:
    """The last attempt of every burst of a ``throughput.py client`` record (``source`` names it in errors)."""
    header: dict[str, Any] | None = None
    current: dict[tuple[int, int], BurstRecord] = {}
    ended: dict[int, BurstRecord] = {}
    skipped: list[dict[str, Any]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as e:
            raise RecordError(source, f"line {n} is not JSON: {e}") from e
        typ = rec.get("type")
        if n == 1 or header is None:
            if typ != "header":
                raise RecordError(source, "the record does not start with a header")
            THROUGHPUT_RECORD.check(rec.get("schema"), source, error=RecordError)
            header = rec
            continue
        key = (int(rec.get("burst", -1)), int(rec.get("attempt", 0)))
        if typ == "start":
            current[key] = BurstRecord(key[0], key[1], int(rec["t_ns"]), -1, -1, 0, -1, "running",
                                       "", list(rec.get("argv", [])))
        elif typ == "out" and key in current:
            current[key].lines.append(str(rec["text"]))
            current[key].line_ns.append(int(rec["t_ns"]))
        elif typ == "sample" and key in current:
            current[key].samples.append((int(rec["t_ns"]), int(rec["bytes"])))
        elif typ == "end" and key in current:
            b = current[key]
            b.end_ns, b.sent_until_ns = int(rec["t_ns"]), int(rec["sent_until_ns"])
            b.rest_before_ns, b.rc = int(rec.get("rest_before_ns", 0)), int(rec["rc"])
            b.stop, b.stderr = str(rec["stop"]), str(rec.get("stderr", ""))
            ended[key[0]] = b  # a later attempt replaces an earlier one
        elif typ == "skip":
            skipped.append(rec)
    if header is None:
        raise RecordError(source, "the record is empty")
    return ThroughputRecord(header, [ended[i] for i in sorted(ended)], skipped)


def data_start_ns(burst: BurstRecord, run: ToolRun) -> int:
    """When data began to flow in ``burst``, on the record's clock.

    nuttcp prints each interval as it ends: the first report's arrival minus the
    first interval's length (late by the report's one-way delay). iperf3 prints
    at the end, so its start is the tool's start (early by the connection setup).
    """
    if run.tool == "nuttcp" and run.intervals and not run.intervals[0].derived:
        for text, t in zip(burst.lines, burst.line_ns, strict=True):
            if "real_sec=" in text:
                return max(burst.start_ns, t - round(run.intervals[0].seconds * 1e9))
    return burst.start_ns
