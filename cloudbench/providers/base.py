"""The provider protocol: ``provision(topology) -> Cluster`` and ``destroy(cluster)``.

A Cluster is all the controller needs to reach and label every host; it is the
same whatever built it (testbed namespaces, cloud VMs, or existing hosts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import Topology


@runtime_checkable
class Provider(Protocol):
    """What every backend implements; all pass ``tests/providers/test_contract.py``."""

    name: str

    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        """Create fresh hosts for ``topology``; on failure, leave nothing behind."""
        ...

    def destroy(self, cluster: Cluster) -> None:
        """Remove everything ``provision`` made; safe to call twice."""
        ...

    def gc(self, dry_run: bool = False) -> list[str]:
        """Remove leftovers of runs that died; returns what was (or would be) removed."""
        ...


