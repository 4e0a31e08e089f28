"""The cost section of ``cloudbench plan``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cloudbench.core.tables import titled_table
from cloudbench.cost import GB, CostEstimate

if TYPE_CHECKING:
    from rich.console import Console


def render_cost(est: CostEstimate, console: Console) -> None:
    """The cost section of ``cloudbench plan``."""
    cur = est.prices.currency
    t = titled_table(f"estimated cost ({est.stacks} stack(s); prices of {est.prices.date})",
                     ("provider", "vm_type", "hosts", "VM-hours", f"{cur}/h", cur),
                     left=("provider", "vm_type"), key=2)
    for v in est.vms:
        t.add_row(v.provider, v.vm_type, str(v.hosts), f"{v.hours:.2f}",
                  "?" if v.usd_per_hour is None else f"{v.usd_per_hour:.4f}",
                  "?" if v.usd is None else f"{v.usd:.2f}")
    console.print(t)
    if est.egress:
        e = titled_table("estimated egress per region pair", ("from/to", "to/from", "kinds", "GB", cur),
                         left=("from/to", "to/from", "kinds"), key=2)
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
    for cloud in sorted({v.provider for v in est.vms} & set(est.prices.sources)):
        console.print(f"[dim]{cloud} data transfer: {est.prices.sources[cloud]}[/]", highlight=False)
