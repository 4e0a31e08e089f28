"""The allocator tuning the ``cloudbench`` command applies to its own process (core.allocator.keep_freed_memory)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

PROBE = """
import json, pyarrow as pa
from cloudbench.core.allocator import keep_freed_memory
before = pa.default_memory_pool().backend_name
applied = keep_freed_memory()
print(json.dumps({"before": before, "applied": applied, "after": pa.default_memory_pool().backend_name}))
"""


def test_the_tuning_applies_on_glibc_and_arrow_then_uses_malloc() -> None:
    # in a child: the test process keeps its allocator
    out = json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                    check=True).stdout)
    assert out == {"before": out["before"], "applied": True, "after": "system"}
    assert out["before"] != "system"  # pyarrow's own pool (mimalloc or jemalloc) until then


THREAD_PROBE = """
import json, sys, threading
if sys.argv[1] == "tuned":
    from cloudbench.core.allocator import keep_freed_memory
    keep_freed_memory()
elif sys.argv[1] == "command":  # what the cloudbench command's process does: import, then main()'s tuning
    import cloudbench.cli
    cloudbench.cli.keep_freed_memory()
import pyarrow, numpy as np  # pyarrow's import starts a thread
def in_heap(address):  # the main arena's heap (brk), where the [heap] mapping is
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= address < hi:
            return line.rstrip().endswith("[heap]")
    return False
seen = []
def work():
    a = np.ones(2_000_000)  # 16 MB: below the mmap threshold, from the thread's arena
    seen.append(in_heap(a.ctypes.data))
ts = [threading.Thread(target=work) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(seen))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas, /proc/self/maps")
def test_threads_allocate_from_the_main_heap_once_tuned() -> None:
    """Once tuned (or once the command's package is imported: before pyarrow starts a thread),
    threads' large blocks come from the main arena's heap, which keeps freed memory (a thread's
    own arena unmaps each heap of its own as its last block is freed); untuned, from their own
    arenas' mappings, as glibc does by default."""
    def run(mode: str) -> list[bool]:
        out: list[bool] = json.loads(subprocess.run([sys.executable, "-c", THREAD_PROBE, mode], capture_output=True,
                                                    text=True, check=True).stdout)
        return out

    assert run("tuned") == [True] * 3
    assert run("command") == [True] * 3
    assert run("default") != [True] * 3  # the probe tells the two apart


def test_the_command_tunes_its_process_before_running(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloudbench.cli as cli

    calls: list[str] = []

    def tune() -> bool:
        calls.append("tuned")
        return True

    def app(*_: Any, **__: Any) -> None:
        calls.append("app")

    monkeypatch.setattr(cli, "keep_freed_memory", tune)
    monkeypatch.setattr(cli, "app", app)
    cli.main()
    assert calls == ["tuned", "app"]


def _vm_flags(address: int) -> list[str]:
    """The kernel's VmFlags of the mapping that holds ``address`` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0] if line.strip() else ""
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    return []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps are Linux's")
def test_small_page_zeros_are_zeros_the_kernel_maps_without_huge_pages() -> None:
    """The round matrices' memory: writable zeros of the shape and type asked for, in a mapping
    advised MADV_NOHUGEPAGE (the kernel's 'nh' flag), where numpy's own zeros may take huge
    pages (see core.allocator.small_page_zeros for what they cost)."""
    import numpy as np

    from cloudbench.core.allocator import small_page_zeros

    a = small_page_zeros((8, 8, 100_000), np.uint32)
    assert a.shape == (8, 8, 100_000) and a.dtype == np.uint32 and a.flags.writeable
    assert not a.any()
    a[1, 2, 3] = 7
    assert int(a.sum()) == 7
    assert "nh" in _vm_flags(a.ctypes.data)
    assert small_page_zeros((0, 5), np.int64).shape == (0, 5)


BLAS_PROBE = """
import os, sys
if sys.argv[1] == "command":
    import cloudbench.cli  # the command's process: its package's import, before numpy
import numpy as np
np.ones((300, 300)) @ np.ones((300, 300))  # large enough for OpenBLAS to use its threads
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.parametrize(("how", "env", "threads"), [("plain", None, 2), ("command", None, 1), ("command", "2", 2)])
def test_the_command_runs_openblas_without_threads_unless_told(how: str, env: str | None, threads: int) -> None:
    """numpy's OpenBLAS starts a thread per core (2 here) that spins after each call; the command's
    process has none (OPENBLAS_NUM_THREADS=1 set before numpy loads), unless the user set it."""
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: OpenBLAS starts no thread of its own anyway")
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE, how], capture_output=True, text=True, check=True,
                         env=base if env is None else {**base, "OPENBLAS_NUM_THREADS": env}).stdout.split()
    assert (int(out[0]) > 1 if how == "plain" else int(out[0]) == threads), out  # plain: one a core
    assert out[1] == (env or ("1" if how == "command" else "None"))
