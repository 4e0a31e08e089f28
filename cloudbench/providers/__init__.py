"""Providers of hosts behind one small protocol (:class:`base.Provider`).

``netns`` (the local testbed, :mod:`.netns`), the clouds through Pulumi
(:mod:`.clouds`), and ``static`` hosts. A new provider is one module or folder
here that passes ``tests/providers/test_contract.py``, plus one branch below.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from cloudbench.core.catalog import CLOUDS
from cloudbench.errors import CloudbenchError
from cloudbench.providers.base import Provider
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import CloudProviderModel, StaticProviderModel


def get_provider(
    name: str,
    state_root: str | None = None,
    spec: Spec | None = None,
    spec_path: str | Path | None = None,
    results_root: Path | None = None,
) -> Provider:
    """The provider for a spec's provider name (clouds and static hosts need the ``spec``)."""
    if name == "netns":
        from cloudbench.providers.netns import NetnsProvider  # needs root only when used

        return NetnsProvider(state_root=state_root)
    if name in CLOUDS or name == "static":
        if spec is None or name not in spec.providers:
            raise CloudbenchError(f"provider {name!r} needs its entry of the spec (providers.{name})")
        options = spec.providers[name]
        if isinstance(options, StaticProviderModel):
            from cloudbench.providers.static import StaticProvider

            base = Path(spec_path).parent if spec_path is not None else None
            return StaticProvider(options, campaign=spec.name, spec_dir=base)
        assert isinstance(options, CloudProviderModel)  # the spec validates it so
        from cloudbench.providers.clouds.provider import PulumiProvider
        from cloudbench.providers.clouds.stack import PulumiAutomation

        return PulumiProvider(name, options, spec.name, results_root=results_root,
                              automation=PulumiAutomation(float(options.destroy_timeout)))
    raise CloudbenchError(f"no provider named {name!r}")


def collect_garbage(results_root: Path, dry_run: bool = False,
                    include_live: bool = False) -> Iterator[str]:
    """What killed runs left behind, removed (or only listed, ``dry_run``), a line per thing.

    Testbed namespaces and their sshd processes first (of dead controllers, or all
    with ``include_live``), then cloud stacks under ``results_root`` whose lease
    expired or whose controller died. Lines come as they are done, so a failure
    of the reaper (:class:`~cloudbench.errors.ReapError`) comes after them.
    """
    from cloudbench.providers.clouds.leases import reap
    from cloudbench.providers.netns import NetnsProvider

    yield from NetnsProvider().gc(dry_run=dry_run, include_live=include_live)
    yield from reap(results_root, dry_run=dry_run)


def reap_run(run_path: Path, results_root: Path) -> list[str]:
    """What a dead run under ``run_path`` left (a run or a campaign directory), removed.

    Testbeds provisioned for a directory under ``run_path`` whose controller is gone,
    and cloud stacks under ``results_root`` whose lease expired or controller died.
    Testbeds of other runs, and of live controllers, are left alone.
    """
    from cloudbench.providers.clouds.leases import reap
    from cloudbench.providers.netns import NetnsProvider

    lines = NetnsProvider().gc(under=run_path)
    return lines + reap(results_root)


__all__ = ["Provider", "collect_garbage", "get_provider", "reap_run"]
