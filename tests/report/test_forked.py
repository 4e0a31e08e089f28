"""A forked child of the report's tail: its value or its exception reaches the parent, and it never
outlives the ``with`` block (an error or Ctrl-C in the parent ends and reaps it)."""

from __future__ import annotations

import errno
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cloudbench.errors import DiskFullError, ResultError
from cloudbench.report.forked import Forked
from tests.paths import ROOT


def reaped(pid: int) -> bool:
    """Whether ``pid`` is no longer a child of this process (waited for already)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_childs_value_comes_back_computed_in_another_process() -> None:
    with Forked(lambda: (os.getpid(), [1.5, "x", {"k": None}])) as child:
        pid, value = child.result()
    assert value == [1.5, "x", {"k": None}]
    assert pid == child.pid and pid != os.getpid()
    assert child.pid is not None and reaped(child.pid)


def fail_with(e: BaseException) -> None:
    raise e


def test_the_childs_cloudbench_error_is_raised_in_the_parent_whole() -> None:
    """cloudbench's errors keep fields their message does not (a ResultError's path, a DiskFullError's
    kept files): plain pickling cannot rebuild them; the child's traceback comes as a note."""
    with Forked(lambda: fail_with(ResultError("/r/report.json", "cannot write"))) as child, \
            pytest.raises(ResultError) as info:
        child.result()
    assert info.value.path == "/r/report.json" and str(info.value) == "/r/report.json: cannot write"
    assert "in cloudbench's forked child" in "".join(info.value.__notes__)
    assert "fail_with" in "".join(info.value.__notes__)
    kept = {"a.parquet": "abc"}
    with Forked(lambda: fail_with(DiskFullError("/r", "full", kept))) as child, pytest.raises(DiskFullError) as full:
        child.result()
    assert full.value.kept == kept


def test_a_full_disk_in_the_child_is_an_oserror_with_its_errno(tmp_path: Path) -> None:
    """The CLI tells a full disk (exit 5) from other OSErrors by errno."""
    with Forked(lambda: fail_with(OSError(errno.ENOSPC, "No space left on device"))) as child, \
            pytest.raises(OSError) as info:
        child.result()
    assert info.value.errno == errno.ENOSPC


def test_a_child_killed_before_its_result_is_an_error_not_a_hang() -> None:
    with Forked(lambda: time.sleep(60)) as child:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        with pytest.raises(ChildProcessError, match="ended without a result"):
            child.result()


def test_leaving_the_block_on_an_error_ends_the_child_and_its_cleanup_runs(tmp_path: Path) -> None:
    """The child's ``finally`` (write_json_atomic removing its temporary file) runs on the SIGTERM
    the parent sends, and the child is reaped: none outlives the command."""
    started, cleaned = tmp_path / "started", tmp_path / "cleaned"

    def work() -> None:
        try:
            started.touch()
            time.sleep(60)
        finally:
            cleaned.touch()

    t0 = time.monotonic()
    with pytest.raises(KeyError), Forked(work) as child:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise KeyError("the parent failed")
    assert child.pid is not None and reaped(child.pid)
    assert cleaned.exists()
    assert time.monotonic() - t0 < 30  # not the child's 60 s


def test_ctrl_c_in_the_parent_ends_the_children_of_the_report_command(tmp_path: Path) -> None:
    """SIGINT to a process in the middle of a forked call (as the terminal's Ctrl-C, sent here to the
    parent alone): it exits with KeyboardInterrupt and leaves no child behind."""
    code = f"""
import os, sys, time
sys.path.insert(0, {str(ROOT)!r})
from cloudbench.report.forked import Forked
with Forked(lambda: time.sleep(60)) as child:
    print(child.pid, flush=True)
    child.result()
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    pid = int(p.stdout.readline())
    p.send_signal(signal.SIGINT)
    _, stderr = p.communicate(timeout=30)
    assert p.returncode != 0 and "KeyboardInterrupt" in stderr
    with pytest.raises(ProcessLookupError):  # reaped by its parent, not left a zombie or orphan
        os.kill(pid, 0)


def test_a_sigint_taken_by_another_thread_still_ends_the_wait_on_the_child() -> None:
    """A process-directed SIGINT can be taken by any thread that does not block it (the report's
    sender threads, pyarrow's): Python then runs its handler in the main thread at its next
    bytecode, but a main thread blocked in ``read`` on the child's pipe is not interrupted. The
    same happens to a signal that lands just before the read. Here the main thread blocks SIGINT
    so that another thread takes it: the wait must still end with KeyboardInterrupt, and soon."""
    code = f"""
import signal, sys, threading, time
sys.path.insert(0, {str(ROOT)!r})
from cloudbench.report.forked import Forked
ready = threading.Event()
def taker():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {{signal.SIGINT}})
    ready.set()
    time.sleep(120)
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT}})
threading.Thread(target=taker, daemon=True).start()
ready.wait()
with Forked(lambda: time.sleep(120)) as child:
    print(child.pid, flush=True)
    child.result()
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = 0
    try:
        assert p.stdout is not None
        pid = int(p.stdout.readline())
        time.sleep(0.5)  # the parent is in its wait on the child's pipe
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)  # the old wait ended only with the child, after 120 s
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
            if pid:  # the forked child, left an orphan by the killed parent
                os.kill(pid, signal.SIGKILL)
    assert p.returncode != 0 and "KeyboardInterrupt" in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_what_the_parent_printed_before_forking_is_printed_once() -> None:
    """stdout into a pipe is block-buffered: a child that inherited an unflushed buffer and flushed
    it on exit printed the parent's lines twice."""
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from cloudbench.report.forked import Forked
print("before the fork")
with Forked(lambda: print("from the child") or 7) as child:
    assert child.result() == 7
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.splitlines() == ["before the fork", "from the child"]


def test_the_parents_objects_are_frozen_while_children_share_its_pages() -> None:
    """While a child lives, the parent's collector leaves the objects it had at the fork alone
    (a full collection would write to each one's header and copy its page from the child); once
    the last child is reaped, or stopped on an error, they are collected again as before."""
    assert gc.get_freeze_count() == 0
    with Forked(lambda: 1) as a:
        frozen = gc.get_freeze_count()
        with Forked(lambda: 2) as b:  # nested, as the page's figures fork beside report.json's child
            assert b.result() == 2
        # the first child still lives: still frozen (the count itself may fall: a frozen object
        # whose last reference goes is freed and leaves the permanent generation)
        assert frozen > 0 and gc.get_freeze_count() > 0
        assert a.result() == 1
    assert gc.get_freeze_count() == 0
    with pytest.raises(KeyError), Forked(lambda: time.sleep(30)):
        assert gc.get_freeze_count() > 0
        raise KeyError("an error in the parent: the child is stopped")
    assert gc.get_freeze_count() == 0
