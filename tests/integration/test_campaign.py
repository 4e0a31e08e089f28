"""Scheduled campaigns on the testbed: `campaign run` killed with -9 at random moments, restarted,
ends with every trial exactly once and nothing leaked."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from cloudbench.campaign.daemon import CampaignBusyError, campaign_lock
from cloudbench.campaign.journal import JOURNAL_FILE, Journal
from cloudbench.campaign.setup import campaign_status
from cloudbench.core.netns import list_netns
from cloudbench.core.processes import pid_cmdline
from cloudbench.providers.netns.provider import DEFAULT_STATE_ROOT
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import find_runs
from tests.integration.compressed_days import PERIOD, SINE_MS, CompressedDays

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# The kill tests' trials are as short as a trial that holds rows can be: what they assert is
# that each trial's rows are kept exactly once, which a longer trial does not test better.
SHORT_TRIAL = "duration: 1s, warmup: 0.25s"
LONG_TRIAL = "duration: 2s, warmup: 0.5s"  # a SIGTERM after the checks below still finds it running
TINY = """\
name: killed
seed: {seed}
repetitions: 2
fresh_hosts: repetition
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {{hosts: 2}}
workloads:
  - {{kind: echo, name: echo, rate: 20, {trial}, timeout: 1s, self_loop: false}}
schedule:
  every: 1s
  count: 2
  slip: 1h
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cloudbench", *args]


def leftovers(campaign: Path) -> list[str]:
    """Testbeds (state files, namespaces) and processes that belong to this campaign's runs."""
    left: list[str] = []
    sids: list[str] = []
    for st in Path(DEFAULT_STATE_ROOT).glob("*.json"):
        try:
            data = json.loads(st.read_text())
        except (OSError, ValueError):
            continue
        if str(data.get("workdir", "")).startswith(str(campaign)):
            sids.append(st.stem)
            left.append(f"state file {st}")
    for run in campaign.glob("*/manifest.json"):
        sids += [r["stack"] for r in json.loads(run.read_text()).get("repetitions", [])]
    left += [n for n in list_netns() if any(n.startswith(f"cb{s}-") for s in sids)]
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        cmd = pid_cmdline(pid)
        if str(campaign) in cmd or any(f"/cloudbench/{s}/" in cmd for s in sids):
            left.append(f"pid {pid}: {cmd[:100]}")
    return left


def trial_running(log: Path, before: int) -> bool:
    """Whether the runner logged a trial start since byte ``before`` of its log."""
    with log.open("rb") as f:
        f.seek(before)
        return b") started" in f.read()


def run_until_killed(campaign: Path, after_s: float, log: Path, mid_trial: bool = False) -> int | None:
    """`campaign run`, SIGKILLed after ``after_s`` (None: it ended by itself first); ``mid_trial``:
    ``after_s`` counts from the moment the journal shows a trial running."""
    before = log.stat().st_size if log.exists() else 0
    with log.open("ab") as f:
        proc = subprocess.Popen(cli("campaign", "run", str(campaign)), stdout=f, stderr=f, cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while mid_trial and not trial_running(log, before) and proc.poll() is None:
                assert time.monotonic() < deadline, "no trial started in 60 s"
                time.sleep(0.05)
            proc.wait(timeout=after_s)
            return proc.returncode
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill_9_at_random_moments_then_restart_runs_every_trial_exactly_once(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    spec = tmp_path / "killed.yaml"
    spec.write_text(TINY.format(seed=seed, trial=SHORT_TRIAL))
    campaign = tmp_path / "campaign"
    log = tmp_path / "log.txt"
    subprocess.run(cli("campaign", "start", str(spec), "--dir", str(campaign)), check=True, cwd=ROOT,
                   capture_output=True, timeout=60)
    kills = 0
    try:
        # One kill inside a trial (within its 1.25 s), one at any moment (provisioning, the
        # recovery of the first kill, a teardown, …); a whole campaign takes ~12 s.
        for after, mid in ((rng.uniform(0.0, 1.0), True), (rng.uniform(0.2, 7.0), False)):
            if run_until_killed(campaign, after, log, mid_trial=mid) is None:
                kills += 1
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # then let it finish
            rc = run_until_killed(campaign, deadline - time.monotonic(), log)
            if rc is not None:
                break
        assert rc == 0, log.read_text()[-3000:]
    finally:
        # Whatever the outcome, nothing of this campaign may stay (a reaper pass if it did).
        left = leftovers(campaign)
        if left:
            subprocess.run(cli("gc", "--results", str(tmp_path)), cwd=ROOT, capture_output=True, timeout=120)
    assert left == [], f"leaked after {kills} kill(s): {left}"
    assert kills >= 1

    j = Journal.open(campaign / JOURNAL_FILE)
    try:
        slots, trials = j.slots(), j.trials()
    finally:
        j.close()
    assert [s.state for s in slots] == ["finished", "finished"], slots
    assert len(trials) == 4 and all(t.state == "finished" for t in trials), trials
    runs = {r.run_id: r for r in find_runs(campaign)}
    assert set(runs) == {s.run_id for s in slots}  # one run per slot, no slot ran twice

    interrupted: list[object] = []
    for s in slots:
        run = runs[s.run_id]
        m = run.manifest()
        assert m.status == "complete", (m.status, m.error)
        assert run.verify() == []
        ok = Counter(t.id for t in m.trials if t.status == "ok")
        plan_ids = [t["id"] for t in m.plan["trials"]]
        assert ok == Counter(plan_ids), m.trials  # every trial measured exactly once
        assert {t.id for t in m.trials if t.status not in ("ok", "interrupted")} == set()
        files = sorted((run.path / "echo").glob("*.parquet"))
        assert [f.stem for f in files] == sorted(plan_ids)  # partial rows are not among them
        for f in files:
            t = read_parquet(f, kind="echo")
            keys = pc.binary_join_element_wise(t.column("round").cast("string"), t.column("src").cast("string"),
                                               t.column("dst").cast("string"), "|")
            assert len(pc.unique(keys)) == t.num_rows  # no duplicated rows
            assert t.num_rows > 0
        interrupted += [t for t in m.trials if t.status == "interrupted"]
        for rec in (t for t in m.trials if t.status == "interrupted"):
            for rel in rec.files:  # kept, labelled, and out of the readers' way
                assert rel.startswith("interrupted/") and (run.path / rel).exists()
        jt = {t.plan_id: t for t in trials if t.slot == s.index}
        for rec in (t for t in m.trials if t.status == "ok"):
            assert jt[rec.id].rows == rec.rows
    assert interrupted, "the kill inside a trial left no interrupted trial record"
    assert sum(t.attempts for t in trials) == 4 + len(interrupted)


def test_a_compressed_day_anchored_to_utc_is_recovered_and_a_flat_link_shows_no_effect(
        compressed_days: CompressedDays) -> None:
    """Campaigns of 20 short echo runs every P/10 over 2P (fresh testbed every run;
    tests/integration/compressed_days.py): over a link whose delay has a sine of period P anchored
    to UTC, `diurnal --period P` finds the period within 10 % and the amplitude (of the RTT: twice
    the one-way one) within 20 %; over the same link without it, an amplitude under 5 % of that and
    a small minimum detectable amplitude."""

    def analyse(campaign: Path) -> dict:
        out = subprocess.run(cli("diurnal", str(campaign), "--period", f"{PERIOD:g}s", "--json"),
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    sine = analyse(compressed_days.sine)
    (p50,) = [s for s in sine["series"] if s["metric"] == "rtt_p50_us" and s["group"] == "cross_region"]
    assert p50["n"] >= 12, p50  # most slots ran (a few may be missed under load)
    assert p50["significant"], p50
    fit = p50["fit"]
    assert abs(fit["period_s"] - PERIOD) <= 0.10 * PERIOD, fit
    expected_us = 2 * SINE_MS * 1000  # both directions cross the link at nearly the same moment
    assert abs(fit["amplitude"] - expected_us) <= 0.20 * expected_us, fit
    assert "time-of-day effect" in sine["verdict"]

    flat = analyse(compressed_days.flat)
    tested = [s for s in flat["series"] if "p_holm" in s]
    assert tested
    # No effect of the sine's size on the flat link. Whether a real testbed shows *no* effect at
    # all is not something the analysis can promise in one campaign (its test holds its level
    # over many: the adversarial suite and tests/analysis/test_diurnal.py check that rate); what it
    # promises here is that anything it calls significant is a small amplitude, estimated as such.
    for s in tested:
        assert s["amplitude_at_period"] is not None, s
        if s["significant"]:
            assert s["amplitude_at_period"] < 0.05 * expected_us, (s["metric"], s["p_holm"], s["amplitude_at_period"])
    (fp50,) = [s for s in flat["series"] if s["metric"] == "rtt_p50_us" and s["group"] == "cross_region"]
    assert fp50["amplitude_at_period"] < 0.05 * expected_us, fp50
    # the null result says how small an effect it could have seen: far below the sine's amplitude
    assert 0 < fp50["mde_amplitude"] < 0.25 * expected_us, fp50


def wait_for_trial(log: Path, proc: subprocess.Popen[bytes], needle: bytes = b") started") -> None:
    deadline = time.monotonic() + 60
    while needle not in log.read_bytes():
        assert proc.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "no trial started in 60 s"
        time.sleep(0.05)


def test_sigterm_tears_down_and_exits_130_and_the_next_start_finishes(tmp_path: Path) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text(TINY.format(seed=4, trial=LONG_TRIAL))
    campaign = tmp_path / "campaign"
    subprocess.run(cli("campaign", "start", str(spec), "--dir", str(campaign)), check=True, cwd=ROOT,
                   capture_output=True, timeout=60)
    with campaign_lock(campaign):  # the command refuses a campaign whose lock another process holds
        second = subprocess.run(cli("campaign", "run", str(campaign)), cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
    assert second.returncode == 1 and f"another `campaign run` (pid {os.getpid()})" in second.stderr
    log = tmp_path / "log.txt"
    with log.open("wb") as f:
        proc = subprocess.Popen(cli("campaign", "run", str(campaign)), stdout=f, stderr=f, cwd=ROOT)
        try:
            wait_for_trial(log, proc)
            # the lock, checked in this process: a second `campaign run` (a Python start-up, 10+ s on
            # a loaded machine) once came after the first slot had finished, and the SIGTERM below
            # then interrupted no slot of the kind this test is about
            assert campaign_status(campaign)["runner_pid"] == proc.pid
            busy = f"another `campaign run` \\(pid {proc.pid}\\)"
            with pytest.raises(CampaignBusyError, match=busy), campaign_lock(campaign):
                pass
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:  # stuck: every thread's stack into the log (main's SIGUSR1)
                proc.send_signal(signal.SIGUSR1)
                time.sleep(2)
                pytest.fail(f"no exit 60 s after SIGTERM; the log and the stacks:\n{log.read_text()[-6000:]}")
            assert code == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # torn down by the runner itself, not by a reaper (no `campaign run` has started since)
    assert leftovers(campaign) == []
    j = Journal.open(campaign / JOURNAL_FILE)
    try:
        assert j.slots()[0].state == "interrupted"
    finally:
        j.close()
    done = subprocess.run(cli("campaign", "run", str(campaign)), cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    j = Journal.open(campaign / JOURNAL_FILE)
    try:
        assert {s.state for s in j.slots()} == {"finished"} and {t.state for t in j.trials()} == {"finished"}
    finally:
        j.close()


def test_run_resume_finishes_a_one_shot_run_killed_mid_trial(tmp_path: Path) -> None:
    spec = tmp_path / "one.yaml"
    spec.write_text(TINY.format(seed=5, trial=SHORT_TRIAL).split("schedule:")[0])
    results = tmp_path / "results"
    log = tmp_path / "log.txt"
    with log.open("wb") as f:
        proc = subprocess.Popen(cli("run", str(spec), "--results", str(results), "--quiet"), stdout=f, stderr=f,
                                cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while not list(results.glob("killed/*/echo/*.parquet")) and not list(results.glob("killed/*/raw/*")):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    (run,) = find_runs(results / "killed")
    assert run.manifest().status == "running"  # what kill -9 leaves
    out = subprocess.run(cli("run", "--resume", str(run.path), "--quiet"), cwd=ROOT, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert leftovers(results) == []
    m = run.manifest()
    assert m.status == "complete" and run.verify() == []
    ok = Counter(t.id for t in m.trials if t.status == "ok")
    assert ok == Counter(t["id"] for t in m.plan["trials"])
    assert any(t.status == "interrupted" for t in m.trials) or len(m.trials) == 2
