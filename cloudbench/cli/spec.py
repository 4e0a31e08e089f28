"""`cloudbench validate`, `schema` and `plan`: everything about a spec that creates nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.tree import Tree

import cloudbench
from cloudbench.cli.app import SpecArg, app, guard, out, print_warnings
from cloudbench.core.blocks import print_line
from cloudbench.core.catalog import CLOUDS
from cloudbench.core.tables import titled_table
from cloudbench.core.units import fmt_bytes, fmt_duration


def space_summary(d: cloudbench.SpaceEstimate) -> str:
    """``about 5.4 MB on disk at the peak, 2.0 MB kept`` (per run; the campaign's too when scheduled)."""
    text = f"about {fmt_bytes(d.run_peak)} on disk at the peak, {fmt_bytes(d.run_final)} kept"
    if d.slots > 1:
        text += f" per run; {d.slots} slots: {fmt_bytes(d.campaign_final)} kept"
    return text


def space_detail(d: cloudbench.SpaceEstimate) -> str:
    """The estimate's parts, one line."""
    text = (f"a run peaks at {fmt_bytes(d.run_peak)} (raw worker files up to {fmt_bytes(d.raw_peak)} until "
            f"ingested) and keeps {fmt_bytes(d.run_final)} (Parquet {fmt_bytes(d.parquet)}, report "
            f"{fmt_bytes(d.report)}, manifest and summaries)")
    if d.slots > 1:
        text += (f"; {d.slots} slots peak at {fmt_bytes(d.campaign_peak)} and keep "
                 f"{fmt_bytes(d.campaign_final)}")
    return text + " (an estimate: measured bytes per observation)"


@app.command()
@guard
def validate(spec: SpecArg) -> None:
    """Check a spec; on error name the file, line and field. Creates nothing."""
    s = cloudbench.load_spec(spec)
    print_warnings(s.warnings)
    plan = cloudbench.make_plan(s)
    disk = cloudbench.space_estimate(s)
    print_warnings(_repetitions_warnings(s.repetitions, disk.slots))
    print_line(out, f"[green]ok[/]: {escape(str(spec))}: campaign {s.name!r}, {len(s.topology())} hosts, "
                    f"{measurement(plan, disk.slots)}, {space_summary(disk)}")


def _repetitions_warnings(repetitions: int, slots: int) -> list[str]:
    found = cloudbench.repetitions_warning(repetitions, slots)
    return [] if found is None else [found]


def measurement(plan: cloudbench.Plan, slots: int) -> str:
    """``4 trials, about 4.5s of measurement``; with slots: ``20 slots of 1 trial (about 4.5s
    each): about 1.5min of measurement``."""
    trials = f"{len(plan.trials)} trial{'s' if len(plan.trials) != 1 else ''}"
    if slots <= 1:
        return f"{trials}, about {fmt_duration(plan.est_seconds)} of measurement"
    return (f"{slots} slots of {trials} (about {fmt_duration(plan.est_seconds)} each): about "
            f"{fmt_duration(slots * plan.est_seconds)} of measurement")


@app.command()
@guard
def schema() -> None:
    """Print the spec's JSON Schema (for editor completion)."""
    sys.stdout.write(json.dumps(cloudbench.spec_schema(), indent=2) + "\n")


@app.command()
@guard
def plan(
    spec: SpecArg,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
    prices: Annotated[Path | None, typer.Option(help="price table (JSON) over the bundled one")] = None,
) -> None:
    """Show the topology, the ordered trials and (on clouds) the estimated cost. Creates nothing."""
    s = cloudbench.load_spec(spec)
    print_warnings(s.warnings)
    p = cloudbench.make_plan(s)
    cloudbench.check_leases(s, spec, p)  # a lease shorter than the campaign is a spec error
    topo = s.topology()
    cost = None
    if set(CLOUDS) & set(s.providers):
        cost = cloudbench.estimate_cost(s, p, cloudbench.spec_prices(s, spec, prices))
    disk = cloudbench.space_estimate(s)
    if not as_json:
        print_warnings(_repetitions_warnings(s.repetitions, disk.slots))
    if as_json:
        doc = {"topology": topo.to_dict(), "plan": p.to_dict(), "disk": disk.to_dict()}
        if cost is not None:
            doc["cost"] = cost.to_dict()
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    tree = Tree(f"[bold]{s.name}[/] ({len(topo)} hosts)")
    for prov in topo.providers:
        pn = tree.add(f"provider {prov}")
        for region in topo.for_provider(prov).regions:
            rn = pn.add(f"region {region}")
            for zone in topo.zones(region):
                zn = rn.add(f"zone {zone}")
                for subnet in topo.subnets_in(zone):
                    hosts = [h for h in topo if h.zone == zone and h.subnet == subnet]
                    zn.add(f"subnet {subnet}: " + ", ".join(
                        f"{h.name} ({h.vm_type}" + (f", on {h.physical_host})" if h.physical_host
                                                    else ")") for h in hosts))
    out.print(tree)
    swept = any(tr.sweep for tr in p.trials)
    # rows never wrap (a swept value on a line of its own read as another trial); repetitions are
    # counted from 1, as everywhere printed (the trial id keeps the on-disk r000 form)
    t = titled_table(f"{len(p.trials)} trial{'s' if len(p.trials) != 1 else ''}, seed {p.seed}, order "
                     f"{p.order}, rest {fmt_duration(p.rest)}, fresh hosts per {p.fresh_hosts}",
                     ("#", "repetition", "trial", "workload", *(["swept"] if swept else []), "hosts", "pairs",
                      "est."),
                     left=("trial", "workload", "swept"), short={"repetition": "rep"})
    for i, tr in enumerate(p.trials):
        values = ",".join(f"{k}={v:g}" for k, v in tr.sweep)  # payload: [...]
        t.add_row(str(i + 1), str(tr.repetition + 1), tr.id, tr.workload, *([values or "-"] if swept else []),
                  str(len(tr.hosts)), str(len(tr.pairs)), fmt_duration(tr.est_seconds))
    out.print(t)
    if disk.slots > 1 and s.schedule is not None:
        out.print(f"schedule: {disk.slots} slots, one every {fmt_duration(s.schedule.every)} from "
                  f"{s.schedule.start} (the trials above run in every slot)", highlight=False)
    out.print(f"estimated measurement time: {measurement(p, disk.slots)} (plus provisioning)",
              highlight=False)
    out.print(f"estimated disk: {space_detail(disk)}", highlight=False)
    if cost is not None:
        cloudbench.render_cost(cost, out)
        if s.budget is not None:
            verdict = "[green]within[/]" if cost.complete and cost.total_usd <= s.budget else "[red]above[/]"
            out.print(f"budget {s.budget:.2f} {cost.prices.currency}: estimate {verdict} it")
