from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.plan import make_plan
from cloudbench.workloads import parse_spec
from tests.paths import QUICKSTART

MANY = """
name: many
seed: {seed}
repetitions: 3
order: {order}
rest: 1s
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {{hosts: 2}}
workloads:
"""
WORKLOADS = "".join(f"  - {{kind: echo, name: w{i}, duration: 1s}}\n" for i in range(8))


def order(seed: int, mode: str = "random") -> list[list[str]]:
    plan = make_plan(parse_spec(MANY.format(seed=seed, order=mode) + WORKLOADS))
    return [[t.workload for t in plan.of_repetition(r)] for r in range(3)]


def test_same_seed_same_order() -> None:
    assert order(7) == order(7)


def test_seed_changes_the_order_and_repetitions_differ() -> None:
    a, b = order(7), order(8)
    assert a != b
    assert a[0] != a[1] or a[1] != a[2]
    for rep in a:
        assert sorted(rep) == [f"w{i}" for i in range(8)]


def test_fixed_order_keeps_the_spec_order() -> None:
    for rep in order(7, "fixed"):
        assert rep == [f"w{i}" for i in range(8)]


def test_plan_records_seed_trials_and_rests() -> None:
    plan = make_plan(parse_spec(MANY.format(seed=3, order="random") + WORKLOADS))
    d = plan.to_dict()
    assert d["seed"] == 3 and d["rest_s"] == 1.0
    assert len(d["trials"]) == 24
    assert len({t["id"] for t in d["trials"]}) == 24
    # 8 trials per repetition, 7 rests between them
    assert plan.est_seconds == sum(t.est_seconds for t in plan.trials) + 3 * 7 * 1.0


def test_echo_pairs_follow_self_loop() -> None:
    text = QUICKSTART.read_text()
    plan = make_plan(parse_spec(text))
    assert len(plan.trials[0].pairs) == 64
    no_self = text.replace("self_loop: true", "self_loop: false").replace("k: [2, 3]", "k: [2]")
    plan2 = make_plan(parse_spec(no_self))
    assert len(plan2.trials[0].pairs) == 56


def test_plan_cli_provisions_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from cloudbench.providers.netns import NetnsProvider

    def forbidden(*a: object, **k: object) -> None:
        raise AssertionError("plan provisioned something")

    monkeypatch.setattr(NetnsProvider, "provision", forbidden)
    monkeypatch.setattr(NetnsProvider, "__init__", forbidden)
    r = CliRunner().invoke(app, ["plan", str(QUICKSTART)])
    assert r.exit_code == 0, r.output
    assert "subnet s1: s1-1 (local), s1-2 (local), s1-3 (local)" in r.output
    assert "r000-t000-echo" in r.output and "r001-t000-echo" in r.output
