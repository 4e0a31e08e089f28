"""File helpers every layer uses: checksums, atomic JSON, UTC timestamps."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def utc_now() -> str:
    """Now, UTC, with microseconds (``2026-11-24T12:00:00.000000Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha256_file(path: Path) -> str:
    """The file's SHA-256, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_disk_full(e: BaseException) -> bool:
    """Whether ``e`` says the filesystem is full (ENOSPC, EDQUOT), from the kernel, pyarrow or SQLite."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(e, sqlite3.OperationalError):
        return getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(e)
    # pyarrow's IO errors carry the errno only in their text ("[errno 28] No space left on device")
    return isinstance(e, OSError) and ("[errno 28]" in str(e).lower() or "no space left on device" in str(e).lower())


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so that a crash leaves the old file or the new one.

    The text goes to ``<name>.tmp``, is fsynced and renamed over ``path``; if writing
    fails (disk full, Ctrl-C), the temporary file is removed and the error raised.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w") as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
