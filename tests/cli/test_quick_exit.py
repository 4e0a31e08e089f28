"""How ``cloudbench`` ends: a command that has closed its files (``report``) leaves without the
interpreter's teardown, its atexit handlers run and its output flushed; any other, or one with a
thread still working, as Python does. And what it says when it seems stuck (SIGUSR1)."""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cloudbench.cli import main
from cloudbench.testing.fake_results import FakeRun, make_campaign
from tests.paths import ROOT

SCRIPT = """
import atexit, sys, threading, time
from cloudbench.cli.app import quick_exit

class Torn:
    def __del__(self):
        print("torn down", flush=True)

kept = Torn()
atexit.register(lambda: print("atexit ran"))
sys.stdout.write("buffered, no newline")
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.2), print("thread done"))).start()
quick_exit(7)
"""


def run_script(mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), mode], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def test_quick_exit_runs_atexit_flushes_and_skips_the_teardown() -> None:
    """The exit code, atexit's handlers and the buffered output are kept; objects are not finalised
    (what makes it quick: a plain exit prints "torn down")."""
    p = run_script("alone")
    assert p.returncode == 7, p.stderr
    assert p.stdout.startswith("buffered, no newline") and "atexit ran" in p.stdout
    assert "torn down" not in p.stdout


def test_quick_exit_with_a_thread_at_work_waits_for_it_as_python_does() -> None:
    p = run_script("thread")
    assert p.returncode == 7, p.stderr
    assert "thread done" in p.stdout and "atexit ran" in p.stdout


class Left(Exception):
    """os._exit, replaced: the code it was called with."""


def test_the_report_command_leaves_quickly_and_other_commands_do_not(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` calls ``os._exit`` with the command's code after ``cloudbench report`` (its atexit
    handlers run first), and not after ``cloudbench --help``: there, SystemExit as usual."""
    camp = make_campaign(tmp_path, "c", [FakeRun({("m", "g"): [1.0, 2.0, 3.0]}, workloads=[])])
    run = next(camp.glob("*/manifest.json")).parent
    ran: list[str] = []

    def fake_exit(code: int) -> None:
        raise Left(code)

    leaving = importlib.import_module("cloudbench.cli.app").leaving  # the module (the package's `app` is the app)
    monkeypatch.setattr(os, "_exit", fake_exit)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: ran.append("atexit"))
    monkeypatch.setattr(leaving, "quick", False)
    monkeypatch.setattr(sys, "argv", ["cloudbench", "report", str(run), "--no-html"])
    with pytest.raises(Left) as left:
        main()
    assert left.value.args == (0,) and ran == ["atexit"]
    assert (run / "report" / "report.json").exists()

    leaving.quick = False  # as a new process starts (monkeypatch restores it)
    monkeypatch.setattr(sys, "argv", ["cloudbench", "--help"])
    with pytest.raises(SystemExit) as plain:
        main()
    assert plain.value.code == 0 and ran == ["atexit"]


def test_sigusr1_prints_every_threads_stack_and_the_command_goes_on() -> None:
    """``kill -USR1`` on a command that seems stuck: each thread's Python stack on stderr (the
    integration tests send it before they give up on a process), and the command carries on."""
    code = ("import sys, threading, time, cloudbench.cli as c\n"
            "def waiting():\n    time.sleep(4)\n"
            "c.app = lambda: (threading.Thread(target=waiting, name='helper').start(), time.sleep(4))\n"
            "c.main()\nprint('went on')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        time.sleep(2.5)  # past the imports, in the sleeps
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and out.strip() == "went on", err
    assert err.count("most recent call first") >= 2 and "in waiting" in err, err
