"""The echo spec's connection modes and sweeps: parsing, checks with lines, the plan's trials, the cost."""

from __future__ import annotations

import pytest

from cloudbench.cost import trial_bytes
from cloudbench.errors import SpecError
from cloudbench.plan import make_plan, order_rng
from cloudbench.workloads import json_schema as spec_schema
from cloudbench.workloads import parse_spec
from cloudbench.workloads.base import trial_params
from cloudbench.workloads.echo.controller import EchoKind

HEAD = """name: sweep
seed: {seed}
repetitions: 2
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


def spec(workload: str, seed: int = 5) -> str:
    return HEAD.format(seed=seed) + workload


def errors_of(text: str) -> list[SpecError]:
    with pytest.raises(SpecError) as info:
        parse_spec(text, path="s.yaml")
    return list(getattr(info.value, "errors", [info.value]))


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_payload_sweep_is_one_trial_per_value_in_the_seeded_random_order() -> None:
    text = spec(
        "  - {kind: echo, name: e, duration: 1s, payload: [64, 1KiB, 16384, 64KiB]}\n"
        "  - {kind: echo, name: f, duration: 1s}\n"
    )
    s = parse_spec(text)
    plan = make_plan(s)
    for rep in range(2):
        trials = plan.of_repetition(rep)
        assert len(trials) == 5
        swept = [dict(t.sweep) for t in trials if t.workload == "e"]
        assert sorted(d["payload"] for d in swept) == [64, 1024, 16384, 65536]
        # the order is the seeded shuffle of the units in spec order (values, then the next workload)
        units = [("e", 64), ("e", 1024), ("e", 16384), ("e", 65536), ("f", None)]
        order_rng(5, rep).shuffle(units)
        assert [(t.workload, dict(t.sweep).get("payload")) for t in trials] == units
        assert [t.to_dict()["sweep"] for t in trials if t.workload == "f"] == [{}]
    assert make_plan(parse_spec(text)).to_dict() == plan.to_dict()  # same seed, same plan
    other = make_plan(parse_spec(spec(text.split("workloads:\n")[1], seed=6)))
    assert [t.id for t in other.trials] != [t.id for t in plan.trials] or [t.sweep for t in other.trials] != [
        t.sweep for t in plan.trials
    ]


def test_each_trial_runs_and_is_costed_with_its_own_value() -> None:
    s = parse_spec(spec("  - {kind: echo, name: e, duration: 10s, warmup: 0s, rate: [10, 100], payload: [64, 1024]}\n"))
    trials = make_plan(s).of_repetition(0)
    assert sorted(dict(t.sweep)["rate"] * dict(t.sweep)["payload"] for t in trials) == [640, 6400, 10240, 102400]
    for t in trials:
        p = trial_params(s.workload("e"), t)
        assert (p.one_rate(), p.one_payload()) == (dict(t.sweep)["rate"], dict(t.sweep)["payload"])
        sent = trial_bytes(s, t)
        # each host sends to the other, and echoes what the other sent
        assert sent is not None and sent[("s1-1", "s1-2")] == pytest.approx(2 * p.one_rate() * p.one_payload() * 10)
    assert EchoKind().sweep(s.workload("e")) == [
        {"payload": 64, "rate": 10.0},
        {"payload": 64, "rate": 100.0},
        {"payload": 1024, "rate": 10.0},
        {"payload": 1024, "rate": 100.0},
    ]


def test_connection_modes_parse() -> None:
    s = parse_spec(
        spec(
            "  - {kind: echo, name: hot, rate: 100}\n"
            "  - {kind: echo, name: warm, idle: 10s}\n"
            "  - {kind: echo, name: cold, connection: per_round, rate: 5, timeout: 100ms}\n"
        )
    )
    hot, warm, cold = (s.workload(n) for n in ("hot", "warm", "cold"))
    assert (hot.connection, hot.idle, hot.one_rate()) == ("persistent", None, 100.0)
    assert (warm.connection, warm.idle, warm.one_rate()) == ("persistent", 10.0, 0.1)
    assert (cold.connection, cold.one_rate()) == ("per_round", 5.0)
    props = spec_schema()["$defs"]["EchoWorkload"]["properties"]
    assert props["connection"]["enum"] == ["persistent", "per_round"]
    assert {"type": "array"}.items() <= props["payload"]["oneOf"][1].items()


@pytest.mark.parametrize(
    ("workload", "needle", "field", "message"),
    [
        ("{kind: echo, name: e, payload: [64, 1024, 64]}", "payload", "payload", "lists 64 more than once"),
        ("{kind: echo, name: e, payload: [64, 1MiB]}", "payload", "payload[1]", "less than or equal to 65536"),
        ("{kind: echo, name: e, rate: 0}", "rate", "rate", "greater than 0"),
        ("{kind: echo, name: e, payload: []}", "payload", "payload", "lists no value"),
        ("{kind: echo, name: e, connection: per_round, idle: 5s}", "idle", "idle", "with `connection: per_round` use"),
        ("{kind: echo, name: e, rate: 5, idle: 5s}", "idle", "idle", "`idle` replaces `rate`"),
    ("{kind: echo, name: e, idle: 30s, duration: 20s}", "idle", "idle", "longer than `duration` 20 s"),
        (
            "{kind: echo, name: e, connection: per_round, rate: 100}",
            "per_round",
            "timeout",
            "timeout 1 s is longer than 1/rate = 0.01 s",
        ),
        ("{kind: echo, name: e, connection: sometimes}", "sometimes", "connection", "'persistent' or 'per_round'"),
    ],
)
def test_bad_modes_and_sweeps_name_line_and_field(workload: str, needle: str, field: str, message: str) -> None:
    text = spec(f"  - {workload}\n")
    errs = errors_of(text)
    assert len(errs) == 1, errs
    e = errs[0]
    assert e.field == f"workloads[0].{field}" and message in e.message, e
    assert e.line == line_of(text, needle) and e.path == "s.yaml"


def test_the_default_window_gives_a_trial_ten_windows_at_most_30_s() -> None:
    """The quickstart's 20 s trials had one 30 s window (its time figure one point
    per repetition); the default is now duration / 10, at most 30 s; a set window stays."""
    from cloudbench.workloads.echo.params import window_of

    one = spec("  - {kind: echo, duration: 20s}\n")
    (w,) = parse_spec(one, path="s.yaml").model_dump(mode="json")["workloads"]
    assert w["window"] is None and window_of(w) == 2.0
    assert window_of({"duration": 3600.0, "window": None}) == 30.0
    assert window_of({"duration": 3600.0, "window": 5.0}) == 5.0
    assert window_of({"duration": 20.0, "window": 30.0}) == 30.0  # an old manifest's explicit 30 s
