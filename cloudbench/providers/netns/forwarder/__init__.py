"""The WAN delay line: a C helper built from source here, or a Python fallback.

``cbfwd.c`` is compiled with the machine's ``cc``/``gcc`` (:func:`ckernels.compile_c`) on first
use and cached by the hash of its source; ``pyfwd.py`` (stdlib only) runs when no compiler is
installed or when a spec asks for it. Both read the same config file (format in
``cbfwd.c``). Accuracy and capacity of both: ``python bench/bench_wan.py``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Literal

from cloudbench.core import ckernels
from cloudbench.errors import ProvisionError

HERE = Path(__file__).resolve().parent
C_SOURCE = HERE / "cbfwd.c"
PY_SOURCE = HERE / "pyfwd.py"
Kind = Literal["auto", "c", "python"]
# What the delay line adds to a round trip beyond 2 × the configured delay (two
# passes, one per direction), as allowed for in the ground-truth tests with the C
# helper. ``bench/bench_wan.py`` on a loaded 2-vCPU VM, added RTT p50 / p99 (µs):
#   C helper      0 ms: 105 / 454    2 ms: 189 / 2274    30 ms: 110 / 1453
#   C, realtime   0 ms:  89 / 2085   2 ms: 144 / 2354    30 ms:  82 / 3605
#   Python        0 ms:  59 / 274    2 ms: 1098 / 6073   30 ms: 1163 / 4291
# (the p99 follows the machine's load: the reference path's own p99 was 0.3-2 ms).
# Capacity through one link: TCP 0.6-1.0 Gbit/s at 0-2 ms, 0.27-0.4 Gbit/s at 30 ms
# (one flow, window-limited); UDP 0.35-0.57 Gbit/s (Python: 0.17-0.24).
RTT_ALLOWANCE_US = 600.0
CFLAGS = ("-O2", "-Wall")
"""An executable, not a shared library: :data:`ckernels.CFLAGS` are not these."""


def build_c(cache_dir: Path) -> Path:
    """Compile cbfwd.c into ``cache_dir`` (once per source version); returns the binary."""
    src = C_SOURCE.read_bytes()
    out = cache_dir / f"cbfwd-{hashlib.sha256(src).hexdigest()[:12]}"
    if out.exists():
        return out
    if ckernels.compiler() is None:
        raise ProvisionError("netns", "-", "no C compiler (cc/gcc) to build the WAN forwarder; "
                             "install gcc, or set `wan: {forwarder: python}`")
    failure = ckernels.compile_c(C_SOURCE, out, CFLAGS)
    if failure is not None:
        raise ProvisionError("netns", "-", f"building the WAN forwarder failed: {failure}")
    return out


def forwarder_argv(kind: Kind, cache_dir: Path) -> tuple[list[str], str]:
    """The command (without its config argument) and which forwarder it is ("c"/"python")."""
    if kind == "c" or (kind == "auto" and ckernels.compiler() is not None):
        return [str(build_c(cache_dir))], "c"
    return [sys.executable, str(PY_SOURCE)], "python"
