"""``cloudbench campaign run``: the long-running process of a scheduled campaign.

One process per campaign directory (an ``flock`` on ``campaign.lock``, held for
the life of the process and dropped by the kernel when it dies). Slots run one
at a time, so two runs of a campaign never overlap, and within a run trials run
one after the other. A slot starts at its planned time; one that cannot start
within ``slip`` of it (the machine was off, the previous run overran) is
recorded as ``missed`` with its planned time — ``catch_up: once`` runs the
latest of a gap of missed slots late instead of skipping it.

Exactly once: the journal says which slot was running; its run's manifest says
which trials were measured. After a crash, a restart first removes what the
dead process left (testbeds of its run directories, stacks of dead controllers),
then resumes the cut-off run in its own directory with the same seed and plan
(:meth:`cloudbench.runner.CampaignRunner.resume`): measured trials are never
repeated, a trial cut off mid-way is run again on fresh hosts and its partial
rows are kept under ``interrupted/``. SIGTERM or SIGINT tears the current run's
hosts down, marks the slot ``interrupted`` and exits; the next start resumes it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cloudbench.campaign.journal import JOURNAL_FILE, Journal, SlotRow, trial_key
from cloudbench.campaign.setup import LOCK_FILE, campaign_spec
from cloudbench.core.files import utc_stamp
from cloudbench.errors import CloudbenchError, DiskFullError, InsufficientSpaceError
from cloudbench.providers import reap_run
from cloudbench.runner import CampaignRunner, signals_as_interrupts
from cloudbench.spec.model import Spec
from cloudbench.spec.schedule import ScheduleModel
from cloudbench.store.manifest import Manifest, load_manifest
from cloudbench.store.rundir import new_run_id
from cloudbench.workloads.base import Trial, TrialOutcome

Log = Callable[[str], None]
POLL_S = 1.0  # how often a waiting runner looks for `campaign stop`
WAITING_FOR_SPACE = "waiting for space"  # the note of an interrupted slot refused for space


class CampaignBusyError(CloudbenchError):
    """Another `campaign run` holds the campaign's lock."""


@contextmanager
def campaign_lock(directory: Path) -> Iterator[None]:
    """Hold the campaign's lock (``flock``, exclusive, not waiting) for the block."""
    path = Path(directory) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "?"
            raise CampaignBusyError(f"{directory}: another `campaign run` (pid {holder}) is running this "
                                    "campaign; stop it first (its lock is held)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        yield
    finally:
        os.close(fd)  # drops the lock


class _LogUI:
    """The runner's progress as log lines."""

    def __init__(self, log: Log, slot: int) -> None:
        self.log, self.slot = log, slot

    def phase(self, text: str) -> None:
        self.log(f"slot {self.slot}: {text}")

    def trial_started(self, trial: Trial, number: int, total: int) -> None:
        self.log(f"slot {self.slot}: trial {trial.id} ({number}/{total}) started")

    def trial_tick(self, text: str) -> None:
        pass

    def trial_done(self, trial: Trial, outcome: TrialOutcome) -> None:
        self.log(f"slot {self.slot}: trial {trial.id} done, {outcome.rows} rows"
                 + (f", {len(outcome.failures)} failure(s)" if outcome.failures else ""))

    def warn(self, text: str) -> None:
        self.log(f"slot {self.slot}: warning: {text}")


class CampaignDaemon:
    """Runs the slots of one campaign directory until none is left, stopped, or signalled.

    ``clock`` and ``sleep`` are the wall clock and the wait (tests compress time);
    ``runner_kwargs`` go to every :class:`CampaignRunner` (fake providers in tests).
    """

    def __init__(self, directory: Path, log: Log = lambda _m: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 sleep: Callable[[float], None] = time.sleep,
                 runner_kwargs: dict[str, Any] | None = None) -> None:
        self.dir = Path(directory).resolve()
        self.log = log
        self.clock = clock
        self.sleep = sleep
        self.runner_kwargs = dict(runner_kwargs or {})

    def run(self) -> dict[str, int]:
        """Run the campaign (blocking); returns the slot counts by state at the end."""
        if not (self.dir / JOURNAL_FILE).exists():
            Journal.open(self.dir / JOURNAL_FILE)  # raises the error that says so
        with campaign_lock(self.dir):
            self.journal = Journal.open(self.dir / JOURNAL_FILE)
            try:
                spec, self.spec_path = campaign_spec(self.dir, self.journal)
                assert spec.schedule is not None
                self.spec: Spec = spec
                self.schedule: ScheduleModel = spec.schedule
                with signals_as_interrupts():
                    self._loop()
                return self.journal.counts()["slots"]
            finally:
                self.journal.close()

    # -- the loop -----------------------------------------------------------------------
    def _loop(self) -> None:
        j = self.journal
        self.log(f"campaign {self.spec.name}: {self.dir} (pid {os.getpid()})")
        for s in j.slots("running") + j.slots("interrupted"):
            self.log(f"slot {s.index}: was {s.state} (run {s.run_id}); resuming it")
            self._run_slot(s, note="resumed after a crash or stop")
        slip = timedelta(seconds=self.schedule.slip_s)
        while True:
            if j.meta().get("state") == "stopped":
                self.log("campaign stopped (`campaign stop`): no slot left to run")
                break
            planned = j.slots("planned")
            if not planned:
                break
            now = self.clock()
            late = [s for s in planned if now > datetime.fromisoformat(s.planned_utc) + slip]
            if late:
                self._missed(late)
                continue
            nxt = planned[0]
            at = datetime.fromisoformat(nxt.planned_utc)
            if now < at:
                self.sleep(min(POLL_S, (at - now).total_seconds()))
                continue
            for w in j.slots("interrupted"):  # runs that waited for space: try them first
                if w.note.startswith(WAITING_FOR_SPACE):
                    self._run_slot(w, note="resumed after waiting for space")
            self._run_slot(nxt, note=f"started {(now - at).total_seconds():.1f}s after its planned time")
        c = j.counts()
        self.log("campaign done: " + ", ".join(f"{n} {s}" for s, n in sorted(c["slots"].items())))
        if j.meta().get("state") == "active":
            j.set_meta("state", "done")

    def _missed(self, late: list[SlotRow]) -> None:
        """Slots past their slip: recorded missed (``catch_up: once``: the latest runs now)."""
        run_now = late[-1] if self.schedule.catch_up == "once" else None
        for s in late:
            if s is run_now:
                continue
            self.journal.update_slot(s.index, "missed", f"not started within {self.schedule.slip_s:g}s of "
                                     f"{s.planned_utc}", state="missed", note="past slip")
            self.journal.close_slot_trials(s.index, "missed", "slot missed")
            self.log(f"slot {s.index}: missed (planned {s.planned_utc}, slip {self.schedule.slip_s:g}s)")
        if run_now is not None:
            self._run_slot(run_now, note="catch-up: run late, after missed slots")

    # -- one slot -----------------------------------------------------------------------
    def _run_slot(self, slot: SlotRow, note: str) -> None:
        j = self.journal
        for line in reap_run(self.dir, self.dir.parent):  # what a dead run left, before anything new
            self.log(f"reaped: {line}")
        run_id = slot.run_id or new_run_id()
        run_dir = self.dir / run_id
        fields: dict[str, Any] = {"state": "running", "attempts": "+1", "run_id": run_id, "note": note}
        if slot.started_utc is None:
            fields["started_utc"] = utc_stamp(micro=True)
        j.update_slot(slot.index, "start", f"run {run_id}; {note}", **fields)
        self.log(f"slot {slot.index}: run {run_id} ({note})")
        spec = self.spec.model_copy(update={"seed": slot.seed})
        hooks: dict[str, Any] = {
            "before_trial": lambda t: j.update_trial(trial_key(slot.index, t.id), "trial start", state="running",
                                                     attempts="+1", run_id=run_id, started_utc=utc_stamp(micro=True)),
            "after_trial": lambda t, o: j.update_trial(
                trial_key(slot.index, t.id), "trial end", f"{o.rows} rows",
                state="finished" if o.rows or not o.failures else "failed",
                ended_utc=utc_stamp(micro=True), rows=o.rows),
            "ui": _LogUI(self.log, slot.index),
            **self.runner_kwargs,
        }
        manifest_path = run_dir / "manifest.json"
        runner: CampaignRunner | None = None
        if manifest_path.exists():
            m = load_manifest(manifest_path)
            if m.resumable:  # cut off, or stopped by a full disk
                runner = CampaignRunner.resume(spec, self.spec_path, run_dir, **hooks)
            else:  # the run ended before the journal heard of it
                self._settle(slot.index, m, None)
                return
        else:
            if run_dir.exists():  # made, but killed before its manifest existed: nothing measured
                shutil.rmtree(run_dir)
            runner = CampaignRunner(spec, self.spec_path, self.dir.parent, run_dir=run_dir, **hooks)
        def manifest() -> Manifest | None:
            return load_manifest(manifest_path) if manifest_path.exists() else None

        try:
            runner.execute()
        except KeyboardInterrupt:
            self._settle(slot.index, manifest(), "interrupted")
            raise
        except InsufficientSpaceError as e:  # refused before anything was created
            if manifest_path.exists():  # a run to finish: it waits for space, nothing of it is lost
                j.update_slot(slot.index, "refused for space", str(e), state="interrupted",
                              note=f"{WAITING_FOR_SPACE}: {e}"[:500])
                self.log(f"slot {slot.index}: {WAITING_FOR_SPACE}: {e}")
            else:
                j.update_slot(slot.index, "missed", f"refused for space: {e}", state="missed",
                              ended_utc=utc_stamp(self.clock(), micro=True), note=f"refused for space: {e}"[:500])
                j.close_slot_trials(slot.index, "missed", "slot refused for space")
                self.log(f"slot {slot.index}: missed: refused for space: {e}")
            return
        except DiskFullError as e:
            # The disk filled up mid-run: the run is recorded failed (disk full), resumable; the slot
            # is interrupted, and this process ends (exit 5): a restart with space resumes it.
            self.log(f"slot {slot.index}: disk full: {e}")
            j.update_slot(slot.index, "disk full", str(e), state="interrupted", note=f"disk full: {e}"[:500])
            raise
        except CloudbenchError as e:
            self._settle(slot.index, manifest(), "failed", str(e))
            self.log(f"slot {slot.index}: failed: {e}")
            return
        self._settle(slot.index, manifest(), None)

    def _settle(self, index: int, m: Manifest | None, outcome: str | None, why: str = "") -> None:
        """The slot's and its trials' states from the run's manifest (the truth after any crash)."""
        j = self.journal
        last = {t.id: t for t in (m.trials if m else [])}  # the newest record of each trial id
        began = Counter(t.id for t in (m.trials if m else []))  # a record for each attempt begun
        for tr in j.trials(index):
            rec = last.get(tr.plan_id)
            if tr.state in ("missed", "cancelled"):
                continue
            if began[tr.plan_id] > tr.attempts:  # a kill between the manifest's record and this count
                j.update_trial(tr.id, "trial attempts settled", f"{began[tr.plan_id]} in the run's manifest",
                               attempts=began[tr.plan_id])
            if rec is not None and rec.status in ("ok", "partial", "failed"):
                state = "failed" if rec.status == "failed" else "finished"
                if tr.state != state or tr.rows != rec.rows:
                    j.update_trial(tr.id, "trial settled", rec.status, state=state, rows=rec.rows,
                                   started_utc=rec.started_utc, ended_utc=rec.ended_utc, run_id=m and m.run_id)
            elif rec is not None or tr.state == "running":
                if outcome == "failed":
                    j.update_trial(tr.id, "trial failed", why, state="failed", note=why[:500])
                else:
                    j.update_trial(tr.id, "trial interrupted", "", state="interrupted")
            elif outcome == "failed":
                j.update_trial(tr.id, "trial not run", why, state="failed", note=f"not run: {why}"[:500])
        if outcome is None:
            status = m.status if m else "failed"
            state = "failed" if status == "failed" else "finished"
            outcome = state
            why = f"run {status}"
        j.update_slot(index, outcome, why, state=outcome, ended_utc=utc_stamp(self.clock(), micro=True))
        self.log(f"slot {index}: {outcome}" + (f" ({why})" if why else ""))
