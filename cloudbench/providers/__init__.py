"""Provisioning backends behind one small protocol (:class:`base.Provider`)."""

from __future__ import annotations

from cloudbench.providers.base import Cluster, HostAccess, Provider


def get_provider(name: str, state_root: str | None = None) -> Provider:
    """The backend for a spec's provider name."""
    if name == "netns":
        from cloudbench.providers.netns import NetnsProvider

        return NetnsProvider(state_root=state_root)
    from cloudbench.errors import CloudbenchError

    raise CloudbenchError(f"no provider backend named {name!r}")


__all__ = ["Cluster", "HostAccess", "Provider", "get_provider"]
