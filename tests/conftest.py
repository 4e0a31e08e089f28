from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Iterator

import pytest

from tests.paths import QUICKSTART


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="integration tests need root (network namespaces, sshd)")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


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
