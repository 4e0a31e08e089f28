"""Run a campaign: :class:`CampaignRunner` (``campaign_runner``), what it tells the user
(``ui``), the worker files it ships (``bundle``) and what it does on a full disk (``diskfull``)."""

from __future__ import annotations

from cloudbench.runner.bundle import worker_bundle, worker_versions
from cloudbench.runner.campaign_runner import CampaignRunner, resume_run, run_campaign
from cloudbench.runner.diskfull import RESERVE_FILE, disk_full_recorded
from cloudbench.runner.ui import Interrupted, QuietUI, RunUI, signals_as_interrupts

__all__ = [
    "RESERVE_FILE",
    "CampaignRunner",
    "Interrupted",
    "QuietUI",
    "RunUI",
    "disk_full_recorded",
    "resume_run",
    "run_campaign",
    "signals_as_interrupts",
    "worker_bundle",
    "worker_versions",
]
