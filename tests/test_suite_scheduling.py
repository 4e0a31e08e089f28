"""The suite's scheduler (tests/conftest.py), in a pytest run of its own on two xdist workers.

Tests that share a fixture are one unit of work (here: a module of SHARED_MODULES, on one
worker), one worker starts on the testbed tests while the other computes, and an ``alone``
test runs with no other test beside it, while the others do run side by side. Each test of the
inner run logs its worker and the interval it slept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    BACKGROUND_UNITS,
    BESIDE_BACKGROUND,
    LOCK_DIR_ENV,
    MEASURED_S,
    SHARED_MODULES,
    SHARED_TESTS,
    WAITING,
)
from tests.paths import ROOT

SHARED = "tests/integration/test_wan.py"

INI = """[pytest]
markers =
    alone: runs with no other test beside it
    integration: testbed
    slow: slow
addopts = -p no:cacheprovider --strict-markers -n 2 -q
"""

LOGGED = """import os, time
from pathlib import Path

import pytest


def logged(name: str) -> None:
    start = time.monotonic()
    time.sleep(0.3)
    with Path(os.environ["SCHEDULING_LOG"]).open("a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']} {start} {time.monotonic()}\\n")
"""


def test_shared_modules_stay_on_one_worker_and_an_alone_test_runs_alone(tmp_path: Path) -> None:
    assert SHARED in SHARED_MODULES
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403 - the suite's hooks\n")
    (tmp_path / "tests" / "integration").mkdir(parents=True)
    (tmp_path / SHARED).write_text(LOGGED + "".join(f"\n\ndef test_s{i}():\n    logged('s{i}')\n"
                                                    for i in range(4)))
    # two more testbed units: without the lanes both workers start on testbed units
    (tmp_path / "tests" / "integration" / "test_t.py").write_text(
        LOGGED + "".join(f"\n\ndef test_t{i}():\n    logged('t{i}')\n" for i in range(2)))
    (tmp_path / "tests" / "test_free.py").write_text(
        LOGGED + "".join(f"\n\ndef test_f{i}():\n    logged('f{i}')\n" for i in range(6))
        + "\n\n@pytest.mark.alone\ndef test_alone():\n    logged('alone')\n")
    log = tmp_path / "log.txt"
    # a session of its own: not the outer run's locks, workers or options
    env = {k: v for k, v in os.environ.items() if k != LOCK_DIR_ENV and not k.startswith("PYTEST_")}
    env.update(SCHEDULING_LOG=str(log), PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "tests"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = {name: (worker, float(a), float(b)) for name, worker, a, b in map(str.split, log.read_text().splitlines())}
    assert len(runs) == 13, runs
    assert len({runs[f"s{i}"][0] for i in range(4)}) == 1, runs  # the shared module: one worker
    assert len({w for w, _, _ in runs.values()}) == 2, runs  # both workers ran tests
    # the lanes: one worker starts on a testbed test, the other on a computing one
    firsts = {min((a, n) for n, (w, a, _) in runs.items() if w == worker)[1] for worker in ("gw0", "gw1")}
    assert sorted(n[0] in "st" for n in firsts) == [False, True], runs

    def overlap(x: str, y: str) -> bool:
        return runs[x][1] < runs[y][2] and runs[y][1] < runs[x][2]

    others = [n for n in runs if n != "alone"]
    assert not [n for n in others if overlap("alone", n)], runs
    assert any(overlap(x, y) for x in others for y in others if x < y), runs  # side by side otherwise


def test_the_measured_units_and_the_waiting_tests_exist() -> None:
    """A renamed or removed test in MEASURED_S, WAITING, BESIDE_BACKGROUND or BACKGROUND_UNITS would
    silently lose its place in the order."""
    assert set(SHARED_TESTS) >= BACKGROUND_UNITS
    for key in [*MEASURED_S, *WAITING, *BESIDE_BACKGROUND]:
        if key in SHARED_TESTS:
            continue
        module, _, function = key.partition("::")
        text = (ROOT / module).read_text()
        assert not function or f"def {function}(" in text, key
        assert function or module in SHARED_MODULES, key


def test_units_beside_the_background_process_start_and_the_units_waiting_for_it_end_their_lane() -> None:
    """The compressed-day campaigns run in the background while the testbed lane runs the tests that
    assert no rate or time; the tests that read the campaigns come last (not first, holding a worker
    for two minutes), an ``alone`` test after them."""
    from types import SimpleNamespace

    from tests.conftest import _start_order

    def item(nodeid: str, *keywords: str) -> Any:
        return SimpleNamespace(nodeid=nodeid, keywords=set(keywords))

    reader = next(iter(SHARED_TESTS["compressed-days"]))
    kill = "tests/integration/test_campaign.py::" \
           "test_kill_9_at_random_moments_then_restart_runs_every_trial_exactly_once[2]"
    compare = "tests/integration/test_compare_testbed.py::" \
              "test_a_known_wan_delay_is_worse_and_identical_campaigns_are_not"
    items = [item(reader, "slow"), item("tests/test_x.py::test_alone", "alone"), item(compare),
             item("tests/integration/test_disk_full.py::test_a[parquet]"), item(kill, "slow"),
             item("tests/test_x.py::test_short")]
    order = [i.nodeid for i in sorted(items, key=_start_order)]
    assert set(order[:2]) == {kill, "tests/integration/test_disk_full.py::test_a[parquet]"}, order
    assert order[2:] == [compare, "tests/test_x.py::test_short", reader, "tests/test_x.py::test_alone"], order


def test_waiting_for_the_background_campaigns_reads_their_result_or_says_why_there_is_none(tmp_path: Path) -> None:
    from tests.conftest import BACKGROUND_PID
    from tests.integration.compressed_days import FAILURE, LOG, RESULT, wait_in_background

    done = tmp_path / "done"
    done.mkdir()
    (done / RESULT).write_text(json.dumps({"sine": "/a", "step": "/b", "flat": "/c", "step_at": 12.5}))
    days = wait_in_background(done)
    assert (days.sine, days.step, days.flat, days.step_at) == (Path("/a"), Path("/b"), Path("/c"), 12.5)

    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / FAILURE).write_text("AssertionError: the flat campaign ended with 1")
    with pytest.raises(AssertionError, match="flat campaign ended with 1"):
        wait_in_background(failed)

    crashed = tmp_path / "crashed"  # another worker's process, ended without a word
    crashed.mkdir()
    (crashed / LOG).write_text("Killed")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    (crashed / BACKGROUND_PID).write_text(ended.stdout.strip())
    with pytest.raises(AssertionError, match="ended without a result: Killed"):
        wait_in_background(crashed)


def test_a_timing_test_waits_until_the_background_campaigns_have_ended_however_they_end(tmp_path: Path) -> None:
    """wait_until_ended (the guard of every testbed test not beside the campaigns) returns when
    they passed, failed or their process is gone, and not while that process still runs."""
    from tests.conftest import BACKGROUND_PID
    from tests.integration.compressed_days import FAILURE, RESULT, wait_until_ended

    for name, outcome in ((RESULT, "{}"), (FAILURE, "AssertionError")):
        where = tmp_path / name
        where.mkdir()
        (where / name).write_text(outcome)
        # the outcome ends the wait, though the process that wrote it is still there
        alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            (where / BACKGROUND_PID).write_text(str(alive.pid))
            waiter = threading.Thread(target=wait_until_ended, args=(where,), daemon=True)
            waiter.start()
            waiter.join(timeout=10)
            assert not waiter.is_alive(), f"still waiting after a {name}"
        finally:
            alive.kill()
            alive.wait()

    running = tmp_path / "running"
    running.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        (running / BACKGROUND_PID).write_text(str(proc.pid))
        t0 = time.monotonic()
        waiter = threading.Thread(target=wait_until_ended, args=(running,))
        waiter.start()
        waiter.join(timeout=1.0)
        assert waiter.is_alive(), "returned while the campaigns' process ran"
        proc.wait(timeout=30)
        waiter.join(timeout=30)  # a zombie counts as ended (process_running), so it returns before the reap too
        assert not waiter.is_alive() and time.monotonic() - t0 >= 1.0
    finally:
        proc.kill()
        proc.wait()
