from __future__ import annotations

import fcntl
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Generator, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests.paths import QUICKSTART

# The README's test command runs on two pytest-xdist workers (`-n 2` in pyproject's addopts):
# the testbed tests mostly wait on real time (schedules, trials, sleeps), so one worker's
# campaign overlaps with the other's CPU-bound unit tests. Three things keep that honest:
#
# * a unit of work (what one worker runs, in order) is one test, or all the tests that share a
#   fixture broader than a function (a testbed, a reference run, a cached simulation): they run
#   on one worker, so it is built once, as serially (SHARED_MODULES, SHARED_TESTS, checked at
#   collection by ``_check_units``);
# * two lanes (``lane``): the first worker takes the testbed units, which mostly wait on real
#   time, while the other takes the units that compute (simulations, reports), so the two
#   overlap instead of both workers starting on testbeds and then competing for the CPU; a
#   worker whose lane is empty helps with the other (``_UnitScheduling._assign_work_unit``);
# * in each lane the longest units start first (``_start_order``, by the durations measured in
#   MEASURED_S), so that the run does not end with one long test on one worker while the other
#   idles;
# * the compressed-day campaigns (two minutes of waiting on slots) run in a background process
#   started at collection, beside the testbed tests that assert no rate or time, which start
#   their lane (BESIDE_BACKGROUND); the tests that read them end it (BACKGROUND_UNITS);
# * a test marked ``alone`` runs with nothing beside it (``pytest_runtest_protocol``: a
#   readers-writer lock over the session's workers), for an assertion that the other worker's
#   CPU use would change; they run last. Keep the set small: each one costs its whole
#   duration in wall time. A test that measures a rate or a time asserts what the system
#   guarantees instead wherever it can.
LOCK_DIR_ENV = "CLOUDBENCH_TEST_LOCK_DIR"
_LOCK_DIR_KEY = pytest.StashKey[str]()

# Modules whose tests share a module-scoped fixture or a cached simulation: one unit each.
SHARED_MODULES = frozenset({
    "tests/analysis/adversarial/test_adversarial.py",  # rows_of: one simulation per suite (functools.cache)
    "tests/integration/test_disk_full.py",  # reference: the run without a fault
    "tests/integration/test_wan.py",  # mda_run: the ECMP testbed
    "tests/report/test_diurnal_terminal.py",  # result
    "tests/report/test_line_wrap.py",  # report
    "tests/report/test_page_has_the_terminal.py",  # rendered
    "tests/test_dataset.py",  # campaign
    "tests/test_dataset_kinds.py",  # hot_cold
    "tests/test_house_rules.py",  # parsed, comments_and_docstrings: every file read once (functools.cache)
    "tests/workloads/echo/test_engine.py",  # run
})
# Tests of several modules that share a session-scoped fixture: one unit per name.
SHARED_TESTS = {
    "compressed-days": frozenset({  # the three compressed-day campaigns (~140 s, in the background)
        "tests/integration/test_campaign.py::"
        "test_a_compressed_day_anchored_to_utc_is_recovered_and_a_flat_link_shows_no_effect",
        "tests/integration/test_changes_testbed.py::"
        "test_a_3ms_step_half_way_is_found_within_one_slot_and_a_flat_campaign_has_none",
    }),
}


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: a SHARED_TESTS name, a SHARED_MODULES module or itself."""
    function = nodeid.split("[", 1)[0]
    for name, tests in SHARED_TESTS.items():
        if function in tests:
            return name
    module = nodeid.split("::", 1)[0]
    return module if module in SHARED_MODULES else nodeid


# What the long units took (s, set-up and call, from `--durations` on two workers, rounded; last
# set from a full run of 21dd36d at load average 4-5, the BESIDE_BACKGROUND units beside the
# compressed-day campaigns):
# each lane starts with its longest units, so that neither ends with one long test while the
# other worker idles. Keys: a SHARED_TESTS name, a SHARED_MODULES module, or a test (without
# its parameters: each parametrised case). A unit not listed counts 5 s if marked ``slow``, else
# 1 s; a test that takes more than ~8 s belongs here.
MEASURED_S = {
    "compressed-days": 10,  # the two analyses; the campaigns ran in the background
    "tests/integration/test_wan.py": 50,
    "tests/integration/test_compare_testbed.py::test_a_known_wan_delay_is_worse_and_identical_campaigns_are_not": 23,
    "tests/integration/test_disk_full.py": 48,
    "tests/integration/test_colocation.py::test_colocation_audit_finds_the_truth": 27,
    "tests/integration/test_drain_coverage.py::test_drain_intervals_cover_the_configured_bucket": 37,
    "tests/workers/test_echo.py::test_memory_stays_flat_over_a_long_fast_trial": 17,
    "tests/integration/test_campaign.py::test_sigterm_tears_down_and_exits_130_and_the_next_start_finishes": 40,
    "tests/integration/test_campaign.py::test_kill_9_at_random_moments_then_restart_runs_every_trial_exactly_once": 20,
    "tests/integration/test_html_browser.py::test_the_report_of_a_real_run_renders_in_chromium": 30,
    "tests/integration/test_throughput.py::test_token_bucket_ground_truth": 22,
    "tests/integration/test_throughput.py::test_plain_cap_no_drain_and_udp_loss": 24,
    "tests/integration/test_events.py::test_flat_links_have_at_most_one_link_event": 22,
    "tests/integration/test_campaign.py::test_run_resume_finishes_a_one_shot_run_killed_mid_trial": 11,
    "tests/integration/test_events.py::test_spike_and_step_are_found_on_their_own_pairs": 17,
    "tests/integration/test_echo_modes.py::test_connection_modes_and_a_payload_sweep_on_the_testbed": 13,
    "tests/integration/test_run.py::test_every_round_and_peer_is_a_row": 10,
    "tests/integration/test_physical_hosts.py::test_hosts_on_one_physical_host_share_its_nic": 9,
    "tests/analysis/adversarial/test_adversarial.py": 35,
    "tests/report/test_page_has_the_terminal.py": 25,
    "tests/analysis/coverage/test_coverage.py::test_event_size_intervals_cover_behind_the_detector": 10,
    "tests/analysis/test_changes.py::"
    "test_a_step_is_found_at_its_run_and_its_size_covered_with_a_false_change_beside_it_or_not": 16,
    "tests/analysis/test_diurnal.py::"
    "test_on_campaigns_without_a_time_of_day_effect_every_printed_test_holds_its_level": 12,
    "tests/analysis/test_changes.py::test_flat_series_give_a_change_in_at_most_alpha_of_them": 13,
    "tests/report/test_html.py::test_a_large_runs_figures_stay_small": 10,
    "tests/report/test_lazy_imports.py::test_a_report_without_its_page_imports_no_matplotlib": 9,
}

# Units whose fixture runs in a background process started at collection
# (tests/integration/conftest.py): last in their lane, so that it has finished when they run.
BACKGROUND_UNITS = frozenset({"compressed-days"})
# The testbed units that run first, while the background process runs (its three campaigns
# provision a testbed each every 6 s): tests that assert no rate or time (kills,
# restarts, a full disk), so that the timing tests (compare's delay, the WAN step, caps,
# colocation) do not share the cores with the campaigns, nor the campaigns with them.
BESIDE_BACKGROUND = frozenset({
    "tests/integration/test_campaign.py::test_kill_9_at_random_moments_then_restart_runs_every_trial_exactly_once",
    "tests/integration/test_campaign.py::test_sigterm_tears_down_and_exits_130_and_the_next_start_finishes",
    "tests/integration/test_campaign.py::test_run_resume_finishes_a_one_shot_run_killed_mid_trial",
    "tests/integration/test_disk_full.py",
})

# Tests outside tests/integration that mostly wait on real time rather than compute.
WAITING = frozenset({
    "tests/workers/test_echo.py::test_memory_stays_flat_over_a_long_fast_trial",  # a 16 s trial
})


def lane(unit: str) -> str:
    """``testbed`` for a unit that mostly waits on real time (the testbed tests, sleeps),
    ``compute`` for one that keeps a core busy (simulations, reports, unit tests)."""
    if unit == "compressed-days" or unit.startswith("tests/integration/") or unit in WAITING:
        return "testbed"
    return "compute"


# The terminal size the workers find set (80 x 24), where the controller had none: rich's consoles,
# created when cloudbench.cli is imported, would keep 80 columns and ignore the COLUMNS a test
# gives CliRunner (tables cut short). Each worker gets the controller's values instead.
_TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["cloudbench_terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_ENV}


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", {})
    for key, value in workerinput.get("cloudbench_terminal_env", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if not hasattr(config, "workerinput") and LOCK_DIR_ENV not in os.environ:
        # the controller (or a run without xdist): the workers it starts inherit the variable
        path = tempfile.mkdtemp(prefix="cloudbench-test-locks-")
        os.environ[LOCK_DIR_ENV] = path
        config.stash[_LOCK_DIR_KEY] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_LOCK_DIR_KEY, None)
    if path is not None:
        _stop_background(Path(path))
        shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(LOCK_DIR_ENV, None)


# A process a worker started to run beside the tests (the compressed-day campaigns,
# tests/integration/compressed_days.py) writes its pid to LOCK_DIR/<name>/background.pid.
BACKGROUND_PID = "background.pid"


def _stop_background(lock_dir: Path) -> None:
    """Stop (SIGTERM: it tears its testbeds down) a background process still running at the end of
    the session (a session interrupted, or ended before the tests that wait for it), and wait for it."""
    for pid_file in lock_dir.glob(f"*/{BACKGROUND_PID}"):
        pid = int(pid_file.read_text())
        if process_running(pid):
            warnings.warn(f"stopping the background process {pid} ({pid_file.parent.name})", stacklevel=1)
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while process_running(pid) and time.monotonic() < deadline:
                time.sleep(0.2)


def process_running(pid: int) -> bool:
    """Alive and not a zombie (a process another worker started and has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


@contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: pytest-timeout's clock starts inside
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """An ``alone`` test runs (set-up, call, tear-down) with no other test beside it.

    Every test holds ``run.lock`` shared while it runs, an ``alone`` test holds it exclusive.
    ``gate.lock`` keeps a waiting ``alone`` test from being starved: a test takes it (exclusive,
    briefly) before ``run.lock``; an ``alone`` test keeps it until it has run, so no new test
    starts while it waits for the running one to end. Module-scoped fixtures are set up inside
    the protocol of their first test, so a testbed is never built beside an ``alone`` test."""
    lock_dir = Path(os.environ.get(LOCK_DIR_ENV, tempfile.gettempdir()))
    gate, run = lock_dir / "gate.lock", lock_dir / "run.lock"
    if "alone" in item.keywords:
        with _flock(gate, fcntl.LOCK_EX), _flock(run, fcntl.LOCK_EX):
            return (yield)
    with _flock(gate, fcntl.LOCK_EX):
        pass
    with _flock(run, fcntl.LOCK_SH):
        return (yield)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _check_units(items)
    items.sort(key=_start_order)  # stable: within a module, collection order
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="integration tests need root (network namespaces, sshd)")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


def _start_order(item: pytest.Item) -> tuple[bool, int, float]:
    """The units that run beside the background process first (BESIDE_BACKGROUND), then the
    longest units first (MEASURED_S), then the units that wait for the background process
    (BACKGROUND_UNITS: it has run beside the others meanwhile); ``alone`` tests last, one after
    the other. The scheduler splits the order into its lanes."""
    unit = work_unit(item.nodeid).split("[", 1)[0]
    seconds = MEASURED_S.get(unit, 5.0 if "slow" in item.keywords else 1.0)
    rank = 0 if unit in BESIDE_BACKGROUND else 2 if unit in BACKGROUND_UNITS else 1
    return "alone" in item.keywords, rank, -seconds


def _check_units(items: list[pytest.Item]) -> None:
    """The tests that share one instance of a fixture broader than a function (defined under
    tests/) are one unit of work; else each worker would build it again, and a fixture meant
    to be built once (a 140 s campaign) would be built twice."""
    users: dict[tuple[str, str], set[str]] = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        module = item.nodeid.split("::", 1)[0]
        for name, defs in info.name2fixturedefs.items():
            d = defs[-1]
            if d.scope == "function" or not d.baseid.startswith("tests"):
                continue
            instance = module if d.scope == "module" else item.nodeid.rsplit("::", 1)[0] \
                if d.scope == "class" else d.baseid
            users.setdefault((name, instance), set()).add(item.nodeid)
    for (name, _), nodeids in sorted(users.items()):
        units = {work_unit(n) for n in nodeids}
        if len(nodeids) > 1 and (len(units) > 1 or units <= nodeids):
            msg = (f"{sorted(nodeids)[0]} and {len(nodeids) - 1} other test(s) share the fixture {name!r} "
                   "but not a unit of work: add them to SHARED_MODULES or SHARED_TESTS in tests/conftest.py")
            # each of them fails with this message (a UsageError raised on an xdist worker
            # only crashed it: INTERNALERROR, no message, no test run)
            for item in items:
                if item.nodeid in nodeids:
                    item.add_marker(pytest.mark.unit_error(msg))


def pytest_runtest_setup(item: pytest.Item) -> None:
    mark = item.get_closest_marker("unit_error")
    if mark is not None:
        pytest.fail(str(mark.args[0]), pytrace=False)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - pytest-xdist is a dev dependency
    pass
else:
    class _UnitScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with ``work_unit`` as the scope, in the order of the
        collection (``_start_order``). (xdist's own `xdist_group` marks would do the grouping,
        but `--dist loadgroup` renames nodes through ``item._nodeid``, which pytest 9 no
        longer reads.)"""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            """The first worker takes the next testbed unit, the others the next computing one;
            a worker whose lane is empty takes the other lane's next unit."""
            assert self.workqueue
            first = node is self.nodes[0]
            lanes = [s for s in self.workqueue if (lane(s) == "testbed") == first]
            scope = lanes[0] if lanes else next(iter(self.workqueue))
            work = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(n) for n, done in work.items() if not done])

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":  # an explicit --dist other than the default
            return None
        config.option.loadscopereorder = False  # keep _start_order, not the largest unit first
        return _UnitScheduling(config, log)


@pytest.fixture
def quickstart_text() -> str:
    return QUICKSTART.read_text()


@pytest.fixture(autouse=True)
def _signal_handlers_restored(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test leaves SIGINT and SIGTERM as it found them.

    The interrupt tests (Ctrl-C reaching `pulumi`, the runner's teardown) rely on
    Python's own SIGINT handler; a test that leaves another behind would make them
    fail far from the cause, so it is restored here and the culprit named.
    """
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    if before[signal.SIGINT] == signal.SIG_IGN:
        # started in the background by a non-interactive shell (`cmd &`, nohup): SIGINT is
        # ignored from the start; the tests see Python's own handler, as in a terminal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        before[signal.SIGINT] = signal.default_int_handler
    yield
    for s, handler in before.items():
        if signal.getsignal(s) is not handler:
            signal.signal(s, handler)
            warnings.warn(f"{request.node.nodeid} left a {signal.Signals(s).name} handler behind",
                          stacklevel=1)


@pytest.fixture(autouse=True)
def _secrets_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """State passphrases go to a test's own secrets directory, never the user's ~/.local/state."""
    monkeypatch.setenv("CLOUDBENCH_SECRETS_DIR", str(tmp_path_factory.mktemp("secrets")))
