"""``cloudbench.open``: a workload chosen by its kind, and runs still running skipped with a warning."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

import cloudbench
from cloudbench.errors import ResultError
from cloudbench.testing.fake_results import write_echo_run


@pytest.fixture(scope="module")
def hot_cold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs with echo workloads named hot (2 repetitions) and cold (1), as warm-vs-cold names them."""
    root = tmp_path_factory.mktemp("results") / "warm-vs-cold"
    write_echo_run(root, seed=1, repetitions=2, rounds=300, workload="hot")
    write_echo_run(root, seed=2, repetitions=1, rounds=300, workload="cold")
    return root


def test_observations_of_a_kind_are_all_its_workloads_with_a_workload_column(hot_cold: Path) -> None:
    with cloudbench.open(hot_cold) as camp:
        assert camp.kinds() == {"echo": ["hot", "cold"]}
        both = camp.observations("echo")  # failed before: "no observations of workload 'echo'"
        assert "workload" in both.columns
        per = dict(both.aggregate("workload, count(*) AS n", "workload").fetchall())
        hot, cold = camp.observations("hot"), camp.observations("cold")
        assert "workload" not in hot.columns
        assert per == {"hot": len(hot), "cold": len(cold)}
        assert len(both.filter('"group" IS NULL')) == 0
        with pytest.raises(ResultError, match=r"kinds: echo \(hot, cold\)"):
            camp.observations("throughput")


def test_tables_by_kind_and_by_name(hot_cold: Path) -> None:
    with cloudbench.open(hot_cold) as camp:
        newest = camp.runs[-1].run_id
        groups = camp.table("echo", "groups")  # the newest run measured cold only
        assert groups.equals(camp.table("cold", "groups"))
        with pytest.raises(ResultError, match=f"run {newest} has no workload 'hot'"):
            camp.tables("hot")


def _set_status(run: Path, status: str) -> None:
    path = run / "manifest.json"
    doc = json.loads(path.read_text())
    doc["status"] = status
    path.write_text(json.dumps(doc))


def test_a_running_run_is_skipped_with_a_warning_or_read_on_request(tmp_path: Path) -> None:
    root = tmp_path / "c"
    old = write_echo_run(root, seed=1, repetitions=1, rounds=300)
    new = write_echo_run(root, seed=2, repetitions=1, rounds=200)
    _set_status(new.path, "running")
    with cloudbench.open(root) as camp:
        with pytest.warns(cloudbench.RunningRunWarning, match=f"run {new.path.name} is still running"):
            groups = camp.table("echo", "groups")
        assert groups.equals(camp.table("echo", "groups", run_id=old.path.name))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            running = camp.table("echo", "groups", include_running=True)
        assert running.equals(camp.table("echo", "groups", run_id=new.path.name))
        assert not running.equals(groups)
    _set_status(old.path, "running")
    with cloudbench.open(root) as camp, pytest.warns(cloudbench.RunningRunWarning, match="every run"):
        assert camp.table("echo", "groups").equals(running)
