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
from cloudbench.engine import Engine
from cloudbench.spec.vmtypes import VmTypeModel
from cloudbench.store.manifest import Manifest
from cloudbench.store.parquet import check_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files

FloatArray = NDArray[np.float64]
MBIT = 1e6


@dataclass
class Transfer:
    """A transfer: one direction of one trial, its report intervals in time order (not a
    *series*, which is one metric over repetitions: ARCHITECTURE.md, Vocabulary)."""

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


def load_transfers(run: RunDir, workload: str, engine: Engine | None = None) -> list[Transfer]:
    """Every direction of every trial of ``workload`` in ``run``, read through the query engine.

    One DuckDB query sorts the intervals by (trial, direction, burst, start) and hands
    them over as numpy columns, split into series at the key changes: no per-row
    Python objects, so weeks of per-second intervals stay arrays.
    """
    files = list(iter_observation_files(run, workload))
    if not files:
        return []
    for path in files:  # versions and kinds, from the footers
        check_parquet(path, kind="throughput")
    own = engine is None
    eng = engine or Engine()
    try:
        rel = eng.parquet(files, ["trial", "direction", "repetition", "src", "dst", "tool", "protocol", "side",
                                  "burst", "t_start_us", "t_end_us", "bytes", "retrans", "lost", "packets"])
        cols = rel.order("trial, direction, burst, t_start_us").fetchnumpy()
    finally:
        if own:
            eng.close()
    n = len(cols["trial"])
    if not n:
        return []
    trial = np.asarray(cols["trial"]).astype(str)
    direction = np.asarray(cols["direction"]).astype(str)
    change = np.flatnonzero((trial[1:] != trial[:-1]) | (direction[1:] != direction[:-1])) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [n]])

    def num(name: str) -> FloatArray:
        col = cols[name]
        if isinstance(col, np.ma.MaskedArray):
            filled: FloatArray = np.ma.filled(col.astype(np.float64), math.nan)
            return filled
        return np.asarray(col, dtype=np.float64)

    t_start, t_end, nbytes = num("t_start_us") / 1e6, num("t_end_us") / 1e6, num("bytes")
    retrans, lost, packets = num("retrans"), num("lost"), num("packets")
    burst = np.asarray(cols["burst"], dtype=np.int64)
    out: list[Transfer] = []
    for a, b in zip(starts, ends, strict=True):
        out.append(Transfer(
            repetition=int(cols["repetition"][a]), trial=str(trial[a]), src=str(cols["src"][a]),
            dst=str(cols["dst"][a]), direction=str(direction[a]), tool=str(cols["tool"][a]),
            protocol=str(cols["protocol"][a]), side=str(cols["side"][a]), burst=burst[a:b],
            t_start=t_start[a:b], t_end=t_end[a:b], nbytes=nbytes[a:b], retrans=retrans[a:b],
            lost=lost[a:b], packets=packets[a:b],
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
    """Bits per second as Mbit/s (NaN for None)."""
    return math.nan if v is None else v / MBIT


def mean_rate(s: Transfer) -> float:
    """The mean rate of a series in bit/s: all its bytes over all its time."""
    secs = float(np.sum(s.t_end - s.t_start))
    return float(np.sum(s.nbytes) * 8 / secs) if secs > 0 else math.nan


def interval_rates(s: Transfer) -> FloatArray:
    """The rates of a series' full intervals in bit/s."""
    secs = s.t_end - s.t_start
    return rates_of(s.nbytes, secs)[full_mask(secs)]


def trend_warnings(series: list[Transfer], facts: RunFacts, workload: str) -> list[str]:
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
