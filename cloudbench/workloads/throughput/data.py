"""A run's throughput observations as per-direction series, and the facts of its hosts."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from cloudbench.analysis.throughput import (
    falling_trend,
    full_mask,
    rates_of,
)
from cloudbench.core.topology import HostSpec, classify_pair
from cloudbench.spec.vmtypes import VmTypeModel
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files

FloatArray = NDArray[np.float64]
MBIT = 1e6


@dataclass
class Series:
    """One direction of one trial: its report intervals in time order."""

    repetition: int
    trial: str
    src: str  # data sender
    dst: str
    direction: str
    tool: str
    protocol: str
    side: str
    burst: NDArray[np.int64]
    t_start: FloatArray  # s on the worker's clock
    t_end: FloatArray
    nbytes: FloatArray
    retrans: FloatArray  # nan where unknown
    lost: FloatArray
    packets: FloatArray

    def part(self, burst: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        m = self.burst == burst
        return self.t_start[m], self.t_end[m], self.nbytes[m]

    @property
    def bursts(self) -> list[int]:
        return sorted({int(b) for b in self.burst})


def _num(col: list[Any]) -> FloatArray:
    return np.array([math.nan if v is None else float(v) for v in col], dtype=np.float64)


def load_series(run: RunDir, workload: str) -> list[Series]:
    out: list[Series] = []
    for path in iter_observation_files(run, workload):
        t = read_parquet(path, kind="throughput")
        d = {name: t.column(name).to_pylist() for name in t.column_names}
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, key in enumerate(zip(d["trial"], d["direction"], strict=True)):
            groups[key].append(i)
        for (trial, direction), idx in groups.items():
            order = sorted(idx, key=lambda i: (d["burst"][i], d["t_start_us"][i]))
            c = {name: [d[name][i] for i in order] for name in d}
            out.append(Series(
                repetition=int(c["repetition"][0]), trial=str(trial), src=str(c["src"][0]),
                dst=str(c["dst"][0]), direction=str(direction), tool=str(c["tool"][0]),
                protocol=str(c["protocol"][0]), side=str(c["side"][0]),
                burst=np.array(c["burst"], dtype=np.int64),
                t_start=_num(c["t_start_us"]) / 1e6, t_end=_num(c["t_end_us"]) / 1e6,
                nbytes=_num(c["bytes"]), retrans=_num(c["retrans"]), lost=_num(c["lost"]),
                packets=_num(c["packets"]),
            ))
    return out


class RunFacts:
    """Labels, shaping and timing of a run's hosts and trials, from the manifest."""

    def __init__(self, manifest: Manifest) -> None:
        self.hosts: dict[tuple[int, str], HostSpec] = {}
        self.shaping: dict[tuple[int, str], dict[str, Any] | None] = {}
        self.stack: dict[int, str] = {}
        for rep in manifest.repetitions:
            self.stack[rep.index] = rep.stack
            for h in rep.hosts:
                lab = h.labels
                key = (rep.index, h.name)
                self.hosts[key] = HostSpec(h.name, lab["provider"], lab["region"], lab["zone"],
                                           lab["subnet"], lab["vm_type"])
                self.shaping[key] = h.facts.get("shaping")
        self.trial_start = {t.id: t.started_utc or "" for t in manifest.trials}

    def group(self, rep: int, src: str, dst: str) -> str:
        a, b = self.hosts.get((rep, src)), self.hosts.get((rep, dst))
        return classify_pair(a, b).value if a and b else "?"

    def vm_type(self, rep: int, host: str) -> str:
        h = self.hosts.get((rep, host))
        return h.vm_type if h else "?"

    def profile(self, rep: int, host: str) -> VmTypeModel | None:
        fact = self.shaping.get((rep, host))
        if not fact or not fact.get("profile"):
            return None
        return VmTypeModel.model_validate(fact["profile"])


def mbit(v: float | None) -> float:
    return math.nan if v is None else v / MBIT


def mean_rate(s: Series) -> float:
    secs = float(np.sum(s.t_end - s.t_start))
    return float(np.sum(s.nbytes) * 8 / secs) if secs > 0 else math.nan


def interval_rates(s: Series) -> FloatArray:
    secs = s.t_end - s.t_start
    return rates_of(s.nbytes, secs)[full_mask(secs)]


def trend_warnings(series: list[Series], facts: RunFacts, workload: str) -> list[str]:
    """A falling trend over successive trials that reuse the same sender (same hosts)."""
    seqs: dict[tuple[str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for s in series:
        key = (facts.stack.get(s.repetition, ""), s.src, s.direction)
        seqs[key].append((facts.trial_start.get(s.trial, s.trial), mean_rate(s)))
    out: list[str] = []
    for (_stack, src, direction), items in sorted(seqs.items()):
        values = [v for _, v in sorted(items)]
        tr = falling_trend(values)
        if tr is not None and tr.falling:
            out.append(
                f"{workload}: throughput sent by {src} ({direction}) falls over {tr.n} successive "
                f"trials on the same hosts ({tr.relative_drop:+.0%}, Kendall tau {tr.tau:+.2f}, "
                f"p={tr.p:.3g}): a token bucket that is not refilled between trials? (Uta et al. "
                "§4.2) Use fresh hosts per repetition or rest longer between trials")
    return out
