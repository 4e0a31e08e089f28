"""`campaign start` leaves time to launch `campaign run` and prints the first slot on stdout."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app

SPEC = """\
name: lead
providers:
  netns:
    regions: {{r1: {{zones: {{r1-a: {{subnets: {{s1: {{hosts: 2}}}}}}}}}}}}
workloads:
  - {{kind: echo, name: echo, rate: 20, duration: 1s}}
schedule: {{every: 6s, count: 3, {extra}}}
"""


def _first_slot_in(tmp_path: Path, extra: str, *args: str) -> tuple[float, str]:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.format(extra=extra))
    d = tmp_path / "c"
    before = datetime.now(UTC)
    r = CliRunner().invoke(app, ["campaign", "start", str(spec), "--dir", str(d), *args])
    assert r.exit_code == 0, r.output
    st = json.loads(CliRunner().invoke(app, ["campaign", "status", str(d), "--json"]).stdout)
    first = datetime.fromisoformat(st["next"]["planned_utc"].replace("Z", "+00:00"))
    return (first - before).total_seconds(), r.stdout


@pytest.mark.parametrize(("extra", "args", "lead"), [
    ("slip: 3s", (), 30.0),               # the default start: 30 s to launch `campaign run`
    ("slip: 3s", ("--start", "now"), 0.0),  # asked for now
    ("slip: 3s, start: now", (), 0.0),    # the spec asks for now
    ("slip: 1h", (), 0.0),                # a slip of an hour leaves the time already
])
def test_the_default_start_leaves_time_to_launch_the_runner(tmp_path: Path, extra: str, args: tuple[str, ...],
                                                            lead: float) -> None:
    away, stdout = _first_slot_in(tmp_path, extra, *args)
    assert lead - 1.0 <= away <= lead + 10.0, (away, stdout)  # the command's own run time is the slack


def test_the_first_slot_and_the_directory_are_on_stdout(tmp_path: Path) -> None:
    _, stdout = _first_slot_in(tmp_path, "slip: 3s")
    text = " ".join(stdout.split())
    assert re.search(r"3 slots, 3 trials; first at \S+Z; run `cloudbench campaign run \S+` before then", text), text
    assert stdout.strip().splitlines()[-1] == str(tmp_path / "c")  # the directory last, for scripts
