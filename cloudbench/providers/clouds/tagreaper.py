"""``cloudbench gc --cloud CLOUD``: find what cloudbench made by the clouds' own tags.

The lease reaper (:func:`~cloudbench.providers.clouds.automation.reap`) needs the
local Pulumi state; this one does not. Every resource the programs make carries
``cloudbench-campaign``, ``cloudbench-stack``, ``cloudbench-owner`` and
``cloudbench-expiry`` (GCP: the same as labels, lowercased). The reaper asks the
cloud for resources with ``cloudbench-expiry``, lists those whose expiry passed
and, when told to (``--yes``), deletes them in an order the cloud accepts
(instances before the network they sit in).

The cloud is reached through an :class:`Inventory` (list, delete): the real ones
use the clouds' Python SDKs (boto3, google-cloud-compute, azure-mgmt-resource +
azure-identity, imported only here, on use); tests pass fakes.

What each cloud's inventory covers:

* AWS: everything tagged (resourcegroupstaggingapi), in every catalogue region.
* Azure: the resource groups (one per region and stack); deleting one deletes all in it.
* GCP: the VMs (networks, subnetworks and firewall rules take no labels and cost nothing;
  ``gcloud compute networks list --filter=name~^cloudbench`` shows them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from cloudbench.core import catalog
from cloudbench.errors import ProvisionError, ReapError
from cloudbench.providers.clouds.common import import_sdk

EXPIRY_TAG = "cloudbench-expiry"
# Deletion order: what depends on others first. Kinds not listed go last.
ORDER = {
    "aws": ["instance", "vpc-peering-connection", "security-group", "subnet", "route-table",
            "internet-gateway", "placement-group", "vpc"],
    "gcp": ["instance"],
    "azure": ["resourceGroups"],
}

# The one EC2 call deleting each other kind of ORDER["aws"]: kind -> (method, its id argument).
AWS_DELETE = {
    "vpc-peering-connection": ("delete_vpc_peering_connection", "VpcPeeringConnectionId"),
    "security-group": ("delete_security_group", "GroupId"),
    "subnet": ("delete_subnet", "SubnetId"),
    "route-table": ("delete_route_table", "RouteTableId"),
    "placement-group": ("delete_placement_group", "GroupName"),
    "vpc": ("delete_vpc", "VpcId"),
}


@dataclass(frozen=True)
class Tagged:
    """One resource carrying cloudbench's tags."""

    cloud: str
    kind: str  # instance, vpc, subnet, … (AWS ARN resource type), instance (GCP), resourceGroups
    id: str
    region: str  # region or zone
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def expiry(self) -> datetime | None:
        return parse_expiry(self.tags.get(EXPIRY_TAG, ""))

    def describe(self) -> str:
        t = self.tags
        return (f"{self.cloud} {self.kind} {self.id} in {self.region} (stack {t.get('cloudbench-stack', '?')}, "
                f"campaign {t.get('cloudbench-campaign', '?')}, owner {t.get('cloudbench-owner', '?')}, "
                f"expiry {t.get(EXPIRY_TAG, '?')})")


def parse_expiry(text: str) -> datetime | None:
    """``2030-01-01T00:00:00Z``, or its GCP label form ``2030-01-01t00-00-00z``."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)[tT](\d\d)[:-](\d\d)[:-](\d\d)[zZ]", text.strip())
    if not m:
        return None
    y, mo, d, h, mi, sec = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, sec, tzinfo=UTC)


class Inventory(Protocol):
    cloud: str

    def list_tagged(self) -> list[Tagged]:
        """Every resource with a ``cloudbench-expiry`` tag (or label)."""
        ...

    def delete(self, res: Tagged) -> None: ...


def reap_tagged(inventory: Inventory, yes: bool = False, now: datetime | None = None) -> list[str]:
    """Lines: what is expired (``would delete`` without ``yes``, ``deleted`` with it).

    Resources without a readable expiry, or whose expiry is still ahead, are kept.
    Failures of single deletions do not stop the others; they end in a :class:`ReapError`.
    """
    now = now or datetime.now(UTC)
    try:
        found = inventory.list_tagged()
    except ProvisionError:
        raise
    except Exception as e:  # the SDK's own errors: credentials, permissions, throttling
        raise ProvisionError(inventory.cloud, "gc", f"cannot list tagged resources: {type(e).__name__}: "
                             f"{e}; check the credentials (`cloudbench doctor SPEC`)") from e
    expired = [r for r in found if r.expiry is not None and r.expiry <= now]
    rank = {k: i for i, k in enumerate(ORDER.get(inventory.cloud, []))}
    expired.sort(key=lambda r: (rank.get(r.kind, len(rank)), r.region, r.id))
    done: list[str] = []
    failures: list[str] = []
    for r in expired:
        if not yes:
            done.append(f"would delete {r.describe()}")
            continue
        try:
            inventory.delete(r)
        except Exception as e:
            failures.append(f"{r.describe()}: {type(e).__name__}: {e}")
            continue
        done.append(f"deleted {r.describe()}")
    if failures:
        raise ReapError(done, failures)
    return done


# -- the real inventories, through the clouds' SDKs ------------------------------------------
def _sdk(module: str, package: str, cloud: str) -> Any:
    return import_sdk(module, package, cloud, "gc", f"`gc --cloud {cloud}`")


class AwsInventory:
    """boto3: the tagging API lists, EC2 deletes."""

    cloud = "aws"

    def __init__(self, regions: Iterable[str] | None = None, session: Any = None) -> None:
        self.regions = list(regions or catalog.regions("aws"))
        self.session = session or _sdk("boto3", "boto3", "aws").session.Session()

    def list_tagged(self) -> list[Tagged]:
        out: list[Tagged] = []
        for region in self.regions:
            api = self.session.client("resourcegroupstaggingapi", region_name=region)
            for page in api.get_paginator("get_resources").paginate(TagFilters=[{"Key": EXPIRY_TAG}]):
                for m in page.get("ResourceTagMappingList", []):
                    kind, _, rid = m["ResourceARN"].split(":", 5)[-1].partition("/")
                    out.append(Tagged("aws", kind, rid, region, {t["Key"]: t["Value"] for t in m.get("Tags", [])}))
        return out

    def delete(self, res: Tagged) -> None:
        ec2 = self.session.client("ec2", region_name=res.region)
        if res.kind == "instance":
            ec2.terminate_instances(InstanceIds=[res.id])
            ec2.get_waiter("instance_terminated").wait(InstanceIds=[res.id])
        elif res.kind == "internet-gateway":
            igw = ec2.describe_internet_gateways(InternetGatewayIds=[res.id])["InternetGateways"]
            for a in (igw[0].get("Attachments", []) if igw else []):
                ec2.detach_internet_gateway(InternetGatewayId=res.id, VpcId=a["VpcId"])
            ec2.delete_internet_gateway(InternetGatewayId=res.id)
        elif res.kind in AWS_DELETE:
            method, arg = AWS_DELETE[res.kind]
            getattr(ec2, method)(**{arg: res.id})
        else:
            raise ProvisionError("aws", "gc", f"no deletion for {res.kind} {res.id}: delete it in the console")


class GcpInventory:
    """google-cloud-compute: labelled VMs of ``project``."""

    cloud = "gcp"

    def __init__(self, project: str, client: Any = None) -> None:
        self.project = project
        self.client = client or _sdk("google.cloud.compute_v1", "google-cloud-compute", "gcp").InstancesClient()

    def list_tagged(self) -> list[Tagged]:
        out: list[Tagged] = []
        pages = self.client.aggregated_list(request={"project": self.project, "filter": f"labels.{EXPIRY_TAG}:*"})
        for zone, scoped in pages:
            for vm in getattr(scoped, "instances", []) or []:
                out.append(Tagged("gcp", "instance", vm.name, zone.removeprefix("zones/"), dict(vm.labels)))
        return out

    def delete(self, res: Tagged) -> None:
        self.client.delete(project=self.project, zone=res.region, instance=res.id).result()


class AzureInventory:
    """azure-mgmt-resource: the tagged resource groups of ``subscription``."""

    cloud = "azure"

    def __init__(self, subscription: str, client: Any = None) -> None:
        if client is None:
            identity = _sdk("azure.identity", "azure-identity", "azure")
            resource = _sdk("azure.mgmt.resource", "azure-mgmt-resource", "azure")
            client = resource.ResourceManagementClient(identity.DefaultAzureCredential(), subscription)
        self.client = client

    def list_tagged(self) -> list[Tagged]:
        return [Tagged("azure", "resourceGroups", g.name, g.location, dict(g.tags or {}))
                for g in self.client.resource_groups.list(filter=f"tagName eq '{EXPIRY_TAG}'")]

    def delete(self, res: Tagged) -> None:
        self.client.resource_groups.begin_delete(res.id).result()


def inventory(cloud: str, project: str | None = None, subscription: str | None = None,
              regions: Iterable[str] | None = None) -> Inventory:
    """The real inventory of ``cloud`` (GCP needs the project, Azure the subscription)."""
    if cloud == "aws":
        return AwsInventory(regions)
    if cloud == "gcp":
        if not project:
            raise ProvisionError("gcp", "gc", "which project? pass --project (or set $GOOGLE_CLOUD_PROJECT)")
        return GcpInventory(project)
    if cloud == "azure":
        if not subscription:
            raise ProvisionError("azure", "gc", "which subscription? pass --subscription "
                                 "(or set $ARM_SUBSCRIPTION_ID)")
        return AzureInventory(subscription)
    raise ProvisionError(cloud, "gc", f"no tag reaper for {cloud!r}: use aws, gcp or azure")
