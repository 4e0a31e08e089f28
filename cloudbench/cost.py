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
  pairs, or a mapping ``(src, dst) -> bytes`` — and, for echo,
  ``rate × payload × (duration + warmup)`` each way for every ordered pair.
* A byte is billed where it leaves: same zone (free), another zone of the region,
  another region (same continent or not), or another provider (internet rates).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudbench import catalog
from cloudbench.errors import CloudbenchError

if TYPE_CHECKING:
    from rich.console import Console

    from cloudbench.plan import Plan, Trial
    from cloudbench.spec import Spec
    from cloudbench.topology import HostSpec

CLOUDS = frozenset(catalog.CLOUDS)
# Boot + cloud-init packages + deploy + destroy of one stack: a few minutes each on
# all three clouds; 10 minutes keeps the estimate on the safe side.
PROVISION_OVERHEAD_S = 600.0
EGRESS_CLASSES = ("same_zone", "cross_zone", "cross_region_same_continent", "cross_region", "internet")
GB = 1e9


class BudgetError(CloudbenchError):
    """The estimated cost is above the spec's ``budget`` (or cannot be computed)."""

    exit_code = 3


@dataclass(frozen=True)
class PriceTable:
    date: str
    currency: str
    source: str
    vm_hourly: dict[str, dict[str, float]]
    public_ipv4_hourly: dict[str, float]
    egress_per_gb: dict[str, dict[str, float]]

    def vm(self, provider: str, vm_type: str) -> float | None:
        return self.vm_hourly.get(provider, {}).get(vm_type)


def _bundled() -> dict[str, Any]:
    text = resources.files("cloudbench").joinpath("data/prices.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def load_prices(override: str | Path | Mapping[str, Any] | None = None,
                base: Path | None = None) -> PriceTable:
    """The bundled table, with ``override`` (a JSON file or a mapping) merged over it."""
    data = _bundled()
    if override is not None:
        if isinstance(override, Mapping):
            extra: Any = dict(override)
            origin = "the spec's prices"
        else:
            path = Path(override).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            try:
                extra = json.loads(path.read_text())
            except FileNotFoundError:
                raise CloudbenchError(f"price file {path} does not exist") from None
            except (OSError, json.JSONDecodeError) as e:
                raise CloudbenchError(f"price file {path} is not readable JSON: {e}") from None
            origin = str(path)
        if not isinstance(extra, dict):
            raise CloudbenchError(f"{origin}: a price table is a JSON object")
        data = _merge(data, extra)
        if "source" not in extra:
            data["source"] = f"{data['source']} Overridden in part by {origin}."
    return _validate(data)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _validate(data: dict[str, Any]) -> PriceTable:
    def prices(obj: Any, where: str) -> dict[str, float]:
        if not isinstance(obj, dict):
            raise CloudbenchError(f"prices: {where} must be an object of numbers")
        out: dict[str, float] = {}
        for k, v in obj.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise CloudbenchError(f"prices: {where}.{k} must be a number >= 0 (got {v!r})")
            out[str(k)] = float(v)
        return out

    for key in ("date", "currency", "source"):
        if not isinstance(data.get(key), str):
            raise CloudbenchError(f"prices: `{key}` must be a string")
    vm = data.get("vm_hourly", {})
    eg = data.get("egress_per_gb", {})
    if not isinstance(vm, dict) or not isinstance(eg, dict):
        raise CloudbenchError("prices: `vm_hourly` and `egress_per_gb` are objects keyed by cloud")
    return PriceTable(
        date=data["date"],
        currency=data["currency"],
        source=data["source"],
        vm_hourly={c: prices(v, f"vm_hourly.{c}") for c, v in vm.items()},
        public_ipv4_hourly=prices(data.get("public_ipv4_hourly", {}), "public_ipv4_hourly"),
        egress_per_gb={c: prices(v, f"egress_per_gb.{c}") for c, v in eg.items()},
    )


@dataclass
class VmLine:
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

    @property
    def billable(self) -> bool:
        return bool(self.vms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "currency": self.prices.currency,
            "prices_date": self.prices.date,
            "prices_source": self.prices.source,
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
    if a.provider != b.provider:
        return "internet"
    if a.region != b.region:
        ca, cb = catalog.continent(a.provider, a.region), catalog.continent(b.provider, b.region)
        return "cross_region_same_continent" if ca is not None and ca == cb else "cross_region"
    return "same_zone" if a.zone == b.zone else "cross_zone"


def trial_bytes(spec: Spec, trial: Trial) -> dict[tuple[str, str], float] | None:
    """Bytes sent from src to dst during one trial, or None if the kind gives no estimate."""
    from cloudbench.spec import EchoWorkload
    from cloudbench.workloads import workload_kind

    params = spec.workload(trial.workload)
    pairs = [(a, b) for a, b in trial.pairs if a != b]
    try:
        kind: Any = workload_kind(trial.kind)
    except KeyError:
        kind = None
    fn = getattr(kind, "estimate_bytes", None)
    if fn is not None:
        est = fn(params, trial)
        if isinstance(est, Mapping):
            return {(str(k[0]), str(k[1])): float(v) for k, v in est.items()}
        per = float(est) / len(pairs) if pairs else 0.0
        return {p: per for p in pairs}
    if isinstance(params, EchoWorkload):
        # One payload out and one echoed back per round, for every ordered pair.
        each_way = params.rate * params.payload * (params.duration + params.warmup)
        out: dict[tuple[str, str], float] = {}
        for a, b in pairs:
            out[(a, b)] = out.get((a, b), 0.0) + each_way
            out[(b, a)] = out.get((b, a), 0.0) + each_way
        return out
    return None


def estimate(spec: Spec, plan: Plan | None = None, prices: PriceTable | None = None) -> CostEstimate:
    """Cost of running ``spec`` once, following ``plan`` (pure; no provider is called)."""
    from cloudbench.plan import make_plan

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
            line.usd += nbytes / GB * prices.egress_per_gb.get(a.provider, {}).get(klass, 0.0)
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
    est = estimate(spec, plan, spec_prices(spec, spec_path))
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


def render_estimate(est: CostEstimate, console: Console) -> None:
    """The cost section of ``cloudbench plan``."""
    from rich.table import Table

    cur = est.prices.currency
    t = Table(title=f"estimated cost ({est.stacks} stack(s); prices of {est.prices.date})",
              title_justify="left")
    for c in ("provider", "vm_type", "hosts", "VM-hours", f"{cur}/h", cur):
        t.add_column(c, justify="right" if c not in ("provider", "vm_type") else "left")
    for v in est.vms:
        t.add_row(v.provider, v.vm_type, str(v.hosts), f"{v.hours:.2f}",
                  "?" if v.usd_per_hour is None else f"{v.usd_per_hour:.4f}",
                  "?" if v.usd is None else f"{v.usd:.2f}")
    console.print(t)
    if est.egress:
        e = Table(title="estimated egress per region pair", title_justify="left")
        for c in ("from/to", "to/from", "kinds", "GB", cur):
            e.add_column(c, justify="right" if c in ("GB", cur) else "left")
        for line in est.egress:
            e.add_row(f"{line.provider_a} {line.region_a}", f"{line.provider_b} {line.region_b}",
                      ", ".join(sorted(line.classes)), f"{line.bytes / GB:.3f}", f"{line.usd:.2f}")
        console.print(e)
    total = f"{est.total_usd:.2f} {cur}"
    if not est.complete:
        total = f"at least {total}"
    console.print(f"estimated total: {total} ({est.vm_hours:.1f} VM-hours, "
                  f"{est.egress_bytes / GB:.2f} GB egress, public IPs {est.public_ip_usd:.2f} {cur})")
    if est.unpriced:
        console.print("[yellow]not priced:[/] " + "; ".join(est.unpriced))
    console.print(f"[dim]{est.prices.source}[/]", highlight=False)
