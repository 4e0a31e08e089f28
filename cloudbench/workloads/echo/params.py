"""The echo workload's spec parameters (``kind: echo``) and their checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import Duration, Model, Name, Size
from cloudbench.spec.located import Loc
from cloudbench.spec.workload import CheckContext, WorkloadModel

MAX_PAYLOAD = 64 * 1024
MAX_PER_ROUND_CONNECTS = 2000  # new connections a host opens per second at most (ports in TIME_WAIT)

# Bounds are the worker's: it refuses anything outside them.
Rate = Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]
Payload = Annotated[Size, Field(ge=16, le=MAX_PAYLOAD)]
SWEPT = ("payload", "rate")  # fields that take a list: one trial per value
Quorum = tuple[str, list[str], list[int]]
"""(name, members, k values) of one quorum of the spec, its group resolved to host names."""
# The default window: a trial has at least this many (a 20 s trial 2 s windows), and
# a long one windows of at most MAX_DEFAULT_WINDOW_S.
WINDOWS_PER_TRIAL = 10
MAX_DEFAULT_WINDOW_S = 30.0


def window_of(params: Mapping[str, Any]) -> float:
    """The window in seconds of an echo workload's entry (as the manifest holds it): its
    ``window``, or by default ``duration / WINDOWS_PER_TRIAL``, at most
    ``MAX_DEFAULT_WINDOW_S`` (entries of manifests from before the default adapted
    carry ``window: 30``, and keep it)."""
    w = params.get("window")
    if w is not None:
        return float(w)
    duration = params.get("duration")
    if duration is None:
        return MAX_DEFAULT_WINDOW_S
    return min(MAX_DEFAULT_WINDOW_S, float(duration) / WINDOWS_PER_TRIAL)


def _one_or_list(scalar: str) -> Discriminator:
    """Validate a value or a list of values as one or the other, so that an error names the
    value (``rate: 0``: "greater than 0") instead of both readings of the union. The tags
    are type names, which the loader leaves out of the field's location."""
    return Discriminator(lambda v: f"list[{scalar}]" if isinstance(v, list) else scalar)


OneRateOrList = Annotated[Annotated[Rate, Tag("float")] | Annotated[list[Rate], Tag("list[float]")],
                          _one_or_list("float")]
OnePayloadOrList = Annotated[Annotated[Payload, Tag("int")] | Annotated[list[Payload], Tag("list[int]")],
                             _one_or_list("int")]


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
    rate: OneRateOrList = Field(100.0, description="rounds per second; a list sweeps it "
                                    "(one trial per value, in the seeded random order)")
    payload: OnePayloadOrList = Field(1024, description="bytes per message (<= 64 KiB); a list "
                                             "sweeps it: [64, 1024, 16384, 65536]")
    connection: Literal["persistent", "per_round"] = Field(
        "persistent", description="`persistent`: one TCP connection per peer for the whole trial; "
        "`per_round`: a new connection per round and peer, its handshake timed apart (connect_ns)")
    idle: Duration | None = Field(None, gt=0, le=1e6, allow_inf_nan=False, description=(
        "on persistent connections, send to each peer only every `idle` (a warm connection) "
        "instead of at `rate`"))
    duration: Duration = Field(20.0, gt=0, le=1e7, allow_inf_nan=False, description="measured time per trial")
    warmup: Duration = Field(1.0, ge=0, le=3600, allow_inf_nan=False,
                             description="extra time before, kept but flagged")
    timeout: Duration = Field(1.0, gt=0, le=3600, allow_inf_nan=False,
                              description="a reply later than this is a timeout")
    self_loop: bool = True
    rx_timestamp: Literal["kernel", "user"] = Field(
        "kernel", description="an echo's receive time: `kernel` (when its bytes arrived, "
        "SO_TIMESTAMPNS, as ping does) or `user` (when the worker read it)")
    window: Duration | None = Field(None, gt=0, allow_inf_nan=False, description=(
        "window of the windowed means and medians; default: the trial's duration / "
        f"{WINDOWS_PER_TRIAL}, at most {MAX_DEFAULT_WINDOW_S:g} s"))
    port: int = Field(7100, ge=1024, le=65535)
    quorums: list[QuorumModel] = Field(default_factory=list)

    def resolved(self) -> dict[str, Any]:
        """The entry with its window as the run uses it (:func:`window_of`)."""
        out = super().resolved()
        out["window"] = window_of(out)
        return out

    def listen_ports(self) -> list[PortRange]:
        return [PortRange(f"{self.name}-echo", self.port, self.port, ("tcp",))]

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        errors = ctx.check_selector(self.hosts, (*loc, "hosts"))
        errors += self._check_modes(ctx, loc)
        for qi, q in enumerate(self.quorums):
            errors += self._check_quorum(q, ctx, (*loc, "quorums", qi))
        return errors

    def _check_modes(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        """Sweeps without repeats; `idle` and `per_round` with the settings they need."""
        errors: list[SpecError] = []
        for f in SWEPT:
            values = getattr(self, f)
            if isinstance(values, list):
                if not values:
                    errors.append(ctx.error((*loc, f), f"`{f}` lists no value"))
                dup = sorted({v for v in values if values.count(v) > 1})
                if dup:
                    errors.append(ctx.error((*loc, f), f"`{f}` lists {', '.join(f'{v:g}' for v in dup)} "
                                            "more than once"))
        rates = [1.0 / self.idle] if self.idle else self.rate if isinstance(self.rate, list) else [self.rate]
        if self.idle is not None:
            if self.connection != "persistent":
                errors.append(ctx.error((*loc, "idle"), "`idle` spaces messages on a persistent "
                                        "connection; with `connection: per_round` use `rate`"))
            if self.idle > self.duration:
                errors.append(ctx.error((*loc, "idle"), f"`idle` {self.idle:g} s is longer than `duration` "
                                        f"{self.duration:g} s: each peer would hear from a host once"))
            if isinstance(self.rate, list) or "rate" in self.model_fields_set:
                errors.append(ctx.error((*loc, "idle"), "`idle` replaces `rate` (one message to each "
                                        "peer every `idle`): give one of them"))
        if self.connection == "per_round":
            for r in rates:
                if self.timeout * r > 1.0:
                    errors.append(ctx.error((*loc, "timeout"), f"with `connection: per_round` a round "
                                            f"must end before the next: timeout {self.timeout:g} s is "
                                            f"longer than 1/rate = {1 / r:g} s"))
                    break
            n_peers = len(ctx.resolve_hosts(self.hosts)) if not ctx.check_selector(self.hosts, loc) else 0
            if n_peers and max(rates) * n_peers > MAX_PER_ROUND_CONNECTS:
                errors.append(ctx.error((*loc, "rate"), f"`connection: per_round` at {max(rates):g} "
                                        f"rounds/s to {n_peers} peers opens {max(rates) * n_peers:g} "
                                        f"connections/s per host (at most {MAX_PER_ROUND_CONNECTS}: "
                                        "their ports stay in TIME_WAIT for 60 s)"))
        return errors

    def one_rate(self) -> float:
        """The rounds per second of one trial (its params have one value; idle: 1/idle)."""
        if self.idle is not None:
            return 1.0 / self.idle
        assert not isinstance(self.rate, list), "a trial's params have one rate"
        return self.rate

    def one_payload(self) -> int:
        """The payload of one trial (its params have one value)."""
        assert not isinstance(self.payload, list), "a trial's params have one payload"
        return self.payload

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
