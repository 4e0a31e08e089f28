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
