"""The CLI's messages in a terminal of 80 columns wrap at spaces (warnings hang under their text)
and stay one line each when piped: ``cloudbench validate`` of the quickstart, whose warning and
``ok:`` line are each longer than 80 columns (a terminal folded them mid-word)."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "FORCE_TERMINAL")}
    return {**env, "COLUMNS": "80", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}


def _in_a_terminal(args: list[str]) -> list[str]:
    """stdout and stderr of ``cloudbench args`` run in a pseudo-terminal, escapes stripped."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cloudbench", *args], stdout=follower, stderr=follower,
                            stdin=subprocess.DEVNULL, env=_env(), cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r", "").splitlines()


def test_validate_wraps_in_a_terminal_and_not_when_piped() -> None:
    piped = subprocess.run([sys.executable, "-m", "cloudbench", "validate", str(QUICKSTART)], capture_output=True,
                           text=True, env=_env(), cwd=ROOT, check=True)
    messages = [*piped.stderr.splitlines(), *piped.stdout.splitlines()]
    assert len(messages) == 2 and all(len(m) > 80 for m in messages), messages  # one line each, whole
    lines = _in_a_terminal(["validate", str(QUICKSTART)])
    assert max(len(line) for line in lines) <= 80, lines
    assert [w for line in lines for w in line.split()] == [w for m in messages for w in m.split()]
    assert len(lines) > 2 and all(line.startswith("  ") for line in lines if not line.startswith(("repetitions",
                                                                                                   "ok:")))


def test_campaign_log_lines_hang_under_their_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """`campaign run`'s log lines (a UTC stamp, then the message) ran past 80 columns in a terminal."""
    from cloudbench.cli import campaign

    msg = ("campaign diurnal-testbed: /tmp/nu-s5/results/diurnal-testbed (pid 8411) slot 0: run "
           "20261126T115909Z-b921 (started 0.2s after its planned time)")
    for terminal in (True, False):
        buf = io.StringIO()
        monkeypatch.setattr(campaign, "err", Console(file=buf, width=80, force_terminal=terminal, color_system=None))
        campaign._log(msg)
        lines = buf.getvalue().splitlines()
        stamp = lines[0].split()[0]
        if terminal:
            assert len(lines) == 3 and all(len(line) <= 80 for line in lines), lines
            assert all(line.startswith(" " * (len(stamp) + 1)) and line[len(stamp) + 1] != " " for line in lines[1:])
        else:
            assert lines == [f"{stamp} {msg}"]
