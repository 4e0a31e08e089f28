"""cloudbench: cloud network measurement campaigns with statistics you can trust.

The public API: everything the ``cloudbench`` command does, as functions. A
campaign is a spec (:func:`load_spec`), a plan of trials (:func:`make_plan`) and
its cost (:func:`estimate_cost`), a run (:func:`run_campaign`) that leaves a run
directory (:func:`open_results`), its report (:func:`build_report`,
:func:`write_report`, :func:`render_report`) and the repetition analysis
(:func:`confirm`)::

    import cloudbench

    spec = cloudbench.load_spec("experiments/quickstart.yaml")
    run = cloudbench.run_campaign(spec, "experiments/quickstart.yaml", "results")
    report = cloudbench.build_report(run)
    result = cloudbench.confirm(run.path.parent)

Names are imported on first use, so ``import cloudbench`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cloudbench.core.version import __version__

if TYPE_CHECKING:
    from cloudbench.analysis.confirm import ConfirmParams, ConfirmResult
    from cloudbench.cost import CostEstimate, estimate_cost, spec_prices
    from cloudbench.errors import (
        BudgetError,
        CloudbenchError,
        ExitCode,
        IncompleteRunError,
        ResultError,
        SpecError,
        UsageError,
    )
    from cloudbench.plan import Plan, make_plan
    from cloudbench.providers import collect_garbage
    from cloudbench.report.build import build_report
    from cloudbench.report.confirm import confirm, confirm_to_json, render_confirm, write_confirm
    from cloudbench.report.cost import render_cost
    from cloudbench.report.files import to_json as report_to_json
    from cloudbench.report.files import write_report
    from cloudbench.report.html import write_html
    from cloudbench.report.render import render_report
    from cloudbench.runner import CampaignRunner, RunUI, run_campaign
    from cloudbench.spec.model import Spec
    from cloudbench.store.manifest import Manifest
    from cloudbench.store.rundir import RunDir, open_results
    from cloudbench.workloads import json_schema as spec_schema
    from cloudbench.workloads import load_spec, parse_spec
    from cloudbench.workloads.base import Trial, TrialOutcome

_API: dict[str, tuple[str, str]] = {
    "CloudbenchError": ("cloudbench.errors", "CloudbenchError"),
    "ExitCode": ("cloudbench.errors", "ExitCode"),
    "SpecError": ("cloudbench.errors", "SpecError"),
    "BudgetError": ("cloudbench.errors", "BudgetError"),
    "ResultError": ("cloudbench.errors", "ResultError"),
    "UsageError": ("cloudbench.errors", "UsageError"),
    "IncompleteRunError": ("cloudbench.errors", "IncompleteRunError"),
    "Spec": ("cloudbench.spec.model", "Spec"),
    "load_spec": ("cloudbench.workloads", "load_spec"),
    "parse_spec": ("cloudbench.workloads", "parse_spec"),
    "spec_schema": ("cloudbench.workloads", "json_schema"),
    "Plan": ("cloudbench.plan", "Plan"),
    "Trial": ("cloudbench.workloads.base", "Trial"),
    "TrialOutcome": ("cloudbench.workloads.base", "TrialOutcome"),
    "make_plan": ("cloudbench.plan", "make_plan"),
    "CostEstimate": ("cloudbench.cost", "CostEstimate"),
    "estimate_cost": ("cloudbench.cost", "estimate_cost"),
    "spec_prices": ("cloudbench.cost", "spec_prices"),
    "render_cost": ("cloudbench.report.cost", "render_cost"),
    "CampaignRunner": ("cloudbench.runner", "CampaignRunner"),
    "RunUI": ("cloudbench.runner", "RunUI"),
    "run_campaign": ("cloudbench.runner", "run_campaign"),
    "RunDir": ("cloudbench.store.rundir", "RunDir"),
    "Manifest": ("cloudbench.store.manifest", "Manifest"),
    "open_results": ("cloudbench.store.rundir", "open_results"),
    "build_report": ("cloudbench.report.build", "build_report"),
    "write_report": ("cloudbench.report.files", "write_report"),
    "write_html": ("cloudbench.report.html", "write_html"),
    "render_report": ("cloudbench.report.render", "render_report"),
    "ConfirmParams": ("cloudbench.analysis.confirm", "ConfirmParams"),
    "ConfirmResult": ("cloudbench.analysis.confirm", "ConfirmResult"),
    "confirm": ("cloudbench.report.confirm", "confirm"),
    "render_confirm": ("cloudbench.report.confirm", "render_confirm"),
    "write_confirm": ("cloudbench.report.confirm", "write_confirm"),
    "confirm_to_json": ("cloudbench.report.confirm", "confirm_to_json"),
    "report_to_json": ("cloudbench.report.files", "to_json"),
    "collect_garbage": ("cloudbench.providers", "collect_garbage"),
}

__all__ = [
    "BudgetError",
    "CampaignRunner",
    "CloudbenchError",
    "ConfirmParams",
    "ConfirmResult",
    "CostEstimate",
    "ExitCode",
    "IncompleteRunError",
    "Manifest",
    "Plan",
    "ResultError",
    "RunDir",
    "RunUI",
    "Spec",
    "SpecError",
    "Trial",
    "TrialOutcome",
    "UsageError",
    "__version__",
    "build_report",
    "collect_garbage",
    "confirm",
    "confirm_to_json",
    "estimate_cost",
    "load_spec",
    "make_plan",
    "open_results",
    "parse_spec",
    "render_confirm",
    "render_cost",
    "render_report",
    "report_to_json",
    "run_campaign",
    "spec_prices",
    "spec_schema",
    "write_confirm",
    "write_html",
    "write_report",
]
assert set(__all__) == {"__version__", *_API}  # one list of public names, checked


def __getattr__(name: str) -> Any:
    try:
        module, attr = _API[name]
    except KeyError:
        raise AttributeError(f"module 'cloudbench' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
