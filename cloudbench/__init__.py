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
    rows = cloudbench.compare("results/aws", "results/gcp")  # B vs A, a DataFrame
    camp = cloudbench.open("results/quickstart")     # the results as a dataset (notebooks)
    camp.observations("echo").filter("NOT warmup").df()

Names are imported on first use, so ``import cloudbench`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cloudbench.core.version import __version__

if TYPE_CHECKING:
    from cloudbench.analysis.confirm import ConfirmParams, ConfirmResult
    from cloudbench.campaign.daemon import CampaignDaemon
    from cloudbench.campaign.setup import (
        campaign_status,
        create_campaign,
        install_unit,
        space_estimate,
        stop_campaign,
        systemd_unit,
    )
    from cloudbench.cost import CostEstimate, check_leases, estimate_cost, spec_prices
    from cloudbench.dataset import Campaign, Run
    from cloudbench.dataset import open_campaign as open
    from cloudbench.errors import (
        BudgetError,
        CloudbenchError,
        DiskFullError,
        ExitCode,
        IncompleteRunError,
        ResultError,
        SpecError,
        UsageError,
    )
    from cloudbench.plan import Plan, make_plan
    from cloudbench.providers import collect_garbage
    from cloudbench.providers.base import Finding as DoctorFinding
    from cloudbench.providers.clouds.doctor import diagnose
    from cloudbench.providers.clouds.tagreaper import inventory as cloud_inventory
    from cloudbench.providers.clouds.tagreaper import reap_tagged
    from cloudbench.report.build import build_report
    from cloudbench.report.changes import changes, render_changes
    from cloudbench.report.compare import compare as compare_result
    from cloudbench.report.compare import compare_by
    from cloudbench.report.compare import compare_frame as compare
    from cloudbench.report.compare import to_json as compare_to_json
    from cloudbench.report.compare_render import render as render_compare
    from cloudbench.report.compare_render import write_compare
    from cloudbench.report.confirm import confirm, render_confirm, write_confirm
    from cloudbench.report.confirm import confirm_document as confirm_to_json
    from cloudbench.report.cost import render_cost
    from cloudbench.report.diurnal import diurnal, render_diurnal
    from cloudbench.report.files import to_json as report_to_json
    from cloudbench.report.files import write_report
    from cloudbench.report.html import write_html
    from cloudbench.report.render import render_report
    from cloudbench.runner import CampaignRunner, RunUI, disk_full_recorded, resume_run, run_campaign
    from cloudbench.space import SpaceEstimate
    from cloudbench.spec.model import Spec
    from cloudbench.store.manifest import Manifest
    from cloudbench.store.rundir import RunDir, open_results
    from cloudbench.workloads import json_schema as spec_schema
    from cloudbench.workloads import load_spec, parse_spec
    from cloudbench.workloads.base import Trial, TrialOutcome

_API: dict[str, tuple[str, str]] = {
    "open": ("cloudbench.dataset", "open_campaign"),
    "Campaign": ("cloudbench.dataset", "Campaign"),
    "Run": ("cloudbench.dataset", "Run"),
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
    "check_leases": ("cloudbench.cost", "check_leases"),
    "diagnose": ("cloudbench.providers.clouds.doctor", "diagnose"),
    "reap_tagged": ("cloudbench.providers.clouds.tagreaper", "reap_tagged"),
    "cloud_inventory": ("cloudbench.providers.clouds.tagreaper", "inventory"),
    "DoctorFinding": ("cloudbench.providers.base", "Finding"),
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
    "confirm_to_json": ("cloudbench.report.confirm", "confirm_document"),
    "report_to_json": ("cloudbench.report.files", "to_json"),
    "collect_garbage": ("cloudbench.providers", "collect_garbage"),
    "resume_run": ("cloudbench.runner", "resume_run"),
    "create_campaign": ("cloudbench.campaign.setup", "create_campaign"),
    "CampaignDaemon": ("cloudbench.campaign.daemon", "CampaignDaemon"),
    "campaign_status": ("cloudbench.campaign.setup", "campaign_status"),
    "stop_campaign": ("cloudbench.campaign.setup", "stop_campaign"),
    "systemd_unit": ("cloudbench.campaign.setup", "systemd_unit"),
    "install_unit": ("cloudbench.campaign.setup", "install_unit"),
    "space_estimate": ("cloudbench.campaign.setup", "space_estimate"),
    "SpaceEstimate": ("cloudbench.space", "SpaceEstimate"),
    "DiskFullError": ("cloudbench.errors", "DiskFullError"),
    "disk_full_recorded": ("cloudbench.runner", "disk_full_recorded"),
    "diurnal": ("cloudbench.report.diurnal", "diurnal"),
    "compare": ("cloudbench.report.compare", "compare_frame"),
    "compare_result": ("cloudbench.report.compare", "compare"),
    "compare_by": ("cloudbench.report.compare", "compare_by"),
    "render_compare": ("cloudbench.report.compare_render", "render"),
    "write_compare": ("cloudbench.report.compare_render", "write_compare"),
    "compare_to_json": ("cloudbench.report.compare", "to_json"),
    "render_diurnal": ("cloudbench.report.diurnal", "render_diurnal"),
    "changes": ("cloudbench.report.changes", "changes"),
    "render_changes": ("cloudbench.report.changes", "render_changes"),
}

__all__ = [
    "BudgetError",
    "Campaign",
    "CampaignDaemon",
    "CampaignRunner",
    "CloudbenchError",
    "ConfirmParams",
    "ConfirmResult",
    "CostEstimate",
    "DiskFullError",
    "DoctorFinding",
    "ExitCode",
    "IncompleteRunError",
    "Manifest",
    "Plan",
    "ResultError",
    "Run",
    "RunDir",
    "RunUI",
    "SpaceEstimate",
    "Spec",
    "SpecError",
    "Trial",
    "TrialOutcome",
    "UsageError",
    "__version__",
    "build_report",
    "campaign_status",
    "changes",
    "check_leases",
    "cloud_inventory",
    "collect_garbage",
    "compare",
    "compare_by",
    "compare_result",
    "compare_to_json",
    "confirm",
    "confirm_to_json",
    "create_campaign",
    "diagnose",
    "disk_full_recorded",
    "diurnal",
    "estimate_cost",
    "install_unit",
    "load_spec",
    "make_plan",
    "open",
    "open_results",
    "parse_spec",
    "reap_tagged",
    "render_changes",
    "render_compare",
    "render_confirm",
    "render_cost",
    "render_diurnal",
    "render_report",
    "report_to_json",
    "resume_run",
    "run_campaign",
    "space_estimate",
    "spec_prices",
    "spec_schema",
    "stop_campaign",
    "systemd_unit",
    "write_compare",
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
