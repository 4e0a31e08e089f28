from __future__ import annotations

import os

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
