"""The traceroute workload's spec parameters (``kind: traceroute``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import Duration, Name
from cloudbench.spec.located import Loc
from cloudbench.spec.workload import CheckContext, WorkloadModel

# scamper tracelb's destination ports (its -d default); MDA flows vary udp-dport above 33435.
TRACE_UDP_PORT = 33435
TRACE_UDP_FIRST, TRACE_UDP_LAST = 33434, 33534
TRACE_TCP_PORT = 80


class TracerouteWorkload(WorkloadModel):
    """MDA traceroute (scamper tracelb) from every source to every destination."""

    kind: Literal["traceroute"]
    name: Name = "traceroute"
    sources: str | list[str] = Field("all", description="`all`, a group name or host names")
    destinations: str | list[str] = Field("all", description="`all`, a group name or host names")
    method: Literal["udp-dport", "udp-sport", "icmp-echo", "tcp-sport"] = "udp-dport"
    confidence: Literal[95, 99] = Field(95, description="MDA confidence that no branch was missed")
    gap_limit: int = Field(3, ge=1, le=16, description="unresponsive hops in a row before a branch stops")
    attempts: int = Field(2, ge=1, le=5, description="probes per attempt before a hop is a `*`")
    wait_probe: Duration = Field(0.25, ge=0.01, description="pause between probes of one trace")
    wait_timeout: Duration = Field(5.0, gt=0, description="how long to wait for a reply")
    pps: int = Field(100, ge=1, le=10000, description="probes per second of each source")
    limit: Duration = Field(300.0, gt=0, description="a source's traces are stopped after this")
    asn_table: str | None = Field(None, description="CSV prefix,asn,name (default: the testbed's)")

    def listen_ports(self) -> list[PortRange]:
        """Where the probes go: the destination must answer (a closed UDP port's ICMP
        unreachable, a TCP RST), so its firewall must let them in. scamper's defaults:
        udp-dport varies the port from 33435, udp-sport sends to 33435, tcp-sport to 80."""
        if self.method == "udp-dport":
            return [PortRange(f"{self.name}-udp-dport", TRACE_UDP_FIRST, TRACE_UDP_LAST, ("udp",))]
        if self.method == "udp-sport":
            return [PortRange(f"{self.name}-udp-sport", TRACE_UDP_PORT, TRACE_UDP_PORT, ("udp",))]
        if self.method == "tcp-sport":
            return [PortRange(f"{self.name}-tcp-sport", TRACE_TCP_PORT, TRACE_TCP_PORT, ("tcp",))]
        return []  # icmp-echo: ICMP is always allowed between the campaign's hosts

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        return [*ctx.check_selector(self.sources, (*loc, "sources")),
                *ctx.check_selector(self.destinations, (*loc, "destinations"))]
