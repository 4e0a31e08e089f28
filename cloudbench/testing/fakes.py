"""A fake provider for fast, root-free tests of everything above the provider.

Its hosts are not reachable (their SSH address is a loopback port nothing listens
on), so a runner using it fails at deployment — which is what the tests of the
runner's failure paths want: teardown, manifest status, nothing half-created.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError
from cloudbench.providers.base import Finding


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FakeProvider:
    """Records provision/destroy calls; can be told to fail provisioning."""

    fail_provision: bool = False
    name: str = "fake"
    provisioned: list[str] = field(default_factory=list)
    destroyed: list[str] = field(default_factory=list)
    refuse: list[Finding] = field(default_factory=list)  # what preflight reports
    _live: set[str] = field(default_factory=set)

    @property
    def live(self) -> set[str]:
        return set(self._live)

    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        stack = f"fake{len(self.provisioned)}"
        self.provisioned.append(stack)
        if self.fail_provision:
            raise ProvisionError(self.name, stack, "told to fail")
        workdir.mkdir(parents=True, exist_ok=True)
        key = asyncssh.generate_private_key("ssh-ed25519")
        key_path = workdir / f"{stack}.key"
        key.write_private_key(str(key_path))
        key_path.chmod(0o600)
        port = _closed_port()
        hosts = [
            HostAccess(spec=h, address=f"198.18.200.{10 + i}", ssh_host="127.0.0.1", ssh_port=port,
                       host_key=asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode(),
                       workdir=f"/nonexistent/{stack}/{h.name}")
            for i, h in enumerate(topology.hosts)
        ]
        self._live.add(stack)
        return Cluster(self.name, stack, topology, hosts, key_path)

    def preflight(self, topology: Topology) -> list[Finding]:
        """Nothing to refuse; ``refuse`` (findings) stands in for an account that would."""
        return list(self.refuse)

    def destroy(self, cluster: Cluster) -> None:
        self.destroyed.append(cluster.stack)
        self._live.discard(cluster.stack)

    def gc(self, dry_run: bool = False) -> list[str]:
        return [] if dry_run else [f"removed {s}" for s in sorted(self._live)]
