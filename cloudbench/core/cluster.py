"""What a provider hands back: hosts ready for work (:class:`Cluster`), each reachable by SSH.

A Cluster is all the controller needs to reach and label every host; it is the
same whatever built it (testbed namespaces, cloud VMs, or existing hosts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.core.topology import HostSpec, Topology


@dataclass
class HostAccess:
    """One provisioned host: its labels, experiment address and SSH access."""

    spec: HostSpec
    address: str  # experiment address: workers listen and measure here
    ssh_host: str  # where the controller's SSH connects
    ssh_port: int = 22
    user: str = "root"
    host_key: str = ""  # pinned OpenSSH public key line ("ssh-ed25519 AAAA…")
    workdir: str = "."  # where workers and their output live on the host
    python: str = "python3"
    netns: str | None = None  # open the SSH socket inside this namespace (testbed)
    facts: dict[str, Any] = field(default_factory=dict)  # kernel, mtu, shaping, …

    @property
    def name(self) -> str:
        return self.spec.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": self.spec.labels(),
            "address": self.address,
            "ssh": f"{self.user}@{self.ssh_host}:{self.ssh_port}",
            "facts": self.facts,
        }


@dataclass
class Cluster:
    """Hosts ready for work, plus what their provider needs to destroy them."""

    provider: str
    stack: str  # the provider's name for this set of hosts (short id, stack name)
    topology: Topology
    hosts: list[HostAccess]
    client_key: Path  # private key of the controller (mode 0600)
    facts: dict[str, Any] = field(default_factory=dict)

    def host(self, name: str) -> HostAccess:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "stack": self.stack,
            "hosts": [h.to_dict() for h in self.hosts],
            "facts": self.facts,
        }
