"""The suite's scheduler (tests/conftest.py), in a pytest run of its own on two xdist workers.

Tests that share a fixture are one unit of work (here: a module of SHARED_MODULES, on one
worker), one worker starts on the testbed tests while the other computes, and an ``alone``
test runs with no other test beside it, while the others do run side by side. Each test of the
inner run logs its worker and the interval it slept.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import LOCK_DIR_ENV, MEASURED_S, SHARED_MODULES, SHARED_TESTS, WAITING
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
    """A renamed or removed test in MEASURED_S or WAITING would silently lose its place in the order."""
    for key in [*MEASURED_S, *WAITING]:
        if key in SHARED_TESTS:
            continue
        module, _, function = key.partition("::")
        text = (ROOT / module).read_text()
        assert not function or f"def {function}(" in text, key
        assert function or module in SHARED_MODULES, key
