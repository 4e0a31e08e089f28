"""What a workload kind provides to the planner, the runner and the analysis."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cloudbench.errors import RemoteFailure

if TYPE_CHECKING:
    from cloudbench.plan import Trial
    from cloudbench.providers.base import Cluster
    from cloudbench.remote import HostResult, Remote
    from cloudbench.results import RunDir
    from cloudbench.spec import Spec

WORKERS_DIR = Path(__file__).resolve().parent.parent / "workers"


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


class WorkloadKind(Protocol):
    kind: str
    worker_files: tuple[str, ...]

    def expand(
        self, params: Any, spec: Spec
    ) -> list[tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
        """Pair sets of this workload: (hosts involved, pairs measured)."""
        ...

    def estimate_seconds(self, params: Any) -> float: ...

    async def run(self, ctx: TrialContext) -> TrialOutcome: ...

    def summarize(self, run: RunDir, manifest: dict[str, Any]) -> list[dict[str, Any]]:
        """Rows for ``summaries.parquet``: one value per (repetition, metric, group)."""
        ...


@contextlib.asynccontextmanager
async def ticking(ctx: TrialContext, label: str, expected_s: float) -> AsyncIterator[None]:
    """Report ``label elapsed/expected s`` to the progress display twice a second."""

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

