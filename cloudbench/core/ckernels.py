"""Small C kernels shipped as source, built with the machine's compiler on first use.

A kernel's library is compiled once per source version (``cc``, ``gcc`` or ``clang``),
cached under ``$XDG_CACHE_HOME/cloudbench`` by the hash of its source, flags and machine
(a home shared by x86 and arm hosts keeps one library each), and
loaded with ctypes (whose calls release the GIL). Without a compiler, or when the
build or the load fails, :func:`load` gives None and the caller runs its numpy path.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

CFLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off")
"""No contraction of a·b + c into one rounding: a kernel's arithmetic is numpy's, operation for operation."""

_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL | None] = {}


def cache_dir() -> Path:
    """Where built kernels are kept: ``$XDG_CACHE_HOME/cloudbench`` (``~/.cache/cloudbench``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "cloudbench"


def compiler() -> str | None:
    """The first C compiler on PATH (``cc``, ``gcc``, ``clang``), or None."""
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


def compile_c(source: Path, out: Path, flags: Sequence[str]) -> str | None:
    """Compile ``source`` with ``flags`` into ``out`` (its folder made private if new), atomically:
    processes building at once each replace it whole. None on success, else why not (the
    compiler's stderr tail, or that there is no compiler); ``out`` is then left as it was."""
    cc = compiler()
    if cc is None:
        return "no C compiler (cc/gcc/clang) on PATH"
    out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    p = subprocess.run([cc, *flags, "-o", str(tmp), str(source), "-lm"], capture_output=True, text=True,
                       errors="replace", check=False)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        return p.stderr[-1500:] or f"{cc} exited with {p.returncode}"
    tmp.replace(out)
    return None


def load(source: Path) -> ctypes.CDLL | None:
    """The library built from ``source`` (a C file), compiled on the first call of the process
    when the cache does not hold it; None when it cannot be built or loaded."""
    with _lock:
        if source not in _loaded:
            _loaded[source] = _build(source)
        return _loaded[source]


def _build(source: Path) -> ctypes.CDLL | None:
    src = source.read_bytes()
    digest = hashlib.sha256(src + " ".join((*CFLAGS, platform.machine(), sys.platform)).encode()).hexdigest()[:12]
    lib = cache_dir() / f"{source.stem}-{digest}.so"
    try:
        if not lib.exists() and compile_c(source, lib, CFLAGS) is not None:
            return None
        return ctypes.CDLL(str(lib))
    except OSError:
        return None
