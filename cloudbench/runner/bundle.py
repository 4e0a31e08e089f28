"""The worker bundle: the stdlib worker files a run ships to its hosts, and their versions."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from cloudbench.workloads import workload_kind
from cloudbench.workloads.base import WORKERS_DIR

_VERSION_RE = re.compile(r'^WORKER_VERSION\s*=\s*["\']([^"\']+)["\']', re.MULTILINE)


def worker_versions(bundle: list[Path]) -> dict[str, dict[str, str]]:
    """Version constant and content digest of every worker file shipped to hosts."""
    out: dict[str, dict[str, str]] = {}
    for f in bundle:
        text = f.read_bytes()
        m = _VERSION_RE.search(text.decode(errors="replace"))
        out[f.stem] = {"version": m.group(1) if m else "", "sha256": hashlib.sha256(text).hexdigest()}
    return out


def worker_bundle(kinds: list[str]) -> list[Path]:
    """The worker files of the workload ``kinds`` (and ``facts.py``), in a stable order."""
    files = {"facts.py"}
    for k in kinds:
        files.update(workload_kind(k).worker_files)
    return [WORKERS_DIR / f for f in sorted(files)]
