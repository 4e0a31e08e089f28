"""The campaign runner root-free: a fake provider and a fake trial, real journal, manifests and resume."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cloudbench.campaign.daemon import CampaignBusyError, CampaignDaemon, campaign_lock
from cloudbench.campaign.journal import JOURNAL_FILE, Journal, trial_key
from cloudbench.campaign.setup import campaign_status, create_campaign, stop_campaign, systemd_unit
from cloudbench.core.cluster import Cluster
from cloudbench.errors import ResultError, UsageError
from cloudbench.remote import Remote
from cloudbench.runner import CampaignRunner
from cloudbench.store.manifest import RepetitionRecord, load_manifest
from cloudbench.testing.fakes import FakeProvider
from cloudbench.testing.remote import FakeRemote
from cloudbench.workloads import workload_kind
from cloudbench.workloads.base import TrialContext, TrialOutcome

SPEC = """\
name: sched
seed: 9
repetitions: 2
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: 2}
workloads:
  - {kind: echo, name: echo, rate: 20, duration: 1s, warmup: 0.1s, timeout: 1s, self_loop: false}
schedule:
  every: 0.2s
  count: 3
  slip: 1h
"""


class FakeTrials:
    """Stands for the echo kind's run: writes the trial's Parquet-named file, returns rows;
    ``stop_at``: the trial numbers (1-based, over the whole test) that get a Ctrl-C mid-way."""

    def __init__(self, stop_at: tuple[int, ...] = ()) -> None:
        self.calls: list[str] = []
        self.stop_at = stop_at

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        self.calls.append(f"{ctx.run.run_id}/{ctx.trial.id}")
        part = ctx.run.path / "echo" / f"{ctx.trial.id}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        part.write_bytes(b"partial rows")
        if len(self.calls) in self.stop_at:
            raise KeyboardInterrupt("signal SIGTERM")
        return TrialOutcome(rows=7)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeTrials:
    trials = FakeTrials()
    kind = workload_kind("echo")
    monkeypatch.setattr(type(kind), "run", lambda self, ctx: trials.run(ctx))
    monkeypatch.setattr(type(kind), "summarize", lambda self, run, m, w: [])

    async def no_deploy(self: CampaignRunner, remote: Remote, cluster: Cluster, rec: RepetitionRecord) -> None:
        return None

    monkeypatch.setattr(CampaignRunner, "_deploy", no_deploy)
    return trials


def make(tmp_path: Path, text: str = SPEC, **overrides: Any) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "sched.yaml"
    spec.write_text(text)
    return create_campaign(spec, tmp_path / "c", overrides=overrides)


def daemon(d: Path, provider: FakeProvider, **kw: Any) -> CampaignDaemon:
    return CampaignDaemon(d, runner_kwargs={"provider_factory": lambda _n: provider,
                                            "remote_factory": FakeRemote}, **kw)


def journal(d: Path) -> Journal:
    return Journal.open(d / JOURNAL_FILE)


def test_each_slot_runs_once_in_its_own_run_with_its_own_seed(tmp_path: Path, fake: FakeTrials) -> None:
    d = make(tmp_path)
    provider = FakeProvider()
    lines: list[str] = []
    counts = daemon(d, provider, log=lines.append).run()
    assert counts == {"finished": 3}
    j = journal(d)
    slots, trials = j.slots(), j.trials()
    j.close()
    assert len({s.run_id for s in slots}) == 3 and all(s.attempts == 1 for s in slots)
    assert [t.state for t in trials] == ["finished"] * 6 and all(t.rows == 7 and t.attempts == 1 for t in trials)
    assert len(fake.calls) == 6 == len(set(fake.calls))
    assert provider.live == set() and len(provider.provisioned) == 6  # fresh hosts per repetition
    assert all(load_manifest(d / s.run_id / "manifest.json").seed == s.seed for s in slots)
    assert any("campaign done" in x for x in lines)
    # started again: nothing is left to do, nothing runs twice
    assert daemon(d, provider).run() == {"finished": 3} and len(fake.calls) == 6


def test_a_trial_cut_off_is_run_again_on_fresh_hosts_and_its_partial_rows_kept_apart(
        tmp_path: Path, fake: FakeTrials) -> None:
    fake.stop_at = (2,)  # the second trial of the campaign (slot 0, repetition 1)
    d = make(tmp_path)
    provider = FakeProvider()
    with pytest.raises(KeyboardInterrupt):
        daemon(d, provider).run()
    assert provider.live == set()  # torn down on the way out
    j = journal(d)
    (s0,) = [s for s in j.slots() if s.index == 0]
    assert s0.state == "interrupted"
    states = {t.plan_id: t.state for t in j.trials(0)}
    j.close()
    assert sorted(states.values()) == ["finished", "interrupted"]
    assert daemon(d, provider).run() == {"finished": 3}
    j = journal(d)
    trials = j.trials()
    (s0,) = [s for s in j.slots() if s.index == 0]
    j.close()
    assert all(t.state == "finished" for t in trials)
    cut = [t for t in trials if t.attempts == 2]
    assert len(cut) == 1 and s0.attempts == 2
    man = load_manifest(d / s0.run_id / "manifest.json")
    assert man.status == "complete"
    recs = [t for t in man.trials if t.id == cut[0].plan_id]
    assert [r.status for r in recs] == ["interrupted", "ok"]
    (rel,) = recs[0].files
    assert rel.startswith(f"interrupted/{cut[0].plan_id}.a1/echo/")
    assert (d / s0.run_id / rel).read_bytes() == b"partial rows"
    assert sorted(p.name for p in (d / s0.run_id / "echo").iterdir()) == sorted(
        f"{t.plan_id}.parquet" for t in trials if t.slot == 0)
    assert len(fake.calls) == 7  # 6 trials + the one cut off


def test_a_kill_between_the_manifest_s_record_and_the_journal_s_count_still_counts_the_attempt(
        tmp_path: Path, fake: FakeTrials, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner records a trial in the run's manifest, then the journal counts its attempt: a
    kill between the two (here an interrupt instead of the journal's write) left one attempt
    uncounted; the manifest, the truth after a crash, settles the count."""
    d = make(tmp_path)
    write = Journal.update_trial
    cut: list[str] = []

    def killed_before_the_count(self: Journal, trial_id: str, event: str, detail: str = "", **fields: Any) -> None:
        if event == "trial start" and not cut:
            cut.append(trial_id)
            raise KeyboardInterrupt("killed")
        write(self, trial_id, event, detail, **fields)

    monkeypatch.setattr(Journal, "update_trial", killed_before_the_count)
    provider = FakeProvider()
    with pytest.raises(KeyboardInterrupt):
        daemon(d, provider).run()
    assert daemon(d, provider).run() == {"finished": 3}
    j = journal(d)
    trials, slots = j.trials(), j.slots()
    j.close()
    records: dict[str, int] = {}
    for s in slots:
        for rec in load_manifest(d / s.run_id / "manifest.json").trials:
            key = trial_key(s.index, rec.id)
            records[key] = records.get(key, 0) + 1
    assert {t.id: t.attempts for t in trials} == records
    assert records[cut[0]] == 2 and sum(records.values()) == 7  # the cut trial's two attempts


def test_missed_slots_are_recorded_and_catch_up_once_runs_the_latest(tmp_path: Path, fake: FakeTrials) -> None:
    late = lambda: datetime.now(UTC) + timedelta(hours=2)  # noqa: E731  # the machine was off for 2 h
    d = make(tmp_path, SPEC.replace("slip: 1h", "slip: 1s"))
    assert daemon(d, FakeProvider(), clock=late).run() == {"missed": 3}
    j = journal(d)
    assert {t.state for t in j.trials()} == {"missed"}
    assert all(s.planned_utc for s in j.slots())
    j.close()
    shutil.rmtree(d)
    d = make(tmp_path, SPEC.replace("slip: 1h", "slip: 1s\n  catch_up: once"))
    assert daemon(d, FakeProvider(), clock=late).run() == {"missed": 2, "finished": 1}
    j = journal(d)
    slots = j.slots()
    j.close()
    assert [s.state for s in slots] == ["missed", "missed", "finished"]
    assert "catch-up" in slots[-1].note


def test_a_second_runner_is_refused_while_the_first_holds_the_lock(tmp_path: Path, fake: FakeTrials) -> None:
    d = make(tmp_path)
    with campaign_lock(d):
        assert campaign_status(d)["runner_pid"] == os.getpid()  # from the kernel's lock table
        with pytest.raises(CampaignBusyError, match="another `campaign run`"):
            daemon(d, FakeProvider()).run()
    assert campaign_status(d)["runner_pid"] is None
    assert fake.calls == []


def test_stop_cancels_what_is_left_and_status_counts_it(tmp_path: Path, fake: FakeTrials) -> None:
    d = make(tmp_path, SPEC.replace("count: 3", "count: 4"))
    assert stop_campaign(d) == 4
    assert daemon(d, FakeProvider()).run() == {"cancelled": 4}
    st = campaign_status(d)
    assert st["state"] == "stopped" and st["trials"] == {"cancelled": 8} and st["next"] is None
    assert sum(n for cells in st["grid"].values() for c in cells.values() for n in c.values()) == 4


def test_start_refuses_a_second_campaign_in_a_directory_and_takes_overrides(tmp_path: Path) -> None:
    d = make(tmp_path, count=5, every="1m")
    st = campaign_status(d)
    assert st["total_slots"] == 5 and st["schedule"]["every"] == 60.0
    with pytest.raises(UsageError, match="holds a campaign already"):
        make(tmp_path)
    with pytest.raises(UsageError, match=r"schedule.cover \(--cover\)"):
        make(tmp_path / "x", cover="hour-of-month")
    with pytest.raises(UsageError, match="no `schedule:` section"):
        make(tmp_path / "y", SPEC.split("schedule:")[0])
    with pytest.raises(ResultError, match=r"no journal\.sqlite"):
        campaign_status(tmp_path)


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    exe = shutil.which("systemd-analyze")
    assert exe, "systemd-analyze is missing: scripts/setup installs it (package systemd)"
    d = make(tmp_path)
    unit = tmp_path / "cloudbench-campaign-sched.service"
    unit.write_text(systemd_unit(d))
    text = unit.read_text()
    assert f"ExecStart={sys.executable} -m cloudbench campaign run {d.resolve()}" in text
    out = subprocess.run([exe, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr  # not even a warning
    bad = tmp_path / "bad.service"
    bad.write_text(text.replace("Type=simple", "Type=sometimes"))
    out = subprocess.run([exe, "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "service type" in out.stderr  # the check can fail


def test_status_grid_puts_each_slot_in_its_planned_cell_of_the_schedule_s_zone(tmp_path: Path) -> None:
    """`campaign status` counts each slot in the weekday × hour cell the planner gave it
    (hour-of-week in New York: weekday × 24 + hour), and says which zone its hours are in."""
    d = make(tmp_path, every="1h", count=30, cover="hour-of-week", timezone="America/New_York")
    j = journal(d)
    cells = sorted(divmod(s.cell, 24) for s in j.slots())
    j.close()
    st = campaign_status(d)
    days = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    grid = sorted((days.index(wd), int(h)) for wd, hours in st["grid"].items() for h, c in hours.items()
                  for _ in range(c["planned"]))
    assert grid == cells and len(set(cells)) >= 29  # 30 slots over the hours of the week (a partial first hour)
    assert st["timezone"] == "America/New_York"
    assert campaign_status(make(tmp_path / "x", day="1h"))["timezone"] == "UTC"  # a compressed day
