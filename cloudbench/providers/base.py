"""The provider protocol: ``provision(topology) -> Cluster`` and ``destroy(cluster)``.

A Cluster is all the controller needs to reach and label every host; it is the
same whatever built it (testbed namespaces, cloud VMs, or existing hosts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import Topology

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Finding:
    """One check of a preflight or of ``cloudbench doctor``: ``ok``, ``warn`` (a run may still
    work) or ``fail`` (a run would stop), what was seen, and what to do about it."""

    check: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    @property
    def blocks(self) -> bool:
        """Would this stop a run?"""
        return self.status == FAIL

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.check}: {self.detail}" + (f" — {self.fix}" if self.fix else "")


@runtime_checkable
class Provider(Protocol):
    """What every provider implements; all pass ``tests/providers/test_contract.py``."""

    name: str

    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        """Create fresh hosts for ``topology``; on failure, leave nothing behind."""
        ...

    def preflight(self, topology: Topology) -> list[Finding]:
        """Read-only checks of what ``provision`` would be refused (credentials, offers, quotas),
        before anything exists; ``[]`` where nothing can be refused (testbed, static hosts)."""
        ...

    def destroy(self, cluster: Cluster) -> None:
        """Remove everything ``provision`` made; safe to call twice."""
        ...

    def gc(self, dry_run: bool = False) -> list[str]:
        """Remove leftovers of runs that died; returns what was (or would be) removed."""
        ...


