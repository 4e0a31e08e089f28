"""The echo workload's spec parameters (``kind: echo``) and their checks."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import Duration, Model, Name, Size
from cloudbench.spec.located import Loc
from cloudbench.spec.workload import CheckContext, WorkloadModel

MAX_PAYLOAD = 64 * 1024


class QuorumModel(Model):
    """Quorum latency: the k-th fastest reply among a group's hosts, per round."""

    group: str | None = Field(None, description="a name from `groups`")
    hosts: list[str] | None = Field(None, description="host names, instead of a group")
    k: list[Annotated[int, Field(ge=1)]] = Field(min_length=1, description="k of the Qk/n to report")


class EchoWorkload(WorkloadModel):
    """All-pairs TCP echo RTT (StormCloud's design, done better)."""

    kind: Literal["echo"]
    name: Name = "echo"
    hosts: str | list[str] = Field("all", description="`all`, a group name or host names")
    # Bounds are the worker's: it refuses anything outside them.
    rate: float = Field(100.0, gt=0, le=1e6, allow_inf_nan=False, description="rounds per second")
    payload: Size = Field(1024, ge=16, le=MAX_PAYLOAD, description="bytes per message (<= 64 KiB)")
    duration: Duration = Field(20.0, gt=0, le=1e7, allow_inf_nan=False, description="measured time per trial")
    warmup: Duration = Field(1.0, ge=0, le=3600, allow_inf_nan=False,
                             description="extra time before, kept but flagged")
    timeout: Duration = Field(1.0, gt=0, le=3600, allow_inf_nan=False,
                              description="a reply later than this is a timeout")
    self_loop: bool = True
    rx_timestamp: Literal["kernel", "user"] = Field(
        "kernel", description="an echo's receive time: `kernel` (when its bytes arrived, "
        "SO_TIMESTAMPNS, as ping does) or `user` (when the worker read it)")
    window: Duration = Field(30.0, gt=0, description="window of the windowed means")
    port: int = Field(7100, ge=1024, le=65535)
    quorums: list[QuorumModel] = Field(default_factory=list)

    def listen_ports(self) -> list[PortRange]:
        return [PortRange(f"{self.name}-echo", self.port, self.port, ("tcp",))]

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        errors = ctx.check_selector(self.hosts, (*loc, "hosts"))
        for qi, q in enumerate(self.quorums):
            errors += self._check_quorum(q, ctx, (*loc, "quorums", qi))
        return errors

    def _check_quorum(self, q: QuorumModel, ctx: CheckContext, qloc: Loc) -> list[SpecError]:
        if (q.group is None) == (q.hosts is None):
            return [ctx.error(qloc, "a quorum names either `group` or `hosts`")]
        if q.group is not None and q.group not in ctx.groups:
            return [ctx.error((*qloc, "group"), f"quorum names unknown group {q.group!r}" + ctx.choices())]
        errors: list[SpecError] = []
        members = q.hosts if q.hosts is not None else ctx.groups[q.group or ""]
        for hi, h in enumerate(q.hosts or []):
            if h not in ctx.hosts:
                errors.append(ctx.error((*qloc, "hosts", hi), f"quorum names unknown host {h!r}"))
        if len(set(members)) != len(members):
            dup = sorted({m for m in members if members.count(m) > 1})
            errors.append(ctx.error(qloc, f"the quorum lists {', '.join(dup)} more than once"))
        selector_ok = not ctx.check_selector(self.hosts, qloc)
        if self.hosts != "all" and selector_ok and all(m in ctx.hosts for m in members):
            outside = [m for m in members if m not in ctx.resolve_hosts(self.hosts)]
            if outside:
                errors.append(ctx.error(qloc, f"quorum members {', '.join(outside)} are not among "
                                        f"the workload's hosts, so they are never measured"))
        # Without a self-loop a member hears only the others: k-of-(n-1) replies at most.
        replies = len(members) if self.self_loop else len(members) - 1
        for ki, k in enumerate(q.k):
            if k > replies:
                why = "" if self.self_loop else " (self_loop is off, so a member hears only the others)"
                errors.append(ctx.error((*qloc, "k", ki), f"k={k} but each member gets at most "
                                        f"{replies} replies from the {len(members)} hosts{why}"))
        return errors
