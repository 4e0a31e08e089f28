"""Leases: what every cloud stack leaves on disk until it is destroyed, and the reaper.

Every stack gets a *lease* file (``.pulumi/cloudbench-leases/<project>.<stack>.json``),
written before ``up``: cloud, stack, expiry, and which controller process owns it.
The provider removes the lease after the stack is gone; a lease left behind (crash,
second Ctrl-C, failed destroy) is what :func:`reap` — ``cloudbench gc`` — finds once
the lease expired or its controller died.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cloudbench.core.files import utc_stamp, write_json_atomic
from cloudbench.core.processes import pid_alive, pid_cmdline
from cloudbench.errors import CloudbenchError, ReapError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.stack import STATE_DIR, Automation, PulumiAutomation, StackRef, log_appender

LEASES = "cloudbench-leases"
CLIENT_KEY = "client_key"
SECRET_FILES = (cc.PROGRAM_FILE, cc.PROGRAM_FILE + ".tmp", CLIENT_KEY)


def lease_path(ref: StackRef) -> Path:
    """Where the lease of ``ref`` is, in its state directory."""
    return ref.state_dir / LEASES / f"{ref.project}.{ref.stack}.json"


def write_lease(ref: StackRef, campaign: str, run_dir: Path, created: float, expiry: float,
                owner: str) -> Path:
    """The lease of a stack about to be created (fsynced: ``gc`` relies on it after a crash)."""
    path = lease_path(ref)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(path, {
        "cloud": ref.cloud, "project": ref.project, "stack": ref.stack, "campaign": campaign,
        "run_dir": str(Path(run_dir).resolve()), "created": created, "created_utc": utc_stamp(created),
        "expiry": expiry, "expiry_utc": utc_stamp(expiry), "owner": owner,
        "controller": _controller(),
    }, mode=0o600)
    return path


def _controller() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "cmdline": pid_cmdline(pid), "host": socket.gethostname()}


def _ref_from_lease(path: Path, lease: Mapping[str, Any]) -> StackRef:
    # Paths come from where the lease is, not from what it says: results may have moved.
    return StackRef(str(lease["cloud"]), str(lease["project"]), str(lease["stack"]), path.parent.parent)


def forget_secrets(stack_dir: Path) -> None:
    """Delete the private keys a stack's run directory holds (the program inputs with the
    injected host keys, the client key) once the stack is destroyed or its destroy failed.

    Neither is needed to destroy the stack later (``pulumi destroy`` does not run the
    program; the reaper and ``gc`` need only the state and its passphrase), and a results
    folder is made to be shared.
    """
    for name in SECRET_FILES:
        (Path(stack_dir) / name).unlink(missing_ok=True)



def reap_reason(lease: Mapping[str, Any], now: float) -> str | None:
    """Why a leased stack should go: its expiry passed, or its controller (on this host) died."""
    expiry = float(lease.get("expiry", 0))
    if now >= expiry:
        return f"expired {lease.get('expiry_utc', utc_stamp(expiry))}"
    ctl = lease.get("controller") or {}
    if ctl.get("host") == socket.gethostname():
        pid = int(ctl.get("pid", 0))
        if not (pid_alive(pid) and pid_cmdline(pid) == ctl.get("cmdline")):
            return f"controller {pid} is gone"
    return None


def _forget_leased_secrets(ref: StackRef, lease: Mapping[str, Any]) -> None:
    """The keys of a leased stack's run directory (found beside the state: results may have moved)."""
    run = str(lease.get("run_dir") or "")
    if run:
        forget_secrets(ref.state_dir.parent / Path(run).name / "stacks" / ref.stack)


def reap(results_root: str | Path, dry_run: bool = False, automation: Automation | None = None,
         now: float | None = None) -> list[str]:
    """Destroy cloud stacks whose lease expired or whose controller died (``cloudbench gc``)."""
    now = time.time() if now is None else now
    done: list[str] = []
    failures: list[str] = []
    for path in sorted(Path(results_root).glob(f"*/{STATE_DIR}/{LEASES}/*.json")):
        try:
            lease = json.loads(path.read_text())
            ref = _ref_from_lease(path, lease)
        except (OSError, ValueError, KeyError) as e:
            failures.append(f"unreadable lease {path}: {e}")
            continue
        why = reap_reason(lease, now)
        if why is None:
            continue
        what = f"{ref.cloud} stack {ref.stack} of campaign {lease.get('campaign', '?')} ({why})"
        if dry_run:
            done.append(f"would destroy {what}")
            continue
        automation = automation or PulumiAutomation()
        try:
            automation.preflight(ref.cloud)
            handle = automation.stack(ref)
            with log_appender(path.with_suffix(".log")) as out:
                handle.destroy(out)
            handle.remove()
        except Exception as e:  # one stack's failure, whatever it is, does not stop the others
            _forget_leased_secrets(ref, lease)
            msg = str(e) if isinstance(e, CloudbenchError) else f"{type(e).__name__}: {e}"
            failures.append(f"{what}: {msg}; the lease {path} stays, so `cloudbench gc` retries")
            continue
        _forget_leased_secrets(ref, lease)
        path.unlink(missing_ok=True)
        path.with_suffix(".log").unlink(missing_ok=True)
        done.append(f"destroyed {what}")
    if failures:
        raise ReapError(done, failures)
    return done
