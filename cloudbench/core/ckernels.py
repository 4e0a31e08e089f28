"""Small C kernels shipped as source, built with the machine's compiler on first use.

A kernel's library is compiled once per source version (``cc``, ``gcc`` or ``clang``),
cached under ``$XDG_CACHE_HOME/cloudbench`` by the hash of its source, flags and machine
(a home shared by x86 and arm hosts keeps one library each), and
loaded with ctypes (whose calls release the GIL). :func:`load` is the one way a module gets
its kernels: it builds and loads the library once per process and hands back its functions
with the caller's ctypes signatures applied, the same mapping on every later call. Without a
compiler, or when the build or the load fails, it gives None and the caller runs its numpy path.
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

CFLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off")
"""No contraction of a·b + c into one rounding: a kernel's arithmetic is numpy's, operation for operation."""

Signature = tuple[Any, tuple[Any, ...]]
"""A C function's ctypes ``(restype, argtypes)``: e.g. ``(ctypes.c_int64, (ctypes.c_void_p, ctypes.c_int64))``,
``None`` as restype for ``void``."""
Functions = Mapping[str, Callable[..., Any]]
"""A library's functions by their C name, their signatures applied."""

_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL | None] = {}  # the libraries, by source: one build and load a process
_typed: dict[tuple[Path, frozenset[tuple[str, Signature]]], Functions | None] = {}  # what load gave


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


def load(source: Path, signatures: Mapping[str, Signature]) -> Functions | None:
    """The functions ``signatures`` names (C name → :data:`Signature`) of the library built
    from ``source`` (a C file), their ctypes signatures applied; the library is compiled on the
    first call of the process when the cache does not hold it, and loaded once. Later calls
    with the same signatures give the same mapping; other signatures for the same source get
    their own function objects on the one library (ctypes keeps a signature per object).
    None when the library cannot be built or loaded; a name the library lacks raises
    AttributeError (the source and its caller disagree: a bug, not the machine)."""
    key = (source, frozenset(signatures.items()))
    with _lock:
        if key not in _typed:
            if source not in _loaded:
                _loaded[source] = _build(source)
            _typed[key] = None if (dll := _loaded[source]) is None else _bind(dll, signatures)
        return _typed[key]


def _bind(dll: ctypes.CDLL, signatures: Mapping[str, Signature]) -> Functions:
    fns: dict[str, Callable[..., Any]] = {}
    for name, (restype, argtypes) in signatures.items():
        fn = dll[name]  # a new function object (AttributeError when missing): its signature is this caller's alone
        fn.restype, fn.argtypes = restype, argtypes
        fns[name] = fn
    return fns


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
