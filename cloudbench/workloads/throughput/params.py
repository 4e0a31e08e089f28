"""The throughput workload's spec parameters (``kind: throughput``), and what every
workload run by the throughput worker on one host pair per trial shares
(:class:`PairWorkloadModel`; ``tokenbucket`` is the other)."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from cloudbench.core.pairs import PairSelector
from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import BitRate, Duration, Model, Name, Size
from cloudbench.spec.located import Loc
from cloudbench.spec.workload import CheckContext, WorkloadModel

UDP_SOCKET_BUFFER = 4 * 2**20


class PairWorkloadModel(WorkloadModel):
    """Parameters of a workload measured with nuttcp or iperf3 between the hosts of a pair."""

    tool: Literal["nuttcp", "iperf3"] = "nuttcp"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names")
    pairs: PairSelector = Field("all", description="`all`, a pair group (cross_zone, "
                                "cross_region, …) or a list of [sender, receiver]")
    direction: Literal["forward", "reverse", "both"] = Field(
        "forward", description="forward: first host sends; reverse: second host sends; both: one "
        "after the other")
    interval: Duration = Field(1.0, ge=0.1, description="report interval")
    length: Size | None = Field(None, ge=16, le=16 * 2**20, description="write/buffer size "
                                "(tool default when unset)")
    streams: int = Field(1, ge=1, le=64, description="parallel streams")
    port: int = Field(5000, ge=1024, le=65000, description="server port (nuttcp: control port; "
                      "data from port+1)")

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        return [*ctx.check_selector(self.hosts, (*loc, "hosts")),
                *ctx.check_pair_list(self.pairs, (*loc, "pairs"))]

    def listen_ports(self) -> list[PortRange]:
        # nuttcp: control on `port`, a data connection per stream from port+1;
        # iperf3: control and data on `port`. TCP and UDP (the UDP modes).
        last = self.port + self.streams if self.tool == "nuttcp" else self.port
        return [PortRange(f"{self.name}-{self.tool}", self.port, last, ("tcp", "udp"))]

    def bursts(self) -> list[dict[str, Any]]:
        """What the worker runs per direction (see workers/throughput.py)."""
        raise NotImplementedError

    def tool_options(self) -> dict[str, Any]:
        """The worker config's protocol, UDP rate, socket buffer (and any kind-specific keys)."""
        return {"protocol": "tcp", "udp_rate_bps": 0.0, "socket_buffer": None}


class OnOffModel(Model):
    """An on/off access pattern: send for `send`, pause for `pause` (Uta et al.: 10-30, 5-30)."""

    send: Duration = Field(gt=0, description="sending time of each burst")
    pause: Duration = Field(ge=0, description="pause after each burst")


class ThroughputWorkload(PairWorkloadModel):
    """Bulk throughput between host pairs (nuttcp or iperf3); one trial per pair."""

    kind: Literal["throughput"]
    name: Name = "throughput"
    protocol: Literal["tcp", "udp"] = "tcp"
    duration: Duration = Field(10.0, gt=0, description="measured time per direction (with an on/off "
                               "pattern: bursts and pauses together)")
    udp_rate: BitRate = Field(500e6, gt=0, description="UDP: target rate (e.g. 500mbit)")
    socket_buffer: Size | None = Field(
        None, ge=4096, le=256 * 2**20, description="socket buffer (nuttcp/iperf3 -w); unset: "
        "kernel autotuning for TCP, 4 MiB for UDP so that a shaper drops what exceeds its rate "
        "instead of blocking the sender")
    pattern: Literal["full"] | OnOffModel = Field(
        "full", description="`full` speed, or {send: 10s, pause: 30s}")

    def bursts(self) -> list[dict[str, Any]]:
        if self.pattern == "full":
            return [{"seconds": self.duration, "stop": "time"}]
        cycle = self.pattern.send + self.pattern.pause
        n = max(1, math.ceil(self.duration / cycle)) if cycle > 0 else 1
        return [{"seconds": self.pattern.send, "stop": "time", "pause_after_s": self.pattern.pause}
                for _ in range(n)]

    def tool_options(self) -> dict[str, Any]:
        udp = self.protocol == "udp"
        buf = self.socket_buffer
        return {"protocol": self.protocol, "udp_rate_bps": self.udp_rate if udp else 0.0,
                "socket_buffer": buf if buf is not None else (UDP_SOCKET_BUFFER if udp else None)}
