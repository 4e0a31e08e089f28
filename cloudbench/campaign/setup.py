"""A campaign directory: create it (``campaign start``), read its status, stop it, its systemd unit.

Layout::

    results/<name>/journal.sqlite    slots and trials, states and times (:mod:`.journal`)
    results/<name>/spec.yaml         the spec as it was at `campaign start` (runs use this copy)
    results/<name>/campaign.lock     held (flock) by the live `campaign run`
    results/<name>/<run-id>/         one run per slot (manifest.json, Parquet, summaries)
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cloudbench.campaign.journal import JOURNAL_FILE, Journal, trial_key
from cloudbench.campaign.planner import plan_slots
from cloudbench.core.files import utc_stamp
from cloudbench.errors import CloudbenchError, ResultError, UsageError
from cloudbench.plan import make_plan
from cloudbench.report.diurnal import WEEKDAYS, weekday_hour
from cloudbench.space import SpaceEstimate, estimate_space, free_bytes
from cloudbench.spec.model import Spec
from cloudbench.spec.schedule import ScheduleModel
from cloudbench.workloads import load_spec, parse_spec

SPEC_COPY = "spec.yaml"
LOCK_FILE = "campaign.lock"



def effective_schedule(spec: Spec, overrides: dict[str, Any]) -> ScheduleModel:
    """The spec's ``schedule:`` with the command line's values over it."""
    base = spec.schedule.model_dump(exclude_unset=True) if spec.schedule is not None else {}
    given = {k: v for k, v in overrides.items() if v is not None}
    if spec.schedule is None and not given:
        raise UsageError("the spec has no `schedule:` section: add one (every, count or until, …) or give "
                         "--every and --count/--until")
    try:
        return ScheduleModel.model_validate({**base, **given})
    except ValidationError as e:
        first = e.errors()[0]
        key = ".".join(str(x) for x in first["loc"]) or "schedule"
        opt = f" (--{key.replace('_', '-')})" if key in given else ""
        raise UsageError(f"schedule.{key}{opt}: {first['msg'].removeprefix('Value error, ')}") from None


LAUNCH_LEAD_S = 30.0
"""Seconds `campaign start` leaves before the first slot, by default, when the slip is shorter:
time to launch `campaign run` before the slot is recorded as missed."""


def launch_overrides(spec: Spec, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with a start :data:`LAUNCH_LEAD_S` from now when neither the spec nor the
    command line gives one and the schedule's slip is shorter than that (a start ``now`` would
    miss its first slots while `campaign run` is being launched)."""
    if overrides.get("start") is not None or (spec.schedule is not None
                                               and "start" in spec.schedule.model_fields_set):
        return overrides
    if effective_schedule(spec, overrides).slip_s >= LAUNCH_LEAD_S:
        return overrides
    return {**overrides, "start": f"+{LAUNCH_LEAD_S:g}s"}


def create_campaign(spec_path: Path, directory: Path | None = None, results: Path = Path("results"),
                    overrides: dict[str, Any] | None = None, now: datetime | None = None) -> Path:
    """Plan every slot and trial of the spec's schedule into a new campaign directory; returns it."""
    spec = load_spec(spec_path)
    schedule = effective_schedule(spec, overrides or {})
    d = Path(directory) if directory is not None else Path(results) / spec.name
    if (d / JOURNAL_FILE).exists():
        raise UsageError(f"{d} holds a campaign already (journal.sqlite); `cloudbench campaign run {d}` "
                         "continues it, or choose another --dir")
    created = now or datetime.now(UTC)
    try:
        slots = plan_slots(schedule, created, spec.seed)
    except ValueError as e:
        raise UsageError(f"schedule: {e}") from None
    trials: list[dict[str, Any]] = []
    for s in slots:
        for t in make_plan(spec.model_copy(update={"seed": s.seed})).trials:
            trials.append({"id": trial_key(s.index, t.id), "slot": s.index, "plan_id": t.id,
                           "repetition": t.repetition, "workload": t.workload, "kind": t.kind})
    text = Path(spec_path).read_bytes()
    space = estimate_space(spec, make_plan(spec), slots=len(slots), report=False)
    d.mkdir(parents=True, exist_ok=True)
    (d / SPEC_COPY).write_bytes(text)
    meta = {
        "name": spec.name, "state": "active", "created_utc": utc_stamp(created, micro=True),
        "seed": spec.seed,
        "spec_path": str(Path(spec_path).resolve()), "spec_sha256": hashlib.sha256(text).hexdigest(),
        "schedule": schedule.model_dump(mode="json"), "providers": sorted(spec.providers),
        "space": space.to_dict(),  # the disk estimate at start (`campaign status` shows it)
    }
    Journal.create(d / JOURNAL_FILE, meta,
                   [{"index": s.index, "base_utc": utc_stamp(s.base, micro=True),
                     "planned_utc": utc_stamp(s.planned, micro=True),
                     "spread_s": s.spread_s, "cell": s.cell, "seed": s.seed} for s in slots],
                   trials).close()
    return d


def space_estimate(spec: Spec, schedule: ScheduleModel | None = None, now: datetime | None = None) -> SpaceEstimate:
    """The disk a spec needs (:mod:`cloudbench.space`): one run, and every slot of its schedule."""
    sched = schedule if schedule is not None else spec.schedule
    slots = 1
    if sched is not None:
        try:
            slots = max(1, len(plan_slots(sched, now or datetime.now(UTC), spec.seed)))
        except ValueError:
            slots = 1  # the schedule's own check says what is wrong with it
    return estimate_space(spec, make_plan(spec), slots=slots, report=slots == 1)


def campaign_spec(directory: Path, journal: Journal) -> tuple[Spec, str]:
    """The campaign's spec (its copy, with the effective schedule) and the path it came from."""
    meta = journal.meta()
    copy = Path(directory) / SPEC_COPY
    try:
        text = copy.read_text()
    except OSError as e:
        raise ResultError(str(copy), f"cannot read the campaign's spec copy: {e}") from e
    spec = parse_spec(text, meta["spec_path"])
    sched = ScheduleModel.model_validate(meta["schedule"])
    return spec.model_copy(update={"schedule": sched}), meta["spec_path"]


def lock_holder(directory: Path) -> int | None:
    """The pid of the live `campaign run` holding the lock, or None.

    Read from the kernel's table of locks (``/proc/locks``), so that looking never
    takes the lock itself (a runner starting at that moment would be refused).
    """
    path = Path(directory) / LOCK_FILE
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5835405 0 EOF" (blocked waiters carry "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[3] == "WRITE" and parts[5] == ident:
            return int(parts[4])
    return None


def campaign_status(directory: Path, now: datetime | None = None) -> dict[str, Any]:
    """Counts by state, the next slot, the coverage grid (weekday × hour) and the live runner."""
    j = Journal.open(Path(directory) / JOURNAL_FILE)
    try:
        meta = j.meta()
        sched = ScheduleModel.model_validate(meta["schedule"])
        slots = j.slots()
        counts = j.counts()
        grid: dict[str, dict[str, dict[str, int]]] = {}
        days, hours = weekday_hour([datetime.fromisoformat(s.planned_utc).timestamp() for s in slots], sched.zone().key,
                                   sched.day)
        for s, wd, hr in zip(slots, days, hours, strict=True):
            cell = grid.setdefault(WEEKDAYS[wd], {}).setdefault(str(hr), {})
            cell[s.state] = cell.get(s.state, 0) + 1
        nxt = next((s for s in slots if s.state == "planned"), None)
        now = now or datetime.now(UTC)
        events = j.events(10)
    finally:
        j.close()
    return {
        "directory": str(directory), "name": meta["name"], "state": meta.get("state", "active"),
        "created_utc": meta["created_utc"], "schedule": meta["schedule"],
        "timezone": sched.zone().key,  # of the grid's hours (UTC for a compressed day)
        "runner_pid": lock_holder(directory),
        "slots": counts["slots"], "trials": counts["trials"], "total_slots": len(slots),
        "next": None if nxt is None else {
            "slot": nxt.index, "planned_utc": nxt.planned_utc,
            "in_s": round((datetime.fromisoformat(nxt.planned_utc) - now).total_seconds(), 3)},
        "grid": grid,
        "space": {**(meta.get("space") or {}), "used_bytes": _used_bytes(Path(directory)),
                  "free_bytes": free_bytes(Path(directory))[1]},
        "recent_events": [{"utc": e[0], "slot": e[1], "trial": e[2], "event": e[3], "detail": e[4]}
                          for e in events],
    }


def _used_bytes(directory: Path) -> int:
    """Bytes of the files under ``directory`` (what the campaign holds now)."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file() and not f.is_symlink())


def stop_campaign(directory: Path) -> int:
    """Cancel every slot still planned; a live runner sees it and exits. Returns how many."""
    j = Journal.open(Path(directory) / JOURNAL_FILE)
    try:
        return j.cancel_remaining()
    finally:
        j.close()


def systemd_unit(directory: Path) -> str:
    """A systemd service unit that runs ``cloudbench campaign run DIR`` (restarted after a failure)."""
    d = Path(directory).resolve()
    j = Journal.open(d / JOURNAL_FILE)
    try:
        name = j.meta()["name"]
    finally:
        j.close()
    cmd = " ".join(shlex.quote(x) for x in (sys.executable, "-m", "cloudbench", "campaign", "run", str(d)))
    lines = [
        "[Unit]",
        f"Description=cloudbench scheduled campaign {name} ({d})",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={d.parent}",
        f"ExecStart={cmd}",
        # SIGTERM: the runner tears every host down and exits 130; it resumes from the journal.
        "KillSignal=SIGTERM",
        "KillMode=mixed",
        "TimeoutStopSec=900",
        "SuccessExitStatus=130",
        "Restart=on-failure",
        "RestartSec=60",
        f"# made by cloudbench at {utc_stamp(micro=True)}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def unit_name(directory: Path) -> str:
    """The systemd unit name of the campaign in ``directory`` (from its journal)."""
    j = Journal.open(Path(directory) / JOURNAL_FILE)
    try:
        name = str(j.meta()["name"])
    finally:
        j.close()
    return f"cloudbench-campaign-{name}.service"


def install_unit(directory: Path, unit_dir: Path = Path("/etc/systemd/system")) -> Path:
    """Write the unit to ``unit_dir``; returns its path (enable it with systemctl)."""
    path = Path(unit_dir) / unit_name(directory)
    try:
        path.write_text(systemd_unit(directory))
    except OSError as e:
        raise CloudbenchError(f"cannot write {path}: {e.strerror} (root needed for /etc/systemd/system?)") from e
    return path


__all__ = ["campaign_status", "create_campaign", "install_unit", "space_estimate", "stop_campaign",
           "systemd_unit"]
