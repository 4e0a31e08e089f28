"""`cloudbench gc`: remove what killed runs left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

import cloudbench
from cloudbench.cli.app import app, guard, out


@app.command()
@guard
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would be removed")] = False,
    include_live: Annotated[bool, typer.Option("--all", help="also testbeds of runs still alive")] = False,
    results: Annotated[Path, typer.Option(help="result store root, searched for cloud stacks")] = Path(
        "results"),
    cloud: Annotated[str | None, typer.Option(
        help="instead: ask this cloud (aws, gcp, azure) for resources tagged by cloudbench whose "
        "cloudbench-expiry passed, even without local state; lists them, --yes deletes them")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="with --cloud: delete what is listed")] = False,
    project: Annotated[str | None, typer.Option(
        help="with --cloud gcp (default: found as gcloud finds it: $CLOUDSDK_CORE_PROJECT, "
        "$GOOGLE_CLOUD_PROJECT, the gcloud configuration, application default credentials)")] = None,
    subscription: Annotated[str | None, typer.Option(
        help="with --cloud azure (default: $ARM_SUBSCRIPTION_ID, $AZURE_SUBSCRIPTION_ID, the Azure "
        "CLI's default subscription)")] = None,
) -> None:
    """Remove what killed runs left behind: testbed namespaces and their sshd processes, and
    cloud stacks whose lease expired or whose controller died. With --cloud, find expired
    resources by the cloud's own tags instead (list; --yes deletes)."""
    if cloud is not None:
        inv = cloudbench.cloud_inventory(cloud, project=project, subscription=subscription)
        lines = cloudbench.reap_tagged(inv, yes=yes)
        for line in lines:
            out.print(escape(line), highlight=False)
        if not lines:
            out.print(f"no expired {cloud} resources tagged by cloudbench")
        elif not yes:
            out.print(f"run `cloudbench gc --cloud {cloud} --yes` to delete them")
        return
    removed = 0
    for line in cloudbench.collect_garbage(results, dry_run=dry_run, include_live=include_live):
        out.print(escape(line), highlight=False)  # printed before a later failure can stop us
        removed += 1
    if not removed:
        out.print("nothing to remove")


@app.command()
def version() -> None:
    """Print the version."""
    out.print(f"cloudbench {cloudbench.__version__}")
