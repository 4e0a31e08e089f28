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

from cloudbench.core.version import __version__ as __version__

if TYPE_CHECKING:
    # For mypy only: the same names as _API, re-exported explicitly (`x as x`, or an assignment
    # where the public name differs), since __all__ is derived and not a literal.
    from cloudbench.analysis.confirm import ConfirmParams as ConfirmParams
    from cloudbench.analysis.confirm import ConfirmResult as ConfirmResult
    from cloudbench.campaign.daemon import CampaignDaemon as CampaignDaemon
    from cloudbench.campaign.setup import campaign_status as campaign_status
    from cloudbench.campaign.setup import create_campaign as create_campaign
    from cloudbench.campaign.setup import install_unit as install_unit
    from cloudbench.campaign.setup import launch_overrides as launch_overrides
    from cloudbench.campaign.setup import space_estimate as space_estimate
    from cloudbench.campaign.setup import stop_campaign as stop_campaign
    from cloudbench.campaign.setup import systemd_unit as systemd_unit
    from cloudbench.cost import CostEstimate as CostEstimate
    from cloudbench.cost import check_leases as check_leases
    from cloudbench.cost import estimate_cost as estimate_cost
    from cloudbench.cost import spec_prices as spec_prices
    from cloudbench.dataset import Campaign as Campaign
    from cloudbench.dataset import Run as Run
    from cloudbench.dataset import RunningRunWarning as RunningRunWarning
    from cloudbench.dataset import open_campaign as _open
    from cloudbench.errors import BudgetError as BudgetError
    from cloudbench.errors import CloudbenchError as CloudbenchError
    from cloudbench.errors import DiskFullError as DiskFullError
    from cloudbench.errors import ExitCode as ExitCode
    from cloudbench.errors import IncompleteRunError as IncompleteRunError
    from cloudbench.errors import ResultError as ResultError
    from cloudbench.errors import SpecError as SpecError
    from cloudbench.errors import UsageError as UsageError
    from cloudbench.plan import Plan as Plan
    from cloudbench.plan import make_plan as make_plan
    from cloudbench.plan import repetitions_warning as repetitions_warning
    from cloudbench.providers import collect_garbage as collect_garbage
    from cloudbench.providers.base import Finding as _DoctorFinding
    from cloudbench.providers.clouds.doctor import diagnose as diagnose
    from cloudbench.providers.clouds.tagreaper import inventory as _cloud_inventory
    from cloudbench.providers.clouds.tagreaper import reap_tagged as reap_tagged
    from cloudbench.report.build import build_report as build_report
    from cloudbench.report.changes import changes as changes
    from cloudbench.report.changes import render_changes as render_changes
    from cloudbench.report.changes_render import write_changes as write_changes
    from cloudbench.report.compare import compare as _compare_result
    from cloudbench.report.compare import compare_by as compare_by
    from cloudbench.report.compare import compare_frame as _compare
    from cloudbench.report.compare import to_json as _compare_to_json
    from cloudbench.report.compare_render import render as _render_compare
    from cloudbench.report.compare_render import write_compare as write_compare
    from cloudbench.report.confirm import confirm as confirm
    from cloudbench.report.confirm import confirm_dir as confirm_dir
    from cloudbench.report.confirm import confirm_document as _confirm_to_json
    from cloudbench.report.confirm import render_confirm as render_confirm
    from cloudbench.report.confirm import write_confirm as write_confirm
    from cloudbench.report.cost import render_cost as render_cost
    from cloudbench.report.diurnal import diurnal as diurnal
    from cloudbench.report.diurnal import render_diurnal as render_diurnal
    from cloudbench.report.files import to_json as _report_to_json
    from cloudbench.report.files import write_report as write_report
    from cloudbench.report.html import write_html as write_html
    from cloudbench.report.outputs import write_outputs as write_outputs
    from cloudbench.report.render import render_report as render_report
    from cloudbench.report.sides import parse_when as parse_when
    from cloudbench.report.sides import parse_window as parse_window
    from cloudbench.report.sides import windowed as windowed
    from cloudbench.runner import CampaignRunner as CampaignRunner
    from cloudbench.runner import RunUI as RunUI
    from cloudbench.runner import disk_full_recorded as disk_full_recorded
    from cloudbench.runner import resume_run as resume_run
    from cloudbench.runner import run_campaign as run_campaign
    from cloudbench.space import SpaceEstimate as SpaceEstimate
    from cloudbench.spec.model import Spec as Spec
    from cloudbench.store.manifest import Manifest as Manifest
    from cloudbench.store.rundir import RunDir as RunDir
    from cloudbench.store.rundir import open_results as open_results
    from cloudbench.workloads import json_schema as _spec_schema
    from cloudbench.workloads import load_spec as load_spec
    from cloudbench.workloads import parse_spec as parse_spec
    from cloudbench.workloads.base import Trial as Trial
    from cloudbench.workloads.base import TrialOutcome as TrialOutcome

    open = _open
    DoctorFinding = _DoctorFinding
    cloud_inventory = _cloud_inventory
    compare_result = _compare_result
    compare = _compare
    render_compare = _render_compare
    confirm_to_json = _confirm_to_json
    compare_to_json = _compare_to_json
    report_to_json = _report_to_json
    spec_schema = _spec_schema

# Public name -> (module, attribute), imported on first use (PEP 562 __getattr__).
_API: dict[str, tuple[str, str]] = {
    "open": ("cloudbench.dataset", "open_campaign"),
    "Campaign": ("cloudbench.dataset", "Campaign"),
    "RunningRunWarning": ("cloudbench.dataset", "RunningRunWarning"),
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
    "repetitions_warning": ("cloudbench.plan", "repetitions_warning"),
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
    "write_outputs": ("cloudbench.report.outputs", "write_outputs"),
    "render_report": ("cloudbench.report.render", "render_report"),
    "ConfirmParams": ("cloudbench.analysis.confirm", "ConfirmParams"),
    "ConfirmResult": ("cloudbench.analysis.confirm", "ConfirmResult"),
    "confirm": ("cloudbench.report.confirm", "confirm"),
    "confirm_dir": ("cloudbench.report.confirm", "confirm_dir"),
    "render_confirm": ("cloudbench.report.confirm", "render_confirm"),
    "write_confirm": ("cloudbench.report.confirm", "write_confirm"),
    "confirm_to_json": ("cloudbench.report.confirm", "confirm_document"),
    "report_to_json": ("cloudbench.report.files", "to_json"),
    "collect_garbage": ("cloudbench.providers", "collect_garbage"),
    "resume_run": ("cloudbench.runner", "resume_run"),
    "create_campaign": ("cloudbench.campaign.setup", "create_campaign"),
    "launch_overrides": ("cloudbench.campaign.setup", "launch_overrides"),
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
    "write_changes": ("cloudbench.report.changes_render", "write_changes"),
    "parse_when": ("cloudbench.report.sides", "parse_when"),
    "parse_window": ("cloudbench.report.sides", "parse_window"),
    "windowed": ("cloudbench.report.sides", "windowed"),
}

# The one list of public names is _API above; __all__ and dir() derive from it.
__all__ = sorted(["__version__", *_API])


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name in this module."""
    try:
        module, attr = _API[name]
    except KeyError:
        raise AttributeError(f"module 'cloudbench' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (what ``from cloudbench import *`` gives)."""
    return sorted(__all__)
