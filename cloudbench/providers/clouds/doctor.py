"""``cloudbench doctor``: would a run of this spec stop before measuring, and why?

Each check gives a :class:`Finding`: ``ok``, ``warn`` (a run may still work: e.g. a quota
the credentials may not read) or ``fail`` (a run would stop). Per cloud of the spec: the
Pulumi CLI and SDKs, the controller CIDR, then the provider's own preflight
(:meth:`PulumiProvider.preflight`, the one ``run`` does before ``up``): the project or
subscription, live credentials (whatever source the cloud's SDK finds; never printed),
each (zone, vm type) offered, vCPU and network quotas from the cloud's quota APIs.
Every environment, file and account lookup goes through :class:`Probe`, so tests use fakes.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cloudbench.core.catalog import CLOUDS
from cloudbench.errors import ProvisionError
from cloudbench.providers.base import FAIL, OK, WARN, Finding
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.accounts import Account
from cloudbench.providers.clouds.cli import INSTALL_HINT, PulumiCli, find_cli
from cloudbench.spec.clouds import controller_cidr_error
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import CloudProviderModel

SDK_MODULES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure": "pulumi_azure_native"}


@dataclass
class Probe:
    """Where the checks look (the real process by default; fakes in tests)."""

    env: Mapping[str, str]
    home: Path
    has_module: Callable[[str], bool]
    find: Callable[[], PulumiCli]
    # (cloud, GCP project or Azure subscription) -> the account the preflight asks; None: the SDK's
    account: Callable[[str, str | None], Account] | None = None

    @classmethod
    def real(cls) -> Probe:
        def has_module(name: str) -> bool:
            try:
                return importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                return False

        return cls(dict(os.environ), Path.home(), has_module, find_cli)


def diagnose(spec: Spec | None, probe: Probe | None = None) -> list[Finding]:
    """Every finding for ``spec``'s clouds (or for the Pulumi CLI alone without a spec)."""
    probe = probe or Probe.real()
    out = [_pulumi_cli(probe)]
    if spec is None:
        return out + [_sdk(cloud, probe, required=False) for cloud in CLOUDS]
    clouds = {name: opts for name, opts in spec.providers.items()
              if name in CLOUDS and isinstance(opts, CloudProviderModel)}
    if not clouds:
        return [Finding("clouds", OK, f"spec {spec.name!r} uses no cloud ({', '.join(spec.providers)}); "
                        "nothing to check here")]
    for cloud, opts in clouds.items():
        out.append(_sdk(cloud, probe, required=True))
        out.append(_controller(cloud, getattr(opts, "controller_cidr", None), probe))
        out += _preflight(cloud, opts, spec, probe)
    return out


def _preflight(cloud: str, opts: CloudProviderModel, spec: Spec, probe: Probe) -> list[Finding]:
    """The provider's own preflight, as ``run`` does it before ``up``: project or subscription,
    the cloud's SDK, live credentials, offers and quotas (read-only)."""
    from cloudbench.providers.clouds.provider import PulumiProvider

    provider = PulumiProvider(cloud, opts, spec.name, account=probe.account, env=probe.env, home=probe.home)
    return provider.preflight(spec.topology())


def _pulumi_cli(probe: Probe) -> Finding:
    try:
        cli = probe.find()
    except ProvisionError as e:
        reason = str(e).removeprefix(f"{e.provider} [{e.stack}]: ").removesuffix(f"; {INSTALL_HINT}")
        return Finding("pulumi CLI", FAIL, reason, INSTALL_HINT)
    return Finding("pulumi CLI", OK, f"{cli.path} {cli.text}")


def _sdk(cloud: str, probe: Probe, required: bool) -> Finding:
    missing = [m for m in ("pulumi", SDK_MODULES[cloud]) if not probe.has_module(m)]
    if not missing:
        return Finding(f"{cloud} SDK", OK, f"pulumi and {SDK_MODULES[cloud]} are installed")
    return Finding(f"{cloud} SDK", FAIL if required else WARN, f"not installed: {', '.join(missing)}",
                   f"pip install 'cloudbench[{cloud}]'")


def _controller(cloud: str, given: str | None, probe: Probe) -> Finding:
    value, source = cc.controller_cidr(cloud, given, probe.env)
    if not value:
        return Finding("controller CIDR", FAIL, "not set: SSH is opened only to the controller",
                       cc.controller_cidr_fix(cloud))
    problem = controller_cidr_error(value)
    if problem:
        return Finding("controller CIDR", FAIL, f"{source} {value}: {problem}", cc.controller_cidr_fix(cloud))
    return Finding("controller CIDR", OK, f"{value} (from {source})")
