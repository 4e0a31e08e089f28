"""The colocation audit's spec parameters (``kind: colocation``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cloudbench.analysis.colocation import DEFAULT_THRESHOLD
from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import BitRate, Duration, Name
from cloudbench.spec.located import Loc
from cloudbench.spec.workload import CheckContext, WorkloadModel


class ColocationWorkload(WorkloadModel):
    """Every host sends at full speed at once, then probes find the hosts that share a NIC.

    One trial per repetition: the full-load probe (each host to a distinct peer, so
    every host sends and receives one flow), then the adaptive interference probes
    of :mod:`cloudbench.analysis.colocation` (``interference: false`` skips them).
    """

    kind: Literal["colocation"]
    name: Name = "colocation"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names "
                                   "(at least two)")
    tool: Literal["nuttcp", "iperf3"] = "nuttcp"
    streams: int = Field(4, ge=1, le=64, description="parallel TCP streams per sender")
    duration: Duration = Field(5.0, gt=0, description="length of the full-load probe")
    probe: Duration = Field(3.0, gt=0, description="length of each interference probe")
    interval: Duration = Field(0.5, ge=0.1, description="report interval; a probe's rate is the "
                               "mean over its intervals after the first")
    threshold: float = Field(DEFAULT_THRESHOLD, gt=0, lt=1, description="a sender below "
                             "(1 − threshold) × its baseline lost bandwidth to a partner")
    max_probes: int = Field(40, ge=1, le=500, description="stop the interference phase after "
                            "this many probes (full load included)")
    interference: bool = Field(True, description="run the interference phase (false: full load "
                               "only)")
    nominal: dict[str, BitRate] = Field(
        default_factory=dict, description="nominal egress per vm_type (e.g. {n1-standard-4: "
        "10gbit}) where neither the testbed's vm_type shaping nor the catalogue gives one")
    port: int = Field(5200, ge=1024, le=65000, description="server port (nuttcp: control port; "
                      "data from port+1)")

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        errors = ctx.check_selector(self.hosts, (*loc, "hosts"))
        if not errors and len(set(ctx.resolve_hosts(self.hosts))) < 2:
            errors.append(ctx.error((*loc, "hosts"), "the colocation audit needs at least two "
                                    "hosts (each sends to another)"))
        return errors

    def listen_ports(self) -> list[PortRange]:
        # as the throughput workloads: nuttcp control on `port`, a data connection per stream
        # from port+1; iperf3 control and data on `port` (TCP only here)
        last = self.port + self.streams if self.tool == "nuttcp" else self.port
        return [PortRange(f"{self.name}-{self.tool}", self.port, last, ("tcp",))]

    def probe_seconds(self, phase: str) -> float:
        return self.duration if phase == "full" else self.probe

    def tool_config(self, seconds: float) -> dict[str, Any]:
        """The keys of a ``throughput.py client`` config this workload sets (see workers/throughput.py)."""
        return {"tool": self.tool, "port": self.port, "interval_s": self.interval, "length": None,
                "streams": self.streams, "reverse": False, "protocol": "tcp",
                "udp_rate_bps": 0.0, "socket_buffer": None,
                "bursts": [{"seconds": seconds, "stop": "time"}]}
