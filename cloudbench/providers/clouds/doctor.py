"""``cloudbench doctor``: would a run of this spec stop before measuring, and why?

Each check gives a :class:`Finding`: ``ok``, ``warn`` (a run may still work: e.g. a quota
that depends on the account) or ``fail`` (a run would stop). Credentials are looked
for, never read out or printed: only *which* source was found is reported.
Every environment and file lookup goes through arguments, so tests use fakes.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from cloudbench.core import catalog
from cloudbench.core.catalog import CLOUDS
from cloudbench.errors import ProvisionError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.cli import INSTALL_HINT, PulumiCli, find_cli
from cloudbench.spec.clouds import controller_cidr_error
from cloudbench.spec.model import Spec

OK, WARN, FAIL = "ok", "warn", "fail"
SDK_MODULES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure": "pulumi_azure_native"}
# Per-region vCPU limits new accounts commonly start with; above them, ask for more first.
DEFAULT_VCPU_QUOTA = {"aws": 32, "gcp": 24, "azure": 10}
VCPU_QUOTA_NAME = {"aws": "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (vCPUs)",
                   "gcp": "CPUS (per region; and CPUS_ALL_REGIONS)", "azure": "Total Regional vCPUs"}


@dataclass(frozen=True)
class Finding:
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


@dataclass
class Probe:
    """Where the checks look (the real process by default; fakes in tests)."""

    env: Mapping[str, str]
    home: Path
    has_module: Callable[[str], bool]
    find: Callable[[], PulumiCli]

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
    clouds = {name: opts for name, opts in spec.providers.items() if name in CLOUDS}
    if not clouds:
        return [Finding("clouds", OK, f"spec {spec.name!r} uses no cloud ({', '.join(spec.providers)}); "
                        "nothing to check here")]
    for cloud, opts in clouds.items():
        out.append(_sdk(cloud, probe, required=True))
        out.append(_credentials(cloud, probe))
        out.append(_controller(cloud, getattr(opts, "controller_cidr", None), probe))
        out += _quotas(cloud, spec)
    return out


def _pulumi_cli(probe: Probe) -> Finding:
    try:
        cli = probe.find()
    except ProvisionError as e:
        reason = str(e).removeprefix(f"{e.backend} [{e.stack}]: ").removesuffix(f"; {INSTALL_HINT}")
        return Finding("pulumi CLI", FAIL, reason, INSTALL_HINT)
    return Finding("pulumi CLI", OK, f"{cli.path} {cli.text}")


def _sdk(cloud: str, probe: Probe, required: bool) -> Finding:
    missing = [m for m in ("pulumi", SDK_MODULES[cloud]) if not probe.has_module(m)]
    if not missing:
        return Finding(f"{cloud} SDK", OK, f"pulumi and {SDK_MODULES[cloud]} are installed")
    return Finding(f"{cloud} SDK", FAIL if required else WARN, f"not installed: {', '.join(missing)}",
                   f"pip install 'cloudbench[{cloud}]'")


def _credentials(cloud: str, probe: Probe) -> Finding:
    env, home = probe.env, probe.home
    found: list[str] = []
    if cloud == "aws":
        if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            found.append("$AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY")
        if env.get("AWS_PROFILE"):
            found.append(f"profile {env['AWS_PROFILE']}")
        if env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
            found.append("$AWS_WEB_IDENTITY_TOKEN_FILE")
        for f in (env.get("AWS_SHARED_CREDENTIALS_FILE"), home / ".aws" / "credentials", home / ".aws" / "config"):
            if f and Path(f).is_file():
                found.append(str(f))
        fix = "run `aws configure` (or `aws sso login`), or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    elif cloud == "gcp":
        for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CREDENTIALS", "CLOUDSDK_AUTH_ACCESS_TOKEN",
                    "GOOGLE_OAUTH_ACCESS_TOKEN"):
            if env.get(var):
                if var == "GOOGLE_APPLICATION_CREDENTIALS" and not Path(env[var]).is_file():
                    return Finding(f"{cloud} credentials", FAIL, f"${var} names a file that does not exist",
                                   "point it at your service-account key file, or unset it")
                found.append(f"${var}")
        adc = home / ".config" / "gcloud" / "application_default_credentials.json"
        if adc.is_file():
            found.append(str(adc))
        fix = "run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS"
    else:
        if env.get("ARM_CLIENT_ID") and (env.get("ARM_CLIENT_SECRET") or env.get("ARM_USE_OIDC")
                                         or env.get("ARM_USE_MSI")):
            found.append("$ARM_CLIENT_ID (service principal)")
        profile = home / ".azure" / "azureProfile.json"
        if profile.is_file():
            found.append(f"{profile} (az login)")
        fix = "run `az login` (and `az account set -s SUBSCRIPTION`), or export ARM_CLIENT_ID, " \
              "ARM_CLIENT_SECRET, ARM_TENANT_ID and ARM_SUBSCRIPTION_ID"
    if not found:
        return Finding(f"{cloud} credentials", FAIL, "none found", fix)
    return Finding(f"{cloud} credentials", OK, "found (not read): " + ", ".join(found))


def _controller(cloud: str, given: str | None, probe: Probe) -> Finding:
    value, source = cc.controller_cidr(cloud, given, probe.env)
    if not value:
        return Finding("controller CIDR", FAIL, "not set: SSH is opened only to the controller",
                       cc.controller_cidr_fix(cloud))
    problem = controller_cidr_error(value)
    if problem:
        return Finding("controller CIDR", FAIL, f"{source} {value}: {problem}", cc.controller_cidr_fix(cloud))
    return Finding("controller CIDR", OK, f"{value} (from {source})")


def _quotas(cloud: str, spec: Spec) -> list[Finding]:
    topo = spec.topology().for_provider(cloud)
    types = catalog.vm_types(cloud)
    out: list[Finding] = []
    for region in topo.regions:
        hosts = [h for h in topo.hosts if h.region == region]
        unknown = sorted({h.vm_type for h in hosts if h.vm_type not in types})
        vcpus = sum(int(types[h.vm_type]["vcpus"]) for h in hosts if h.vm_type in types)
        detail = f"{len(hosts)} VMs, {vcpus} vCPUs, {len(hosts)} public IPv4 addresses"
        if unknown:
            detail += f" (vCPUs of {', '.join(unknown)} unknown)"
        limit = DEFAULT_VCPU_QUOTA[cloud]
        if vcpus > limit:
            out.append(Finding(f"{cloud} {region} quota", WARN, f"{detail}: above the {limit} vCPUs new "
                               f"accounts often have ({VCPU_QUOTA_NAME[cloud]})",
                               f"check the quota in the {cloud} console and request an increase before running"))
        else:
            out.append(Finding(f"{cloud} {region} quota", OK, detail))
    return out
