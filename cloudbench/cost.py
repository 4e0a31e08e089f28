"""What a campaign will cost: VM-hours, egress per region pair, dollars from a dated price table.

The bundled table (``data/prices.json``) carries its date and source; a spec's
``prices:`` key or ``cloudbench plan --prices FILE`` overrides any part of it.
A spec's ``budget`` is checked before anything is created (:func:`check_budget`).

Model (an estimate, said so wherever it is shown):

* VM time per stack = the plan's measurement time of what runs on it (trials and
  rests) + :data:`PROVISION_OVERHEAD_S` for boot, cloud-init, deploy and destroy;
  one stack per repetition (``fresh_hosts: repetition``) or one for the campaign.
* Egress of a trial comes from the workload kind's optional
  ``estimate_bytes(params, trial)`` — a number of bytes spread over the trial's
  pairs, or a mapping ``(src, dst) -> bytes`` (echo: ``rate × payload × (duration
  + warmup)`` each way for every ordered pair).
* A byte is billed where it leaves: same zone (free), another zone of the region,
  another region (same continent or not), or another provider (internet rates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.core import catalog
from cloudbench.core.catalog import CLOUDS
from cloudbench.core.prices import PriceTable, load_prices
from cloudbench.core.topology import HostSpec
from cloudbench.errors import BudgetError, SpecError, SpecErrors
from cloudbench.plan import Plan, make_plan
from cloudbench.spec.located import load_yaml
from cloudbench.spec.model import Spec
from cloudbench.workloads import workload_kind
from cloudbench.workloads.base import Trial, trial_params

# Boot + cloud-init packages + deploy + destroy of one stack: a few minutes each on
# all three clouds; 10 minutes keeps the estimate on the safe side.
PROVISION_OVERHEAD_S = 600.0
# A stack's lease must outlive the stack's estimated life by this much (trials run long, clouds
# are slow to create and destroy): else `cloudbench gc` from cron could destroy a live campaign.
LEASE_MARGIN_S = 1800.0
LEASE_MARGIN_FRACTION = 0.5
GB = 1e9


@dataclass
class VmLine:
    """One line of the VM cost: hosts of one provider and VM type, their VM-hours and price."""
    provider: str
    vm_type: str
    hosts: int
    hours: float  # VM-hours of all these hosts together
    usd_per_hour: float | None

    @property
    def usd(self) -> float | None:
        return None if self.usd_per_hour is None else self.hours * self.usd_per_hour


@dataclass
class EgressLine:
    """Bytes between two regions (both directions), and what leaving them costs."""

    provider_a: str
    region_a: str
    provider_b: str
    region_b: str
    bytes: float = 0.0
    usd: float = 0.0
    classes: set[str] = field(default_factory=set)


@dataclass
class CostEstimate:
    """What a campaign will cost: stacks, VM lines, egress per region pair, public IPs, what is unpriced."""

    prices: PriceTable
    stacks: int
    stack_seconds: list[float]
    vms: list[VmLine]
    egress: list[EgressLine]
    public_ip_usd: float
    unpriced: list[str]  # what has no price (VM types) or no byte estimate (workload kinds)

    @property
    def vm_hours(self) -> float:
        return sum(v.hours for v in self.vms)

    @property
    def egress_bytes(self) -> float:
        return sum(e.bytes for e in self.egress)

    @property
    def complete(self) -> bool:
        return all(v.usd_per_hour is not None for v in self.vms)

    @property
    def total_usd(self) -> float:
        vm = sum(v.usd or 0.0 for v in self.vms)
        return vm + sum(e.usd for e in self.egress) + self.public_ip_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "currency": self.prices.currency,
            "prices_date": self.prices.date,
            "prices_source": self.prices.source,
            "prices_sources": self.prices.sources,
            "stacks": self.stacks,
            "vm_hours": round(self.vm_hours, 3),
            "vms": [{"provider": v.provider, "vm_type": v.vm_type, "hosts": v.hosts,
                     "hours": round(v.hours, 3), "usd_per_hour": v.usd_per_hour,
                     "usd": None if v.usd is None else round(v.usd, 4)} for v in self.vms],
            "egress": [{"a": f"{e.provider_a}:{e.region_a}", "b": f"{e.provider_b}:{e.region_b}",
                        "gb": round(e.bytes / GB, 6), "usd": round(e.usd, 4),
                        "classes": sorted(e.classes)} for e in self.egress],
            "public_ip_usd": round(self.public_ip_usd, 4),
            "total_usd": round(self.total_usd, 4),
            "complete": self.complete,
            "unpriced": self.unpriced,
        }


def egress_class(a: HostSpec, b: HostSpec) -> str:
    """The egress price class of traffic from host ``a`` to host ``b`` (zone, region, continent, internet)."""
    if a.provider != b.provider:
        return "internet"
    if a.region != b.region:
        ca, cb = catalog.continent(a.provider, a.region), catalog.continent(b.provider, b.region)
        return "cross_region_same_continent" if ca is not None and ca == cb else "cross_region"
    return "same_zone" if a.zone == b.zone else "cross_zone"


def trial_bytes(spec: Spec, trial: Trial) -> dict[tuple[str, str], float] | None:
    """Bytes sent from src to dst during one trial, or None if the kind gives no estimate."""
    params = trial_params(spec.workload(trial.workload), trial)
    pairs = [(a, b) for a, b in trial.pairs if a != b]
    try:
        kind = workload_kind(trial.kind)
    except KeyError:
        return None
    est: Any = kind.estimate_bytes(params, trial)
    if est is None:
        return None
    if isinstance(est, Mapping):
        return {(str(k[0]), str(k[1])): float(v) for k, v in est.items()}
    per = float(est) / len(pairs) if pairs else 0.0
    return {p: per for p in pairs}


def estimate_cost(spec: Spec, plan: Plan | None = None, prices: PriceTable | None = None) -> CostEstimate:
    """Cost of running ``spec`` once, following ``plan`` (pure; no provider is called)."""
    plan = plan or make_plan(spec)
    prices = prices or load_prices()
    topo = spec.topology()
    hosts = {h.name: h for h in topo.hosts}
    billed = [h for h in topo.hosts if h.provider in CLOUDS]
    unpriced: list[str] = []

    reps = range(plan.repetitions)
    per_rep = [sum(t.est_seconds for t in plan.of_repetition(r))
               + plan.rest * max(len(plan.of_repetition(r)) - 1, 0) for r in reps]
    if plan.fresh_hosts == "repetition":
        stack_seconds = [s + PROVISION_OVERHEAD_S for s in per_rep]
    else:
        stack_seconds = [sum(per_rep) + PROVISION_OVERHEAD_S]
    # Clouds bill at least a minute per VM start.
    hours = sum(max(s, 60.0) for s in stack_seconds) / 3600.0

    groups: dict[tuple[str, str], int] = {}
    for h in billed:
        groups[(h.provider, h.vm_type)] = groups.get((h.provider, h.vm_type), 0) + 1
    vms: list[VmLine] = []
    for (prov, vm_type), n in sorted(groups.items()):
        price = prices.vm(prov, vm_type)
        if price is None:
            unpriced.append(f"{prov} vm_type {vm_type}")
        vms.append(VmLine(prov, vm_type, n, n * hours, price))
    ip_usd = sum(hours * prices.public_ipv4_hourly.get(h.provider, 0.0) for h in billed)

    lines: dict[tuple[str, str, str, str], EgressLine] = {}
    for trial in plan.trials:
        flows = trial_bytes(spec, trial)
        if flows is None:
            note = f"workload kind {trial.kind} (no estimate_bytes)"
            if note not in unpriced:
                unpriced.append(note)
            continue
        for (src, dst), nbytes in flows.items():
            a, b = hosts.get(src), hosts.get(dst)
            if a is None or b is None or nbytes <= 0:
                continue
            if a.provider not in CLOUDS and b.provider not in CLOUDS:
                continue  # testbed or own hosts: nobody bills these bytes
            klass = egress_class(a, b)
            key_a, key_b = sorted([(a.provider, a.region), (b.provider, b.region)])
            line = lines.setdefault((*key_a, *key_b), EgressLine(*key_a, *key_b))
            line.bytes += nbytes
            line.classes.add(klass)
            # Priced by where the bytes leave (and, on Azure's global peering, also where they arrive).
            per_gb = prices.egress(a.provider, a.region, b.region, klass)
            if a.provider == b.provider:
                per_gb += prices.ingress(b.provider, klass)
            line.usd += nbytes / GB * per_gb
    egress = [lines[k] for k in sorted(lines)]
    return CostEstimate(prices, len(stack_seconds), stack_seconds, vms, egress, ip_usd, unpriced)


def spec_prices(spec: Spec, spec_path: str | Path | None,
                override: str | Path | None = None) -> PriceTable:
    """The table a spec is priced with: ``--prices`` beats the spec's ``prices:`` key."""
    if override is not None:
        return load_prices(override)
    base = Path(spec_path).parent if spec_path is not None else None
    return load_prices(spec.prices, base=base)


def check_budget(spec: Spec, spec_path: str | Path | None = None,
                 plan: Plan | None = None) -> CostEstimate | None:
    """Raise :class:`BudgetError` if the spec has a ``budget`` that the estimate exceeds."""
    if spec.budget is None:
        return None
    est = estimate_cost(spec, plan, spec_prices(spec, spec_path))
    if not est.complete:
        raise BudgetError(
            f"campaign {spec.name!r} has a budget of {spec.budget:.2f} {est.prices.currency} but no "
            f"price for: {', '.join(u for u in est.unpriced if 'vm_type' in u)}; add them under "
            "`prices: {vm_hourly: {<cloud>: {<type>: <usd per hour>}}}` in the spec"
        )
    if est.total_usd > spec.budget:
        raise BudgetError(
            f"campaign {spec.name!r} is estimated at {est.total_usd:.2f} {est.prices.currency} "
            f"({est.vm_hours:.1f} VM-hours, {est.egress_bytes / GB:.2f} GB of egress; prices of "
            f"{est.prices.date}), above its budget of {spec.budget:.2f}; nothing was created. "
            "Lower repetitions/durations, or raise `budget` (see `cloudbench plan`)"
        )
    return est




def lease_needed(stack_seconds: float) -> float:
    """The shortest safe ``expiry`` for a stack estimated to live ``stack_seconds``."""
    return stack_seconds + max(LEASE_MARGIN_S, LEASE_MARGIN_FRACTION * stack_seconds)


def check_leases(spec: Spec, spec_path: str | Path | None = None, plan: Plan | None = None) -> None:
    """Refuse a cloud ``expiry`` shorter than a stack's estimated life plus a margin.

    A stack lives one repetition (``fresh_hosts: repetition``) or the whole campaign,
    provisioning included (:data:`PROVISION_OVERHEAD_S`); its lease (``expiry``) is what
    ``cloudbench gc`` trusts. Raises a :class:`SpecError` naming the ``expiry`` line.
    """
    clouds = [name for name in spec.providers if name in CLOUDS]
    if not clouds:
        return
    est = estimate_cost(spec, plan, load_prices())
    longest = max(est.stack_seconds, default=0.0)
    need = lease_needed(longest)
    errors: list[SpecError] = []
    for name in clouds:
        expiry = float(getattr(spec.providers[name], "expiry", need))
        if expiry >= need:
            continue
        msg = (f"expiry {_hours(expiry)} is shorter than a stack's estimated life "
               f"({_hours(longest)}, provisioning included) plus a margin: `cloudbench gc` could "
               f"destroy the campaign while it runs; set expiry to at least {_hours(need)}")
        errors.append(_spec_error(spec_path, ("providers", name, "expiry"), msg))
    if errors:
        raise errors[0] if len(errors) == 1 else SpecErrors(errors)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _spec_error(spec_path: str | Path | None, loc: tuple[str, ...], message: str) -> SpecError:
    if spec_path is None:
        return SpecError("<spec>", None, ".".join(loc), message)

    try:
        doc = load_yaml(Path(spec_path).read_text(), str(spec_path))
    except (OSError, SpecError):
        return SpecError(str(spec_path), None, ".".join(loc), message)
    if loc not in doc.lines:  # the default expiry: point at the provider's entry
        loc = loc[:-1]
    return doc.error(loc, message)
