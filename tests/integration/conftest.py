from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.core.netns import list_netns
from cloudbench.core.processes import pid_alive
from cloudbench.core.topology import Topology
from cloudbench.providers.netns import NetnsProvider
from cloudbench.workloads import load_spec

from ..conftest import BACKGROUND_UNITS, BESIDE_BACKGROUND, LOCK_DIR_ENV, QUICKSTART, work_unit
from .compressed_days import (
    CompressedDays,
    run_compressed_days,
    start_in_background,
    wait_in_background,
    wait_until_ended,
)


def ours(sid: str) -> list[str]:
    return [n for n in list_netns() if n.startswith(f"cb{sid}-")]


def sshd_pids(cluster: Cluster) -> list[int]:
    state = Path(cluster.facts["state_file"])
    import json

    return [int(p["pid"]) for p in json.loads(state.read_text())["pids"]]


def assert_gone(sid: str, pids: list[int]) -> None:
    assert ours(sid) == [], f"namespaces left: {ours(sid)}"
    alive = [p for p in pids if pid_alive(p) and not _zombie(p)]
    assert alive == [], f"processes left: {alive}"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def provider() -> NetnsProvider:
    return NetnsProvider()


@contextmanager
def provisioned(topology: Topology, where: Path, provider: NetnsProvider | None = None) -> Iterator[Cluster]:
    """A provisioned testbed, destroyed on the way out; its namespaces and sshds must be gone."""
    provider = provider or NetnsProvider()
    cluster = provider.provision(topology, where)
    pids = sshd_pids(cluster)
    try:
        yield cluster
    finally:
        provider.destroy(cluster)
        assert_gone(cluster.stack, pids)


def wait_listening(ns: str, port: int, seconds: float = 5) -> None:
    """Until a TCP socket listens on ``port`` in namespace ``ns``."""
    deadline = time.monotonic() + seconds
    while f":{port} " not in in_ns(ns, "ss", "-ltn").stdout:
        assert time.monotonic() < deadline, f"nothing listens on port {port} in {ns}"
        time.sleep(0.02)


@pytest.fixture
def quickstart_cluster(provider: NetnsProvider, tmp_path: Path) -> Iterator[Cluster]:
    with provisioned(load_spec(QUICKSTART).topology(), tmp_path, provider) as cluster:
        yield cluster


def in_ns(ns: str, *cmd: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], capture_output=True, text=True,
                          timeout=timeout, check=False)


def _background_dir() -> Path | None:
    """Where the compressed-day campaigns run in the background: in the session's lock directory
    (tests/conftest.py), which every worker shares and the controller removes at the end."""
    lock_dir = os.environ.get(LOCK_DIR_ENV)
    return Path(lock_dir) / "compressed-days" if lock_dir else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """The first worker to collect a test that reads the compressed-day campaigns starts them in
    the background (tests/integration/compressed_days.py): they wait on 20 slots for two minutes,
    and the worker runs its other tests meanwhile instead of waiting with them."""
    where = _background_dir()
    if where is None or os.geteuid() != 0 or session.config.option.collectonly:
        return
    if not any("compressed_days" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    try:
        where.mkdir()  # atomic: the one worker that creates it starts them
    except FileExistsError:
        return
    start_in_background(where)


@pytest.fixture(autouse=True)
def _not_beside_the_background(request: pytest.FixtureRequest) -> None:
    """A testbed test other than those that assert no rate or time (BESIDE_BACKGROUND) waits for the
    background campaigns to end before it runs. The order alone does not ensure it: the units beside
    the campaigns can end first (a fresh-clone run of c9dd886 failed the WAN step and the events
    tests, whether beside the campaigns is not known; both assert times that the cores' load moves)."""
    where = _background_dir()
    if where is None or not where.exists():
        return
    unit = work_unit(request.node.nodeid).split("[", 1)[0]  # as the scheduler's order takes it
    if unit not in BESIDE_BACKGROUND and unit not in BACKGROUND_UNITS:
        wait_until_ended(where)


@pytest.fixture(scope="session")
def compressed_days(tmp_path_factory: pytest.TempPathFactory) -> CompressedDays:
    """Three compressed-day campaigns (sine, step, flat) run once, at once, for the tests that read them:
    started at collection and waited for here, or (no session lock directory) run here."""
    where = _background_dir()
    if where is not None and where.exists():
        return wait_in_background(where)
    return run_compressed_days(tmp_path_factory.mktemp("compressed-days"))
