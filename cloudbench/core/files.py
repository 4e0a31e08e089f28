"""File helpers every layer uses: checksums, atomic JSON, UTC timestamps, file-name slugs."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

UTC_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
UTC_MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"
UTC_BASIC = "%Y%m%dT%H%M%SZ"  # ISO 8601's basic format: sortable and safe in file names


def utc_stamp(t: float | datetime | None = None, *, micro: bool = False, basic: bool = False) -> str:
    """``t`` (seconds since the epoch or an aware datetime; default now) as an ISO 8601 UTC stamp.

    ``2026-11-24T12:00:00Z`` by default, ``2026-11-24T12:00:00.000000Z`` with ``micro``,
    ``20261124T120000Z`` with ``basic`` (run ids).
    """
    if t is None:
        when = datetime.now(UTC)
    elif isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError(f"utc_stamp needs an aware datetime, got the naive {t!r}")
        when = t.astimezone(UTC)
    else:
        when = datetime.fromtimestamp(t, UTC)
    return when.strftime(UTC_BASIC if basic else UTC_MICRO if micro else UTC_SECONDS)


def slug(text: str, empty: str = "x") -> str:
    """A file-name-safe form of a name (workload, host, metric): runs of other characters
    become ``_``; ``empty`` when nothing is left. Cloud resource names have their own rule
    (:func:`cloudbench.providers.clouds.common.cloud_slug`)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or empty


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


def write_json_atomic(path: Path, data: Any, mode: int | None = None) -> None:
    """Write ``data`` as JSON to ``path`` so that a crash leaves the old file or the new one.

    The text goes to ``<name>.tmp``, is fsynced and renamed over ``path``; if writing
    fails (disk full, Ctrl-C), the temporary file is removed and the error raised.
    With ``mode`` (e.g. ``0o600`` for a file holding keys) the file has that mode from
    its creation on, never a moment readable by others.
    """
    write_atomic(path, lambda f: f.write((json.dumps(data, indent=2, sort_keys=False, default=str) + "\n").encode()),
                 mode)


def write_atomic(path: Path, write: Callable[[BinaryIO], Any], mode: int | None = None) -> None:
    """:func:`write_json_atomic` for any content: ``write`` writes it to the open binary file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        if mode is None:
            f = tmp.open("wb")
        else:
            tmp.unlink(missing_ok=True)  # a crash's leftover may have another mode
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.fchmod(fd, mode)  # exactly ``mode``, whatever the umask
            f = os.fdopen(fd, "wb")
        with f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
