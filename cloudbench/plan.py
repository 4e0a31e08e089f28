"""Expand a spec into trials: repetition × workload × pair set, in seeded order.

A workload whose kind sweeps a parameter (echo's ``payload: [64, 1024]``) gives
one trial per value and pair set, shuffled with the others.

Within each repetition the trials are shuffled with a generator seeded by
``(spec.seed, repetition)`` — the same seed always gives the same order, and the
seed is recorded in the manifest — so that slow drifts of the platform are not
confounded with the order of the workloads (Uta et al., §5).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from cloudbench.analysis.stats import min_n_for_ci
from cloudbench.spec.model import Spec
from cloudbench.workloads import workload_kind
from cloudbench.workloads.base import Trial, trial_params


@dataclass
class Plan:
    """The ordered trials of a campaign and the settings that ordered them."""

    seed: int
    order: str
    rest: float
    fresh_hosts: str
    repetitions: int
    trials: list[Trial] = field(default_factory=list)

    def of_repetition(self, rep: int) -> list[Trial]:
        return [t for t in self.trials if t.repetition == rep]

    @property
    def est_seconds(self) -> float:
        per_rep_rests = [max(len(self.of_repetition(r)) - 1, 0) for r in range(self.repetitions)]
        return sum(t.est_seconds for t in self.trials) + self.rest * sum(per_rep_rests)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "order": self.order,
            "rest_s": self.rest,
            "fresh_hosts": self.fresh_hosts,
            "repetitions": self.repetitions,
            "trials": [t.to_dict() for t in self.trials],
        }


def order_rng(seed: int, repetition: int) -> random.Random:
    """The random generator that orders the trials of one repetition (stable across processes)."""
    # String seeding is stable across Python versions and processes (no hash salt).
    return random.Random(f"cloudbench:{seed}:{repetition}")


def make_plan(spec: Spec) -> Plan:
    """Every trial of ``spec``: repetition × workload × pair set, shuffled per repetition by seed."""
    plan = Plan(spec.seed, spec.order, spec.rest, spec.fresh_hosts, spec.repetitions)
    for rep in range(spec.repetitions):
        units: list[tuple[str, str, tuple[str, ...], tuple[tuple[str, str], ...], float,
                          tuple[tuple[str, Any], ...]]] = []
        for w in spec.workloads:
            kind = workload_kind(w.kind)
            for hosts, pairs in kind.expand(w, spec):
                for values in kind.sweep(w):
                    sweep = tuple(sorted(values.items()))
                    est = kind.estimate_seconds(trial_params(w, Trial("", rep, 0, w.name, w.kind, hosts,
                                                                       pairs, 0.0, sweep)))
                    units.append((w.name, w.kind, hosts, pairs, est, sweep))
        if spec.order == "random":
            order_rng(spec.seed, rep).shuffle(units)
        for pos, (name, kind_name, hosts, pairs, est, sweep) in enumerate(units):
            plan.trials.append(
                Trial(f"r{rep:03d}-t{pos:03d}-{name}", rep, pos, name, kind_name, hosts, pairs, est, sweep)
            )
    return plan


def repetitions_warning(repetitions: int, slots: int = 1, level: float = 0.95) -> str | None:
    """A warning when the repetitions a campaign pools (``repetitions`` per run, times its
    ``slots``) are too few for an exact CI of the median at ``level`` (6 at 95 %), or None."""
    pooled = repetitions * max(1, slots)
    need = min_n_for_ci(0.5, level)
    if pooled >= need:
        return None
    where = f"{repetitions} repetition(s) × {slots} slots" if slots > 1 else f"repetitions: {repetitions}"
    return (f"{where} give {pooled} value(s) per series: `cloudbench confirm` needs {need} for an exact "
            f"{level * 100:g} % CI of the median ({min_n_for_ci(0.9, level)} for p90); "
            f"{need - pooled} more repetition(s) for one")
