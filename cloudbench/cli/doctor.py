"""`cloudbench doctor`: what would stop a cloud run, said before anything is created."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

import cloudbench
from cloudbench.cli.app import app, guard, out
from cloudbench.errors import ExitCode, SpecError

STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}


@app.command()
@guard
def doctor(
    spec: Annotated[Path | None, typer.Argument(help="campaign spec (YAML); without it, only the "
                                                "Pulumi CLI and SDKs are checked", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the findings as JSON")] = False,
) -> None:
    """Check what a cloud run needs: the Pulumi CLI and its version, the cloud SDKs, the
    controller CIDR, the leases against the campaign's length, and the provider's read-only
    preflight (the one `run` does before `up`): project or subscription, credentials checked live
    (never printed), each zone's VM types offered, vCPU and network quotas from the cloud's quota
    APIs. Prints what to fix; exits 1 when something would stop a run."""
    s = cloudbench.load_spec(spec) if spec is not None else None
    findings = cloudbench.diagnose(s)
    if s is not None:
        try:
            cloudbench.check_leases(s, spec)
        except SpecError as e:
            findings.append(cloudbench.DoctorFinding("lease", "fail", str(e), "raise the provider's `expiry`"))
    failed = [f for f in findings if f.blocks]
    if as_json:
        sys.stdout.write(json.dumps([f.to_dict() for f in findings], indent=2) + "\n")
    else:
        t = Table(title="cloudbench doctor" + (f": {spec}" if spec else ""), title_justify="left")
        for c in ("", "check", "finding", "to fix"):
            t.add_column(c)
        for f in findings:
            t.add_row(f"[{STYLE[f.status]}]{f.status}[/]", escape(f.check), escape(f.detail), escape(f.fix))
        out.print(t)
        out.print(f"[red]{len(failed)} problem(s) would stop a run[/]" if failed
                  else "[green]nothing found that would stop a run[/]")
    if failed:
        raise typer.Exit(int(ExitCode.ERROR))
