"""What a cloud account will refuse, asked before anything exists (read-only API calls).

:func:`check_account` runs an :class:`Account` — one per cloud, built on the cloud's own SDK
(boto3; google-cloud-compute + google-auth; azure-identity + azure-mgmt-compute/-network) —
over a topology and returns :class:`~cloudbench.providers.base.Finding` s:

* credentials, checked live with every standard source the SDK accepts (AWS
  ``sts get-caller-identity`` through boto3's chain: environment, profiles, SSO, web identity,
  container and instance profiles; GCP application default credentials, service accounts,
  workload identity and GCE metadata, refreshed; Azure ``DefaultAzureCredential``: environment,
  workload and managed identity, Azure CLI);
* each (zone, vm type) offered to this account (AWS DescribeInstanceTypeOfferings, GCP
  machineTypes.get in the zone, Azure resource SKUs with their location and zone restrictions);
* vCPU quotas per family and region from the quota APIs (AWS Service Quotas, GCP region and
  project quotas, Azure compute usages), against what runs already plus what the stack adds;
* the network quotas one stack consumes (AWS: VPCs and internet gateways per region, one each;
  GCP: NETWORKS and FIREWALLS per project, SUBNETWORKS, IN_USE_ADDRESSES per region; Azure:
  virtual networks, network security groups and Standard public IPs per region).

Each refusal names the zone or region, the type, the quota and the numbers. Which project or
subscription is asked is resolved as the clouds' own CLIs do (:func:`gcp_project`,
:func:`azure_subscription`); none found is a :class:`~cloudbench.errors.ProvisionError`.
"""

from __future__ import annotations

import configparser
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cloudbench.core import catalog
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError
from cloudbench.providers.base import FAIL, OK, WARN, Finding

# -- which project / subscription -------------------------------------------------------
GCP_PROJECT_ENV = ("CLOUDSDK_CORE_PROJECT", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_PROJECT")


def gcloud_config_dir(env: Mapping[str, str], home: Path) -> Path:
    """gcloud's configuration directory, as gcloud finds it: ``$CLOUDSDK_CONFIG``, else
    ``~/.config/gcloud``."""
    return Path(env["CLOUDSDK_CONFIG"]) if env.get("CLOUDSDK_CONFIG") else home / ".config" / "gcloud"


def gcp_project(given: str | None, env: Mapping[str, str], home: Path) -> tuple[str | None, str]:
    """The GCP project and where it came from, in gcloud's order: the spec's ``project``, the
    environment (``CLOUDSDK_CORE_PROJECT`` — gcloud's own — then the client libraries'
    ``GOOGLE_CLOUD_PROJECT``, ``GCLOUD_PROJECT``, ``GOOGLE_PROJECT``), the active gcloud
    configuration's ``[core] project`` (``$CLOUDSDK_ACTIVE_CONFIG_NAME`` or ``active_config``
    under ``$CLOUDSDK_CONFIG``, default ``~/.config/gcloud``), then the application default
    credentials' file (``project_id`` of a service-account key, ``quota_project_id``)."""
    if given:
        return given, "providers.gcp.project"
    for var in GCP_PROJECT_ENV:
        if env.get(var):
            return env[var], f"${var}"
    cfg_dir = gcloud_config_dir(env, home)
    name = env.get("CLOUDSDK_ACTIVE_CONFIG_NAME") or _read(cfg_dir / "active_config").strip() or "default"
    path = cfg_dir / "configurations" / f"config_{name}"
    parser = configparser.ConfigParser()
    try:
        parser.read_string(_read(path))
        if parser.get("core", "project", fallback=""):
            return parser.get("core", "project"), f"gcloud configuration {name!r} ({path})"
    except configparser.Error:
        pass
    adc = Path(env["GOOGLE_APPLICATION_CREDENTIALS"]) if env.get("GOOGLE_APPLICATION_CREDENTIALS") \
        else cfg_dir / "application_default_credentials.json"
    try:
        doc = json.loads(_read(adc) or "{}")
    except ValueError:
        doc = {}
    for key in ("project_id", "quota_project_id"):
        if isinstance(doc, dict) and doc.get(key):
            return str(doc[key]), f"{key} of {adc}"
    return None, ""


def adc_project() -> str | None:
    """The project google-auth's application default credentials carry, the last place gcloud's
    client libraries look: on a GCE VM, the metadata server's project. None without google-auth."""
    try:
        import google.auth
    except ImportError:
        return None
    try:
        _, project = google.auth.default()
    except Exception:  # no credentials at all: the preflight says so next
        return None
    return str(project) if project else None


GCP_PROJECT_FIX = ("set providers.gcp.project in the spec, or `gcloud config set project PROJECT`, "
                   "or export GOOGLE_CLOUD_PROJECT")


def azure_subscription(env: Mapping[str, str], home: Path) -> tuple[str | None, str]:
    """The Azure subscription and where it came from: ``$ARM_SUBSCRIPTION_ID`` (what Pulumi's
    azure-native provider reads), ``$AZURE_SUBSCRIPTION_ID``, else the Azure CLI's default —
    the subscription with ``isDefault`` in ``azureProfile.json`` under ``$AZURE_CONFIG_DIR``
    (default ``~/.azure``), as ``az account show`` reports it."""
    for var in ("ARM_SUBSCRIPTION_ID", "AZURE_SUBSCRIPTION_ID"):
        if env.get(var):
            return env[var], f"${var}"
    cfg_dir = Path(env["AZURE_CONFIG_DIR"]) if env.get("AZURE_CONFIG_DIR") else home / ".azure"
    path = cfg_dir / "azureProfile.json"
    try:
        doc = json.loads(_read(path, encoding="utf-8-sig") or "{}")  # the CLI writes a BOM
    except ValueError:
        doc = {}
    for sub in doc.get("subscriptions", []) if isinstance(doc, dict) else []:
        if isinstance(sub, dict) and sub.get("isDefault") and sub.get("id"):
            return str(sub["id"]), f"the Azure CLI's default subscription ({path})"
    return None, ""


AZURE_SUBSCRIPTION_FIX = "run `az login` and `az account set -s SUBSCRIPTION`, or export ARM_SUBSCRIPTION_ID"


def _read(path: Path, encoding: str = "utf-8") -> str:
    try:
        return path.read_text(encoding=encoding)
    except (OSError, UnicodeDecodeError):
        return ""


# -- what a topology asks of an account --------------------------------------------------
@dataclass(frozen=True)
class Demand:
    """Per region: VMs of each (zone, type), and the spec subnets (each one network subnet)."""

    region: str
    vms: Counter[tuple[str, str]]  # (spec zone, vm type) -> count
    subnets: int

    @property
    def hosts(self) -> int:
        return sum(self.vms.values())

    @property
    def types(self) -> list[str]:
        return sorted({t for _, t in self.vms})


def demands(topology: Topology) -> list[Demand]:
    """What ``topology`` asks of each of its regions: VMs per (zone, type) and spec subnets."""
    out = []
    for region in topology.regions:
        hosts = [h for h in topology.hosts if h.region == region]
        subnets = {(h.zone, h.subnet) for h in hosts}
        out.append(Demand(region, Counter((h.zone, h.vm_type) for h in hosts), len(subnets)))
    return out


@dataclass(frozen=True)
class Quota:
    """One quota as the cloud reports it, and what the stack adds to it."""

    scope: str  # region, or "project" / "global"
    name: str  # the cloud's name (and code) of the quota
    limit: float
    usage: float
    need: float
    unit: str = ""

    def finding(self, cloud: str) -> Finding:
        check = f"{cloud} {self.scope} quota"
        have = f"{_n(self.usage)} of {_n(self.limit)}{self.unit} in use"
        if self.usage + self.need > self.limit:
            return Finding(check, FAIL, f"{self.name}: the stack needs {_n(self.need)}{self.unit}, {have}",
                           f"request an increase of {self.name} in {self.scope} to at least "
                           f"{_n(self.usage + self.need)} (or free some)")
        return Finding(check, OK, f"{self.name}: needs {_n(self.need)}{self.unit}, {have}")


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


class Account(Protocol):
    """The read-only checks of one cloud account that :func:`check_account` runs (one class
    per cloud on its SDK; tests pass fakes)."""

    cloud: str

    def identity(self) -> str:
        """Who the credentials are (a live call); raises when they do not work."""
        ...

    def check(self, demand: Demand) -> list[Finding]:
        """Offers and quotas of one region against ``demand``."""
        ...

    def check_global(self, demands: list[Demand]) -> list[Finding]:
        """Quotas that span regions (GCP's per-project ones); [] where there are none."""
        ...


def check_account(account: Account, topology: Topology) -> list[Finding]:
    """Credentials, then every region's offers and quotas; API errors become findings too."""
    cloud = account.cloud
    try:
        who = account.identity()
    except Exception as e:
        return [Finding(f"{cloud} credentials", FAIL, f"refused: {_why(e)}", CREDENTIALS_FIX[cloud])]
    out = [Finding(f"{cloud} credentials", OK, f"live: {who}")]
    ds = demands(topology)
    for d in ds:
        try:
            out += account.check(d)
        except Exception as e:
            out.append(Finding(f"{cloud} {d.region} quota", WARN, f"cannot read offers and quotas: {_why(e)}",
                               "grant the credentials read access to quotas (see README, first real run)"))
    try:
        out += account.check_global(ds)
    except Exception as e:
        out.append(Finding(f"{cloud} project quota", WARN, f"cannot read quotas: {_why(e)}", ""))
    return out


CREDENTIALS_FIX = {
    "aws": "run `aws configure` or `aws sso login`, export AWS_PROFILE or AWS_ACCESS_KEY_ID/"
           "AWS_SECRET_ACCESS_KEY, or run on an instance with an instance profile",
    "gcp": "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or run "
           "on a GCE VM whose service account has the compute scope",
    "azure": "run `az login`, export AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET (or ARM_*), "
             "or run where a managed identity is assigned",
}


def _why(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:400]}"


def _unoffered(cloud: str, zone: str, vm_type: str, why: str, fix: str) -> Finding:
    return Finding(f"{cloud} {zone} offer", FAIL, f"{vm_type} {why}", fix)


# -- AWS ---------------------------------------------------------------------------------------
# Service Quotas codes of the On-Demand vCPU quotas, by the instance family's letters.
AWS_VCPU_QUOTAS = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "f": ("L-74FC7D96", "Running On-Demand F instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "vt": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "x": ("L-7295265B", "Running On-Demand X instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "dl": ("L-6E869C2A", "Running On-Demand DL instances"),
    "u": ("L-43DA4232", "Running On-Demand High Memory instances"),
}
AWS_VPC_QUOTA = ("vpc", "L-F678F1CE", "VPCs per Region")
AWS_IGW_QUOTA = ("vpc", "L-A4707A72", "Internet gateways per Region")


def aws_vcpu_quota(vm_type: str) -> tuple[str, str] | None:
    """(code, name) of the On-Demand vCPU quota an instance type counts against."""
    family = vm_type.split(".")[0]
    letters = "".join(c for c in family.split("-")[0] if c.isalpha()).lower()
    for prefix in ("inf", "trn", "dl", "vt"):
        if letters.startswith(prefix):
            return AWS_VCPU_QUOTAS[prefix]
    first = letters[:1]
    if first in "acdhimrtz" and first:
        return AWS_VCPU_QUOTAS["standard"]
    return AWS_VCPU_QUOTAS.get(first)


@dataclass
class AwsAccount:
    """The AWS account of a boto3 session: STS for who it is; per region the EC2 type
    offerings, vCPU quotas (Service Quotas) and the VPC and internet-gateway quotas."""

    session: Any  # boto3.session.Session
    cloud: str = "aws"

    @classmethod
    def real(cls) -> AwsAccount:
        from cloudbench.providers.clouds.common import import_sdk

        return cls(import_sdk("boto3", "boto3", "aws", "-", "the preflight").session.Session())

    def identity(self) -> str:
        who = self.session.client("sts").get_caller_identity()
        return f"{who['Arn']} (account {who['Account']})"

    def _quota(self, sq: Any, service: str, code: str, region: str, name: str, usage: float,
               need: float, unit: str = "") -> Finding:
        """The applied value (Service Quotas), else the default; a warning when neither answers."""
        try:
            try:
                value = sq.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"]
            except sq.exceptions.NoSuchResourceException:  # never changed: the default applies
                value = sq.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"]
        except Exception as e:
            return Finding(f"aws {region} quota", WARN, f"{name} ({code}): cannot read it ({_why(e)}); the "
                           f"stack needs {_n(need)}{unit}, {_n(usage)}{unit} in use",
                           "check it in the Service Quotas console; allow servicequotas:GetServiceQuota")
        return Quota(region, f"{name} ({code})", float(value), usage, need, unit).finding("aws")

    def check(self, d: Demand) -> list[Finding]:
        ec2 = self.session.client("ec2", region_name=d.region)
        sq = self.session.client("service-quotas", region_name=d.region)
        out: list[Finding] = []
        offered: set[tuple[str, str]] = set()
        for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": d.types}]):
            offered |= {(o["Location"], o["InstanceType"]) for o in page["InstanceTypeOfferings"]}
        for (zone, t), n in sorted(d.vms.items()):
            if (zone, t) not in offered:
                elsewhere = sorted(z for z, ot in offered if ot == t)
                out.append(_unoffered("aws", zone, t, f"is not offered in {zone} to this account "
                                      f"(DescribeInstanceTypeOfferings; {n} VM(s) asked)",
                                      f"use a zone where it is: {', '.join(elsewhere)}" if elsewhere
                                      else f"pick another instance type in {d.region}"))
            else:
                out.append(Finding(f"aws {zone} offer", OK, f"{t} is offered"))
        vcpus = self._vcpus(ec2, d.types)
        need: Counter[tuple[str, str]] = Counter()
        for (_, t), n in d.vms.items():
            q = aws_vcpu_quota(t)
            if q is None:
                out.append(Finding(f"aws {d.region} quota", WARN, f"no known vCPU quota for {t}", ""))
                continue
            need[q] += n * vcpus.get(t, 0)
        running = self._running_vcpus(ec2)
        for (code, name), v in sorted(need.items()):
            out.append(self._quota(sq, "ec2", code, d.region, f"{name} vCPUs", running.get(code, 0), v, " vCPUs"))
        vpcs = sum(len(p["Vpcs"]) for p in ec2.get_paginator("describe_vpcs").paginate())
        igws = sum(len(p["InternetGateways"]) for p in ec2.get_paginator("describe_internet_gateways").paginate())
        for (service, code, name), used in ((AWS_VPC_QUOTA, vpcs), (AWS_IGW_QUOTA, igws)):
            out.append(self._quota(sq, service, code, d.region, name, used, 1))
        return out

    def _vcpus(self, ec2: Any, types: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        try:
            for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=types):
                out |= {it["InstanceType"]: int(it["VCpuInfo"]["DefaultVCpus"]) for it in page["InstanceTypes"]}
        except Exception:  # an unknown type fails the whole call: fall back to the catalog
            pass
        cat = catalog.vm_types("aws")
        return {t: out.get(t) or int(cat.get(t, {}).get("vcpus", 0)) for t in types}

    def _running_vcpus(self, ec2: Any) -> dict[str, float]:
        """vCPUs of the region's pending and running instances, per quota code."""
        per_type: Counter[str] = Counter()
        for page in ec2.get_paginator("describe_instances").paginate(
                Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]):
            for r in page["Reservations"]:
                per_type.update(i["InstanceType"] for i in r["Instances"])
        vcpus = self._vcpus(ec2, sorted(per_type)) if per_type else {}
        out: Counter[str] = Counter()
        for t, n in per_type.items():
            q = aws_vcpu_quota(t)
            if q is not None:
                out[q[0]] += n * vcpus.get(t, 0)
        return dict(out)

    def check_global(self, demands: list[Demand]) -> list[Finding]:
        return []


# -- GCP ---------------------------------------------------------------------------------------
def gcp_cpu_metric(machine_type: str, available: Iterable[str]) -> str:
    """The regional quota metric a machine type's vCPUs count against: the family's own
    (``N2_CPUS``, ``C3_CPUS``, …) where the region lists one, else ``CPUS`` (N1, and families
    without a quota of their own)."""
    family = machine_type.split("-")[0].upper()
    metric = f"{family}_CPUS"
    return metric if family not in ("N1", "F1", "G1") and metric in set(available) else "CPUS"


@dataclass
class GcpAccount:
    """One GCP project through google-cloud-compute clients: machine types per zone, region
    quotas (vCPUs per family, subnetworks, addresses) and project quotas (networks, firewalls)."""

    project: str
    regions: Any  # compute_v1.RegionsClient
    projects: Any  # compute_v1.ProjectsClient
    machine_types: Any  # compute_v1.MachineTypesClient
    who: Any = None  # () -> str: refreshes the credentials (the live check)
    cloud: str = "gcp"

    @classmethod
    def real(cls, project: str) -> GcpAccount:
        from cloudbench.providers.clouds.common import import_sdk

        compute = import_sdk("google.cloud.compute_v1", "google-cloud-compute", "gcp", "-", "the preflight")
        auth = import_sdk("google.auth", "google-auth", "gcp", "-", "the preflight")
        transport = import_sdk("google.auth.transport.requests", "google-auth", "gcp", "-", "the preflight")
        creds, _ = auth.default(scopes=["https://www.googleapis.com/auth/compute.readonly"])

        def who() -> str:
            creds.refresh(transport.Request())
            return str(getattr(creds, "service_account_email", None) or getattr(creds, "signer_email", None)
                       or type(creds).__module__.split(".")[-1] + " credentials")

        return cls(project, compute.RegionsClient(credentials=creds), compute.ProjectsClient(credentials=creds),
                   compute.MachineTypesClient(credentials=creds), who)

    def identity(self) -> str:
        who = self.who() if self.who is not None else "credentials"
        p = self.projects.get(project=self.project)  # the project exists and these credentials may read it
        return f"{who}, project {p.name}"

    def check(self, d: Demand) -> list[Finding]:
        out: list[Finding] = []
        vcpus: dict[str, int] = {}
        for (zone, t), n in sorted(d.vms.items()):
            try:
                mt = self.machine_types.get(project=self.project, zone=zone, machine_type=t)
            except Exception as e:
                if "NotFound" not in type(e).__name__:
                    raise
                out.append(_unoffered("gcp", zone, t, f"is not offered in {zone} (machineTypes.get: not found; "
                                      f"{n} VM(s) asked)", f"pick a zone of {d.region} that has it "
                                      "(`gcloud compute machine-types list --filter=name=" + t + "`)"))
                continue
            vcpus[t] = int(mt.guest_cpus)
            out.append(Finding(f"gcp {zone} offer", OK, f"{t} is offered ({mt.guest_cpus} vCPUs)"))
        region = self.regions.get(project=self.project, region=d.region)
        quotas = {q.metric: q for q in region.quotas}
        need: Counter[str] = Counter()
        cat = catalog.vm_types("gcp")
        for (_, t), n in d.vms.items():  # every VM the spec asks, also those of a zone to change
            metric = gcp_cpu_metric(t, quotas)
            need[metric] += n * (vcpus.get(t) or int(cat.get(t, {}).get("vcpus", 0)))
        needs = {**need, "IN_USE_ADDRESSES": d.hosts}
        for metric, v in sorted(needs.items()):
            q = quotas.get(metric)
            if q is None:
                if v:
                    out.append(Finding(f"gcp {d.region} quota", WARN, f"{metric}: the region reports no such "
                                       "quota", ""))
                continue
            out.append(Quota(d.region, metric, q.limit, q.usage, v).finding("gcp"))
        return out

    def check_global(self, demands: list[Demand]) -> list[Finding]:
        p = self.projects.get(project=self.project)
        quotas = {q.metric: q for q in p.quotas}
        cpus = 0
        for d in demands:
            for (_, t), n in d.vms.items():
                cpus += n * int(catalog.vm_types("gcp").get(t, {}).get("vcpus", 0))
        # one network, two firewall rules, a subnetwork per spec subnet (program gcp.py)
        needs = {"NETWORKS": 1, "FIREWALLS": 2, "SUBNETWORKS": sum(d.subnets for d in demands),
                 "CPUS_ALL_REGIONS": cpus}
        out = []
        for metric, v in needs.items():
            q = quotas.get(metric)
            if q is not None:
                out.append(Quota("project", f"{metric} ({self.project})", q.limit, q.usage, v).finding("gcp"))
        return out


# -- Azure -------------------------------------------------------------------------------------
def _get(obj: Any, *names: str) -> Any:
    """An attribute of an azure-mgmt model (old models: attributes; new ones: also mappings)."""
    for name in names:
        v = getattr(obj, name, None)
        if v is None and isinstance(obj, Mapping):
            v = obj.get(name)
        if v is not None:
            return v
    return None



@dataclass
class AzureAccount:
    """One Azure subscription through azure-mgmt-compute/-network: the resource SKUs and their
    location and zone restrictions, and compute and network usages per region."""

    subscription: str
    compute: Any  # azure.mgmt.compute.ComputeManagementClient
    network: Any  # azure.mgmt.network.NetworkManagementClient
    credential: Any
    cloud: str = "azure"

    @classmethod
    def real(cls, subscription: str) -> AzureAccount:
        from cloudbench.providers.clouds.common import import_sdk

        identity = import_sdk("azure.identity", "azure-identity", "azure", "-", "the preflight")
        compute = import_sdk("azure.mgmt.compute", "azure-mgmt-compute", "azure", "-", "the preflight")
        network = import_sdk("azure.mgmt.network", "azure-mgmt-network", "azure", "-", "the preflight")
        cred = identity.DefaultAzureCredential()
        return cls(subscription, compute.ComputeManagementClient(cred, subscription),
                   network.NetworkManagementClient(cred, subscription), cred)

    def identity(self) -> str:
        self.credential.get_token("https://management.azure.com/.default")
        return f"{type(self.credential).__name__}, subscription {self.subscription}"

    def check(self, d: Demand) -> list[Finding]:
        out: list[Finding] = []
        skus = {}
        for sku in self.compute.resource_skus.list(filter=f"location eq '{d.region}'"):
            if _get(sku, "resource_type", "resourceType") == "virtualMachines":
                skus[_get(sku, "name")] = sku
        vcpus: dict[str, int] = {}
        family: dict[str, str] = {}
        for (zone, t), n in sorted(d.vms.items()):
            sku = skus.get(t)
            z = catalog.zone_id("azure", zone)
            if sku is not None:
                caps = {_get(c, "name"): _get(c, "value") for c in _get(sku, "capabilities") or []}
                vcpus[t] = int(caps.get("vCPUs") or 0)
                family[t] = str(_get(sku, "family") or "")
            why = self._restriction(sku, d.region, z)
            if why:
                out.append(_unoffered("azure", zone, t, f"{why} ({n} VM(s) asked)",
                                      f"pick another size or zone (`az vm list-skus -l {d.region} --size {t} "
                                      "-o table`), or ask Azure support to lift the restriction"))
                continue
            out.append(Finding(f"azure {zone} offer", OK, f"{t} is offered"))
        usages = {_get(_get(u, "name"), "value"): u for u in self.compute.usage.list(d.region)}
        need: Counter[str] = Counter()
        cat = catalog.vm_types("azure")
        for (_, t), n in d.vms.items():  # every VM the spec asks, also those of a zone to change
            v = n * (vcpus.get(t) or int(cat.get(t, {}).get("vcpus", 0)))
            need["cores"] += v
            if family.get(t):
                need[family[t]] += v
        net = {_get(_get(u, "name"), "value"): u for u in self.network.usages.list(d.region)}
        for name, v in sorted(need.items()):
            out += self._usage(usages, name, v, d.region, " vCPUs")
        for name, v in (("VirtualNetworks", 1), ("NetworkSecurityGroups", 1), ("StandardSkuPublicIpAddresses",
                                                                              d.hosts)):
            out += self._usage(net, name, v, d.region, "")
        return out

    @staticmethod
    def _usage(usages: Mapping[str, Any], name: str, need: float, region: str, unit: str) -> list[Finding]:
        u = usages.get(name)
        if u is None:
            return [Finding(f"azure {region} quota", WARN, f"{name}: not reported for {region}", "")]
        label = _get(_get(u, "name"), "localized_value", "localizedValue") or name
        return [Quota(region, f"{label} ({name})", float(_get(u, "limit") or 0),
                      float(_get(u, "current_value", "currentValue") or 0), need, unit).finding("azure")]

    @staticmethod
    def _restriction(sku: Any, region: str, zone: str) -> str | None:
        if sku is None:
            return f"is not offered in {region} (not among its resource SKUs)"
        for r in _get(sku, "restrictions") or []:
            reason = _get(r, "reason_code", "reasonCode") or "restricted"
            reason = getattr(reason, "value", reason)  # an enum of the SDK's, or the plain string
            kind = getattr(_get(r, "type"), "value", _get(r, "type"))
            info = _get(r, "restriction_info", "restrictionInfo")
            if kind == "Location":
                return f"is restricted in {region} for this subscription ({reason})"
            if kind == "Zone" and zone in (_get(info, "zones") or []):
                return f"is restricted in zone {zone} of {region} for this subscription ({reason})"
        zones = set()
        for li in _get(sku, "location_info", "locationInfo") or []:
            if str(_get(li, "location")).lower() == region.lower():
                zones |= set(_get(li, "zones") or [])
        if zone not in zones:
            return f"is not offered in zone {zone} of {region} (zones: {', '.join(sorted(zones)) or 'none'})"
        return None

    def check_global(self, demands: list[Demand]) -> list[Finding]:
        return []


def real_account(cloud: str, project_or_subscription: str | None = None) -> Account:
    """The cloud's :class:`Account` on its SDK; a ProvisionError naming the package if missing."""
    if cloud == "aws":
        return AwsAccount.real()
    if not project_or_subscription:
        raise ProvisionError(cloud, "-", "no project" if cloud == "gcp" else "no subscription")
    if cloud == "gcp":
        return GcpAccount.real(project_or_subscription)
    return AzureAccount.real(project_or_subscription)


def environment() -> tuple[Mapping[str, str], Path]:
    """The process environment and home directory, which :func:`gcp_project` and
    :func:`azure_subscription` read (taken as arguments there, so tests pass their own)."""
    return dict(os.environ), Path.home()
