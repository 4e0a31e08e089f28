"""The `cloudbench` command. The only place that prints errors and exits."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from cloudbench import __version__
from cloudbench.errors import CloudbenchError
from cloudbench.units import fmt_duration

app = typer.Typer(
    name="cloudbench",
    help="Cloud network measurement campaigns, and how far you can trust the numbers.\n\n"
    "Write a YAML spec, `cloudbench validate` it, look at the `plan`, `run` it, then "
    "`report` and `confirm` the results.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Soft wrap: a message is one line however narrow the terminal (or 80 columns when piped), so a
# program can parse it; tables still fit the width.
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def guard(fn: F) -> F:
    """Turn cloudbench errors into a message and an exit code, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CloudbenchError as e:
            err.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(e.exit_status) from None
        except KeyboardInterrupt:
            err.print("[yellow]interrupted[/]: everything created was torn down; "
                      "data measured so far is kept")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


SpecArg = Annotated[Path, typer.Argument(help="campaign spec (YAML)", show_default=False)]


@app.command()
@guard
def validate(spec: SpecArg) -> None:
    """Check a spec; on error name the file, line and field. Creates nothing."""
    from cloudbench.plan import make_plan
    from cloudbench.spec import load_spec

    s = load_spec(spec)
    _print_warnings(s)
    plan = make_plan(s)
    out.print(f"[green]ok[/]: {escape(str(spec))}: campaign {s.name!r}, {len(s.topology())} hosts, "
              f"{len(plan.trials)} trials, about {fmt_duration(plan.est_seconds)} of measurement")


@app.command()
@guard
def schema() -> None:
    """Print the spec's JSON Schema (for editor completion)."""
    from cloudbench.spec import json_schema

    sys.stdout.write(json.dumps(json_schema(), indent=2) + "\n")


@app.command()
@guard
def plan(
    spec: SpecArg,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
    prices: Annotated[Path | None, typer.Option(help="price table (JSON) over the bundled one")] = None,
) -> None:
    """Show the topology, the ordered trials and (on clouds) the estimated cost. Creates nothing."""
    from cloudbench.cost import CLOUDS, estimate, render_estimate, spec_prices
    from cloudbench.plan import make_plan
    from cloudbench.spec import load_spec

    s = load_spec(spec)
    _print_warnings(s)
    p = make_plan(s)
    topo = s.topology()
    cost = estimate(s, p, spec_prices(s, spec, prices)) if CLOUDS & set(s.providers) else None
    if as_json:
        doc = {"topology": topo.to_dict(), "plan": p.to_dict()}
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
                    zn.add(f"subnet {subnet}: " + ", ".join(f"{h.name} ({h.vm_type})" for h in hosts))
    out.print(tree)
    t = Table(title=f"{len(p.trials)} trials, seed {p.seed}, order {p.order}, rest {fmt_duration(p.rest)}, "
              f"fresh hosts per {p.fresh_hosts}", title_justify="left")
    for c in ("#", "repetition", "trial", "workload", "hosts", "pairs", "est."):
        t.add_column(c)
    for i, tr in enumerate(p.trials):
        t.add_row(str(i + 1), str(tr.repetition + 1), tr.id, tr.workload, str(len(tr.hosts)),
                  str(len(tr.pairs)), fmt_duration(tr.est_seconds))
    out.print(t)
    out.print(f"estimated measurement time: {fmt_duration(p.est_seconds)} (plus provisioning)")
    if cost is not None:
        render_estimate(cost, out)
        if s.budget is not None:
            verdict = "[green]within[/]" if cost.complete and cost.total_usd <= s.budget else "[red]above[/]"
            out.print(f"budget {s.budget:.2f} {cost.prices.currency}: estimate {verdict} it")


@app.command()
@guard
def run(
    spec: SpecArg,
    results: Annotated[Path, typer.Option(help="result store root")] = Path("results"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
) -> None:
    """Run a campaign: provision fresh hosts, run the trials, pull results, tear down."""
    from cloudbench.report import build_report, render, write_report
    from cloudbench.runner import CampaignRunner
    from cloudbench.spec import load_spec
    from cloudbench.ui import RichUI

    s = load_spec(spec)
    _print_warnings(s)
    runner = CampaignRunner(s, str(spec), results)
    if "netns" in s.providers and os.geteuid() != 0:
        raise CloudbenchError("the netns testbed needs root: run `sudo cloudbench run ...`")
    if quiet:
        run_dir = runner.execute()
    else:
        with RichUI(err, len(runner.plan.trials)) as ui:
            runner.ui = ui
            run_dir = runner.execute()
    report = build_report(run_dir)
    write_report(run_dir, report)
    render(report, out)
    out.print(f"results: {escape(str(run_dir.path))}", highlight=False)


@app.command()
@guard
def report(
    results: Annotated[Path, typer.Argument(help="results/<campaign> or one run directory")],
    run_id: Annotated[str | None, typer.Option("--run", help="run id (default: the latest)")] = None,
    windows: Annotated[bool, typer.Option(help="show windowed means")] = False,
    pairs: Annotated[bool, typer.Option(help="show the per-pair summary")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
) -> None:
    """Print the report of a run again from disk (and rewrite its CSV/JSON files)."""
    from cloudbench.report import _clean, build_report, render, write_report
    from cloudbench.results import RunDir, find_runs

    runs = find_runs(results)
    if run_id is not None:
        match = [r for r in runs if r.run_id == run_id]
        if not match:
            raise CloudbenchError(f"{results}: no run {run_id!r}; runs: {', '.join(r.run_id for r in runs)}")
        run_dir: RunDir = match[0]
    else:
        run_dir = runs[-1]
    rep = build_report(run_dir)
    write_report(run_dir, rep)
    if as_json:
        sys.stdout.write(json.dumps(_clean(rep), indent=2) + "\n")
    else:
        render(rep, out, windows=windows, pairs=pairs)


@app.command()
@guard
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would be removed")] = False,
    include_live: Annotated[bool, typer.Option("--all", help="also testbeds of runs still alive")] = False,
    results: Annotated[Path, typer.Option(help="result store root, searched for cloud stacks")] = Path(
        "results"),
) -> None:
    """Remove what killed runs left behind: testbed namespaces and their sshd processes, and
    cloud stacks whose lease expired or whose controller died."""
    from cloudbench.providers.netns import NetnsProvider
    from cloudbench.providers.pulumi import reap

    lines = NetnsProvider().gc(dry_run=dry_run, include_live=include_live)
    for line in lines:
        out.print(escape(line), highlight=False)
    stacks = reap(results, dry_run=dry_run)  # printed before a failure here can stop us
    for line in stacks:
        out.print(escape(line), highlight=False)
    if not lines and not stacks:
        out.print("nothing to remove")


def _print_warnings(spec: Any) -> None:
    for w in spec.warnings:
        err.print(f"[yellow]{escape(w)}[/]", highlight=False, soft_wrap=True)


@app.command()
def version() -> None:
    """Print the version."""
    out.print(f"cloudbench {__version__}")


def _register_optional() -> None:
    try:
        from cloudbench.confirm_cli import confirm
    except ImportError:
        return
    app.command("confirm")(guard(confirm))


_register_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
