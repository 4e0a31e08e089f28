"""What a workload kind provides to the planner, the runner, the store and the report.

A kind is one folder under ``workloads/`` (``params.py`` for its spec model,
``controller.py`` with its :class:`WorkloadKind`, ``reader.py`` for its raw
output, ``summaries.py``, ``report.py``) and one line in the registry
(:mod:`cloudbench.workloads`). Everything the layers above need from a kind goes
through the methods below; the defaults are what a kind without that part does.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Console

from cloudbench.core.blocks import Block, print_blocks
from cloudbench.core.cluster import Cluster
from cloudbench.errors import RemoteFailure
from cloudbench.spec.model import Spec
from cloudbench.spec.workload import WorkloadModel
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow

if TYPE_CHECKING:  # asyncssh costs 0.13 s to import; the report never connects to a host
    from cloudbench.remote import HostResult, Remote

WORKERS_DIR = Path(__file__).resolve().parent.parent / "workers"

DEFAULT_TRIAL_BYTES = 1e6
"""A trial's raw and stored bytes for kinds without an estimate of their own."""

PairSet = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]
"""(hosts involved, pairs measured) of one trial."""


@dataclass(frozen=True)
class Trial:
    """One unit of measurement: a workload on one pair set in one repetition."""

    id: str
    repetition: int
    position: int
    workload: str
    kind: str
    hosts: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...] = ()
    est_seconds: float = 0.0
    sweep: tuple[tuple[str, Any], ...] = ()  # (field, value) of a swept parameter, e.g. payload

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["hosts"] = list(self.hosts)
        d["pairs"] = [list(p) for p in self.pairs]
        d["sweep"] = dict(self.sweep)
        return d


def sweep_product(params: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every combination of the list-valued ``fields`` of ``params`` ([{}] when none is a list)."""
    swept = [(f, getattr(params, f)) for f in fields if isinstance(getattr(params, f), list)]
    names = [f for f, _ in swept]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in swept))]


def trial_params(params: Any, trial: Trial) -> Any:
    """The workload's parameters for one trial: the spec's, with the trial's swept values."""
    return params.model_copy(update=dict(trial.sweep)) if trial.sweep else params


def sweep_label(sweep: Mapping[str, Any]) -> str:
    """``payload=1024,rate=100`` (fields sorted); empty for no sweep."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(sweep.items()))


@dataclass
class TrialContext:
    """Everything a workload needs to run one trial."""

    trial: Trial
    params: Any  # the workload's validated model from the spec
    spec: Spec
    cluster: Cluster
    remote: Remote
    run: RunDir
    token: str  # the campaign's secret; workers accept only peers that present it
    tick: Callable[[str], None] = lambda _msg: None  # progress text while the trial runs


@dataclass
class TrialOutcome:
    """What one trial left: its files with checksums, row count, per-host failures, workers' stats."""

    files: dict[str, str] = field(default_factory=dict)  # relpath in run dir -> sha256
    rows: int = 0
    failures: list[RemoteFailure] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def succeeded(self, results: list[HostResult]) -> list[HostResult]:
        """The hosts of a fan-out that succeeded; the others' failures are recorded here."""
        ok = []
        for r in results:
            if r.failure is None:
                ok.append(r)
            else:
                self.failures.append(r.failure)
        return ok


class WorkloadKind:
    """One workload kind: its spec model, its workers, how it runs, reduces and reports."""

    kind: ClassVar[str]
    params: ClassVar[type[WorkloadModel]]  # the spec model of ``kind: <kind>``
    worker_files: ClassVar[tuple[str, ...]] = ()  # files under workers/ shipped to every host
    report_tables: ClassVar[tuple[str, ...]] = ()  # section keys written as <workload>_<key>.csv
    # which way is better for each summary metric ("lower"/"higher"; fnmatch patterns, first match
    # wins), declared beside the summaries; `cloudbench compare` turns a change into better/worse
    better: ClassVar[Mapping[str, str]] = {}

    def direction(self, metric: str) -> str | None:
        """``"lower"`` or ``"higher"`` when that is better for ``metric``; None when undeclared."""
        return next((d for pat, d in self.better.items() if fnmatch.fnmatchcase(metric, pat)), None)

    def expand(self, params: Any, spec: Spec) -> list[PairSet]:
        """Pair sets of this workload, one trial each (per value of :meth:`sweep`)."""
        raise NotImplementedError

    def sweep(self, params: Any) -> list[dict[str, Any]]:
        """Values of swept parameters, one trial per dict and pair set (``[{}]``: no sweep)."""
        return [{}]

    def estimate_seconds(self, params: Any) -> float:
        """Upper bound of one trial's duration (for the plan and the cost estimate)."""
        raise NotImplementedError

    def estimate_bytes(self, params: Any, trial: Trial) -> Mapping[tuple[str, str], float] | None:
        """Bytes sent from src to dst during ``trial`` (for egress cost); None: no estimate."""
        return None

    def estimate_disk(self, params: Any, trial: Trial) -> tuple[float, float]:
        """(raw, stored) bytes of one trial on the controller's disk: the worker files pulled back
        (held until ingested) and what the run keeps. The default is a coarse bound for kinds whose
        output is small (a few records per second): :data:`DEFAULT_TRIAL_BYTES` each."""
        return DEFAULT_TRIAL_BYTES, DEFAULT_TRIAL_BYTES

    async def run(self, ctx: TrialContext) -> TrialOutcome:
        """Run one trial on the cluster and write its observations into the run directory."""
        raise NotImplementedError

    def ingest(self, run: RunDir, spec: Spec, trial: Trial, raw: Mapping[str, str],
               stats: dict[str, Any]) -> TrialOutcome:
        """Turn a trial's raw files kept after a full disk (``raw``: path in the run directory ->
        sha256, checked by the caller) into its observation files, without hosts. Kinds that keep no
        raw files across a failed ingest never get here (their trial is run again)."""
        raise NotImplementedError(f"{self.kind} keeps no raw files to ingest later")

    def summarize(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> list[SummaryRow]:
        """One value per (repetition, metric, group) of one workload (``params``: its spec entry)."""
        return []

    def report_section(self, run: RunDir, manifest: Manifest, params: dict[str, Any]) -> dict[str, Any]:
        """The workload's part of ``report.json`` (plain JSON values; lists of rows are tables)."""
        return {"kind": self.kind}

    def section_views(self, name: str, section: dict[str, Any], options: Mapping[str, bool]) -> list[Block]:
        """The section's tables and lines for a person (``options``: e.g. ``windows``, ``pairs``):
        what the terminal prints and the HTML page shows, from report.json's section alone."""
        return []

    def render_section(self, name: str, section: dict[str, Any], console: Console,
                       options: Mapping[str, bool]) -> None:
        """Print the section for a person (:meth:`section_views`)."""
        print_blocks(self.section_views(name, section, options), console)

    def write_figures(self, run: RunDir, name: str, section: dict[str, Any], out: Path) -> list[Path]:
        """Files beside report.json other than the CSV tables (figures); the paths written."""
        return []


@contextlib.asynccontextmanager
async def ticking(ctx: TrialContext, label: str, expected_s: float) -> AsyncIterator[None]:
    """Report ``label elapsed/expected s`` to the progress display twice a second."""
    import asyncio  # noqa: PLC0415 - 39 ms, which a report's start does without

    async def tick() -> None:
        t0 = time.monotonic()
        while True:
            await asyncio.sleep(0.5)
            ctx.tick(f"{label}{time.monotonic() - t0:.0f}/{expected_s:.0f}s")

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
