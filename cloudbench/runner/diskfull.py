"""A full disk during or after a run: the space reserve, and the record of the failure.

A run holds :data:`RESERVE_FILE` while it writes; on a full disk the runner frees it
so that the manifest recording the failure is not itself the write that fails, and
``run --resume`` later finishes what is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterator

from cloudbench.core.files import is_disk_full
from cloudbench.errors import DISK_FULL_REASON, DiskFullError
from cloudbench.store.manifest import load_manifest, save_manifest
from cloudbench.store.rundir import RunDir

RESERVE_FILE = ".space-reserve"
"""A file of zeros a run keeps in its directory while it runs: freed on a full disk, so that the
manifest that records the failure is not itself the write that fails."""


@contextlib.contextmanager
def disk_full_recorded(run: RunDir, what: str) -> Iterator[None]:
    """Around writes after the run (its report): a full disk removes the partial ``report/`` (it is
    rebuilt from the data), records the run as failed (disk full) and raises a one-line
    :class:`DiskFullError`; ``run --resume`` then writes what is missing."""
    reserve = run.path / RESERVE_FILE
    try:
        # its own reserve, taken while there is space: the record of a failure below must not fail
        size = 2 * run.manifest_path.stat().st_size + (64 << 10)
        with reserve.open("wb") as f:
            os.posix_fallocate(f.fileno(), 0, size)
        yield
    except (OSError, sqlite3.OperationalError, DiskFullError) as e:
        if not isinstance(e, DiskFullError) and not is_disk_full(e):
            raise
        reserve.unlink(missing_ok=True)
        shutil.rmtree(run.path / "report", ignore_errors=True)
        for tmp in run.path.rglob("*.tmp"):
            tmp.unlink(missing_ok=True)
        m = load_manifest(run.manifest_path)
        m.status, m.error_kind = "failed", "disk_full"
        m.error = f"disk full: {what}: {DISK_FULL_REASON}"
        try:
            save_manifest(run.manifest_path, m)
        except OSError as e2:
            if not is_disk_full(e2):
                raise
            raise DiskFullError(str(run.manifest_path), f"{what}: {DISK_FULL_REASON}, and the manifest could not "
                                f"record it; free space, then `cloudbench run --resume {run.path}`") from None
        raise DiskFullError(str(run.path), f"{what}: {DISK_FULL_REASON}; the run is recorded failed (disk full), "
                            f"its data is whole; free space, then `cloudbench run --resume {run.path}`") from None
    finally:
        reserve.unlink(missing_ok=True)
