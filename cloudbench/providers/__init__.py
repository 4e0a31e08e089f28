"""Provisioning backends behind one small protocol (:class:`base.Provider`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cloudbench.providers.base import Cluster, HostAccess, Provider

if TYPE_CHECKING:
    from cloudbench.spec import Spec

CLOUDS = ("aws", "gcp", "azure")


def get_provider(
    name: str,
    state_root: str | None = None,
    spec: Spec | None = None,
    spec_path: str | Path | None = None,
    results_root: Path | None = None,
) -> Provider:
    """The backend for a spec's provider name (clouds and static hosts need the ``spec``)."""
    from cloudbench.errors import CloudbenchError

    if name == "netns":
        from cloudbench.providers.netns import NetnsProvider

        return NetnsProvider(state_root=state_root)
    if name in CLOUDS or name == "static":
        if spec is None or name not in spec.providers:
            raise CloudbenchError(f"provider {name!r} needs its entry of the spec (providers.{name})")
        options = spec.providers[name]
        if name == "static":
            from cloudbench.providers.static import StaticProvider
            from cloudbench.spec import StaticProviderModel

            assert isinstance(options, StaticProviderModel)  # the spec validates it so
            base = Path(spec_path).parent if spec_path is not None else None
            return StaticProvider(options, campaign=spec.name, spec_dir=base)
        from cloudbench.providers.pulumi import PulumiProvider

        return PulumiProvider(name, options, spec.name, results_root=results_root)
    raise CloudbenchError(f"no provider backend named {name!r}")


__all__ = ["Cluster", "HostAccess", "Provider", "get_provider"]
