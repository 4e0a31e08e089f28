"""``cloudbench gc --cloud CLOUD``: find what cloudbench made by the clouds' own tags.

The lease reaper (:func:`~cloudbench.providers.clouds.leases.reap`) needs the
local Pulumi state; this one does not. Every resource the programs make carries
``cloudbench-campaign``, ``cloudbench-stack``, ``cloudbench-owner`` and
``cloudbench-expiry`` (GCP: the same as labels, lowercased; on GCP resources that take
no labels, as ``key=value`` words of their description). The reaper asks the cloud for
resources with ``cloudbench-expiry``, lists those whose expiry passed and, when told to
(``--yes``), deletes them in an order the cloud accepts (instances before the network
they sit in).

It finishes: a resource already gone (NotFound) counts as deleted; a deletion that
fails does not stop the others, and the failed ones get one more try after the rest
(a security group is refused while the ENIs of a terminated instance are still being
released); a region (or, on GCP, a kind) whose listing fails is reported and the others
are still swept. What is left ends in a :class:`~cloudbench.errors.ReapError` naming
each resource.

The cloud is reached through an :class:`Inventory` (list, delete): the real ones
use the clouds' Python SDKs (boto3, google-cloud-compute, azure-mgmt-resource +
azure-identity, imported only here, on use); the tests run them against moto (AWS)
and against the real GCP and Azure client classes over a stubbed HTTP transport.

What each cloud's inventory covers:

* AWS: everything tagged (resourcegroupstaggingapi), in every catalogue region. Root
  volumes carry the instance's tags; one that AWS deletes with its instance
  (``DeleteOnTermination``) is left to it, and counted as deleted once it is gone.
* Azure: the resource groups (one per region and stack); deleting one deletes all in it.
* GCP: the labelled VMs; the networks, subnetworks, firewall rules and resource policies
  (which take no labels) by their ``cloudbench-`` name and the tags in their description.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from cloudbench.core import catalog
from cloudbench.errors import ProvisionError, ReapError
from cloudbench.providers.clouds import accounts
from cloudbench.providers.clouds.common import GCP_NAME_PREFIX, import_sdk, tags_from_description

EXPIRY_TAG = "cloudbench-expiry"
# Deletion order: what depends on others first. Kinds not listed go last.
ORDER = {
    "aws": ["instance", "volume", "vpc-peering-connection", "security-group", "subnet", "route-table",
            "internet-gateway", "placement-group", "vpc"],
    # VMs use subnetworks and resource policies; firewalls and subnetworks sit in the network.
    "gcp": ["instance", "firewall", "subnetwork", "resource-policy", "network"],
    "azure": ["resourceGroups"],
}
RETRY_AFTER_S = 30.0  # before the second try of what failed: ENIs and detachments settle

# The one EC2 call deleting each kind of ORDER["aws"] that needs no other: kind -> (method, its id
# argument). Instances, volumes, peerings, internet gateways and route tables have their own steps.
AWS_DELETE = {
    "security-group": ("delete_security_group", "GroupId"),
    "subnet": ("delete_subnet", "SubnetId"),
    "placement-group": ("delete_placement_group", "GroupName"),
    "vpc": ("delete_vpc", "VpcId"),
}
DELETED = "deleted"
GONE = "already gone"


@dataclass(frozen=True)
class Tagged:
    """One resource carrying cloudbench's tags."""

    cloud: str
    kind: str  # instance, vpc, subnet, … (AWS ARN resource type), instance (GCP), resourceGroups
    id: str
    region: str  # region or zone ("global" for GCP networks and firewalls)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def expiry(self) -> datetime | None:
        return parse_expiry(self.tags.get(EXPIRY_TAG, ""))

    def describe(self) -> str:
        t = self.tags
        return (f"{self.cloud} {self.kind} {self.id} in {self.region} (stack {t.get('cloudbench-stack', '?')}, "
                f"campaign {t.get('cloudbench-campaign', '?')}, owner {t.get('cloudbench-owner', '?')}, "
                f"expiry {t.get(EXPIRY_TAG, '?')})")


@dataclass
class Listing:
    """What an inventory found, and where listing failed (``"region us-west-2: AccessDenied: …"``)."""

    found: list[Tagged] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_expiry(text: str) -> datetime | None:
    """``2030-01-01T00:00:00Z``, or its GCP label form ``2030-01-01t00-00-00z``."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)[tT](\d\d)[:-](\d\d)[:-](\d\d)[zZ]", text.strip())
    if not m:
        return None
    y, mo, d, h, mi, sec = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, sec, tzinfo=UTC)


class Inventory(Protocol):
    """One cloud's tagged resources, as :func:`reap_tagged` lists and deletes them (one class per
    cloud on its SDK; tests pass fakes)."""

    cloud: str

    def list_tagged(self) -> Listing:
        """Every resource with a ``cloudbench-expiry`` tag (or label), and what could not be listed.

        Raises when nothing could be listed at all (credentials, permissions)."""
        ...

    def delete(self, res: Tagged) -> str:
        """Delete ``res`` (waiting until it is gone); returns what happened (:data:`DELETED`,
        :data:`GONE`, …). A resource that is already gone is not an error."""
        ...


def reap_tagged(inventory: Inventory, yes: bool = False, now: datetime | None = None,
                retry_after_s: float = RETRY_AFTER_S, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Lines: what is expired (``would delete`` without ``yes``; with it, ``deleted``,
    ``already gone``, …).

    Resources without a readable expiry, or whose expiry is still ahead, are kept.
    Failures of single deletions do not stop the others; what failed is tried once more
    after ``retry_after_s``, and what still fails, with any listing error, ends in a
    :class:`ReapError` (after everything else was done).
    """
    now = now or datetime.now(UTC)
    try:
        listing = inventory.list_tagged()
    except ProvisionError:
        raise
    except Exception as e:  # the SDK's own errors: credentials, permissions, throttling
        raise ProvisionError(inventory.cloud, "gc", f"cannot list tagged resources: {type(e).__name__}: "
                             f"{e}; check the credentials (`cloudbench doctor SPEC`)") from e
    expired = [r for r in listing.found if r.expiry is not None and r.expiry <= now]
    rank = {k: i for i, k in enumerate(ORDER.get(inventory.cloud, []))}
    expired.sort(key=lambda r: (rank.get(r.kind, len(rank)), r.region, r.id))
    done: list[str] = []
    if not yes:
        done = [f"would delete {r.describe()}" for r in expired]
    pending = expired if yes else []
    errors: list[tuple[Tagged, str]] = []
    for attempt in range(2):
        if attempt and pending:
            sleep(retry_after_s)
        errors = []
        for r in pending:
            try:
                what = inventory.delete(r)
            except Exception as e:
                errors.append((r, f"{r.describe()}: {type(e).__name__}: {e}"))
                continue
            done.append(f"{what} {r.describe()}")
        pending = [r for r, _ in errors]
    failures = [msg for _, msg in errors] + [f"not listed: {e}" for e in listing.errors]
    if failures:
        what = "resource(s) not deleted" if not listing.errors else "resource(s) not deleted or listings failed"
        raise ReapError(done, failures, what=what, provider=inventory.cloud,
                        hint=f"`cloudbench gc --cloud {inventory.cloud}{' --yes' if yes else ''}` tries again")
    return done


def _sdk(module: str, package: str, cloud: str) -> Any:
    return import_sdk(module, package, cloud, "gc", f"`gc --cloud {cloud}`")


def _aws_code(e: Exception) -> str:
    """The AWS error code of a botocore ``ClientError`` ("" for anything else)."""
    response = getattr(e, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _aws_not_found(e: Exception) -> bool:
    # InvalidVpcID.NotFound, InvalidGroup.NotFound, InvalidVolume.NotFound, …
    code = _aws_code(e)
    return code.endswith("NotFound") or code == "InvalidPlacementGroup.Unknown"


class AwsInventory:
    """boto3: the tagging API lists, EC2 deletes."""

    cloud = "aws"

    def __init__(self, regions: Iterable[str] | None = None, session: Any = None) -> None:
        self.regions = list(regions or catalog.regions("aws"))
        self.session = session or _sdk("boto3", "boto3", "aws").session.Session()

    def list_tagged(self) -> Listing:
        listing = Listing()
        first: Exception | None = None
        for region in self.regions:
            api = self.session.client("resourcegroupstaggingapi", region_name=region)
            try:
                for page in api.get_paginator("get_resources").paginate(TagFilters=[{"Key": EXPIRY_TAG}]):
                    for m in page.get("ResourceTagMappingList", []):
                        kind, _, rid = m["ResourceARN"].split(":", 5)[-1].partition("/")
                        tags = {t["Key"]: t["Value"] for t in m.get("Tags", [])}
                        listing.found.append(Tagged("aws", kind, rid, region, tags))
            except Exception as e:  # botocore's errors; this region is reported, the others swept
                first = first or e
                listing.errors.append(f"region {region}: {type(e).__name__}: {e}")
        if first is not None and len(listing.errors) == len(self.regions):
            raise first  # nothing listed anywhere: credentials or permissions, not one region
        return listing

    def delete(self, res: Tagged) -> str:
        ec2 = self.session.client("ec2", region_name=res.region)
        try:
            return self._delete(ec2, res)
        except Exception as e:
            if _aws_not_found(e):
                return GONE
            raise

    def _delete(self, ec2: Any, res: Tagged) -> str:
        if res.kind == "instance":
            ec2.terminate_instances(InstanceIds=[res.id])
            ec2.get_waiter("instance_terminated").wait(InstanceIds=[res.id])
        elif res.kind == "volume":
            return self._delete_volume(ec2, res.id)
        elif res.kind == "internet-gateway":
            igw = ec2.describe_internet_gateways(InternetGatewayIds=[res.id])["InternetGateways"]
            for a in (igw[0].get("Attachments", []) if igw else []):
                ec2.detach_internet_gateway(InternetGatewayId=res.id, VpcId=a["VpcId"])
            ec2.delete_internet_gateway(InternetGatewayId=res.id)
        elif res.kind == "route-table":
            # Associations of subnets not deleted yet (or not ours) block the deletion.
            tables = ec2.describe_route_tables(RouteTableIds=[res.id])["RouteTables"]
            for a in (tables[0].get("Associations", []) if tables else []):
                if not a.get("Main") and a.get("RouteTableAssociationId"):
                    ec2.disassociate_route_table(AssociationId=a["RouteTableAssociationId"])
            ec2.delete_route_table(RouteTableId=res.id)
        elif res.kind == "vpc-peering-connection":
            # Both sides list it (the accepter carries the tags too); the second finds it deleted.
            pcx = ec2.describe_vpc_peering_connections(VpcPeeringConnectionIds=[res.id])
            states = [p.get("Status", {}).get("Code") for p in pcx.get("VpcPeeringConnections", [])]
            if not states or all(st in ("deleted", "deleting", "rejected", "failed", "expired") for st in states):
                return GONE
            ec2.delete_vpc_peering_connection(VpcPeeringConnectionId=res.id)
        elif res.kind in AWS_DELETE:
            method, arg = AWS_DELETE[res.kind]
            getattr(ec2, method)(**{arg: res.id})
        else:
            raise ProvisionError("aws", "gc", f"no deletion for {res.kind} {res.id}: delete it in the console")
        return DELETED

    @staticmethod
    def _delete_volume(ec2: Any, volume_id: str) -> str:
        """A root volume goes with its instance (DeleteOnTermination): wait for that, delete no more.

        Instances come first in :data:`ORDER`, so by now the instance is terminated (the
        volume then is ``deleting``, or gone: NotFound) unless it is not expired itself, and
        then the volume is left to it. One kept on termination is deleted once detached.
        """
        vol = ec2.describe_volumes(VolumeIds=[volume_id])["Volumes"][0]
        if vol.get("State") in ("deleting", "deleted"):
            ec2.get_waiter("volume_deleted").wait(VolumeIds=[volume_id])
            return f"{DELETED} with its instance"
        attached = [a for a in vol.get("Attachments", []) if a.get("State") in ("attaching", "attached")]
        if attached:
            instance_id = attached[0]["InstanceId"]
            inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
            state = inst["State"]["Name"]
            if state not in ("shutting-down", "terminated"):
                raise ProvisionError("aws", "gc", f"volume {volume_id} is attached to instance {instance_id}, "
                                     f"which is {state} (not expired, or not tagged): it is left to it")
            # The instance's mapping says whether AWS deletes the volume with it.
            if any(m.get("Ebs", {}).get("VolumeId") == volume_id and m["Ebs"].get("DeleteOnTermination")
                   for m in inst.get("BlockDeviceMappings", [])):
                ec2.get_waiter("volume_deleted").wait(VolumeIds=[volume_id])
                return f"{DELETED} with its instance"
            ec2.get_waiter("volume_available").wait(VolumeIds=[volume_id])
        ec2.delete_volume(VolumeId=volume_id)
        return DELETED


# GCP kinds besides the VMs: kind -> (client class, list call, scoped-list attribute or None for
# a global list, the delete call's resource argument).
GCP_KINDS = {
    "firewall": ("FirewallsClient", "list", None, "firewall"),
    "subnetwork": ("SubnetworksClient", "aggregated_list", "subnetworks", "subnetwork"),
    "resource-policy": ("ResourcePoliciesClient", "aggregated_list", "resource_policies", "resource_policy"),
    "network": ("NetworksClient", "list", None, "network"),
}


def _gcp_not_found(e: Exception) -> bool:
    # google.api_core.exceptions.NotFound (HTTP 404), without importing google here
    return getattr(e, "code", None) == 404 or type(e).__name__ == "NotFound"


class GcpInventory:
    """google-cloud-compute: labelled VMs of ``project``, and its networks, subnetworks, firewall
    rules and resource policies named ``cloudbench-…`` with the tags in their description.

    ``clients`` maps a compute_v1 client class name (``InstancesClient``, ``NetworksClient``, …)
    to an instance; missing ones are made with the default credentials.
    """

    cloud = "gcp"

    def __init__(self, project: str, client: Any = None, clients: dict[str, Any] | None = None) -> None:
        self.project = project
        self._clients = dict(clients or {})
        if client is not None:
            self._clients["InstancesClient"] = client
        self.client("InstancesClient")  # a missing SDK is said now, before anything is listed

    def client(self, name: str) -> Any:
        if name not in self._clients:
            compute = _sdk("google.cloud.compute_v1", "google-cloud-compute", "gcp")
            self._clients[name] = getattr(compute, name)()
        return self._clients[name]

    def list_tagged(self) -> Listing:
        listing = Listing()
        first: Exception | None = None
        try:
            pages = self.client("InstancesClient").aggregated_list(
                request={"project": self.project, "filter": f"labels.{EXPIRY_TAG}:*"})
            for zone, scoped in pages:
                for vm in getattr(scoped, "instances", []) or []:
                    listing.found.append(Tagged("gcp", "instance", vm.name, zone.removeprefix("zones/"),
                                                dict(vm.labels)))
        except Exception as e:  # google.api_core's errors: this kind is reported, the others listed
            first = e
            listing.errors.append(f"instances: {type(e).__name__}: {e}")
        # Compute API list filters: `eq` takes an RE2 regular expression matched against the whole name.
        request = {"project": self.project, "filter": f'name eq "{GCP_NAME_PREFIX}.*"'}
        for kind, (cls, call, scoped_attr, _) in GCP_KINDS.items():
            try:
                found = getattr(self.client(cls), call)(request=request)
                if scoped_attr is None:
                    items = [("global", item) for item in found]
                else:
                    items = [(scope.removeprefix("regions/"), item) for scope, scoped in found
                             for item in getattr(scoped, scoped_attr, []) or []]
                for where, item in items:
                    tags = tags_from_description(item.description or "")
                    if EXPIRY_TAG in tags:
                        listing.found.append(Tagged("gcp", kind, item.name, where, tags))
            except Exception as e:
                first = first or e
                listing.errors.append(f"{kind}s: {type(e).__name__}: {e}")
        if first is not None and len(listing.errors) == 1 + len(GCP_KINDS):
            raise first
        return listing

    def delete(self, res: Tagged) -> str:
        try:
            if res.kind == "instance":
                op = self.client("InstancesClient").delete(project=self.project, zone=res.region, instance=res.id)
            elif res.kind in GCP_KINDS:
                cls, _, scoped_attr, arg = GCP_KINDS[res.kind]
                where = {} if scoped_attr is None else {"region": res.region}
                op = self.client(cls).delete(project=self.project, **where, **{arg: res.id})
            else:
                raise ProvisionError("gcp", "gc", f"no deletion for {res.kind} {res.id}: delete it in the console")
            op.result()
        except Exception as e:
            if _gcp_not_found(e):
                return GONE
            raise
        return DELETED


class AzureInventory:
    """azure-mgmt-resource: the tagged resource groups of ``subscription``."""

    cloud = "azure"

    def __init__(self, subscription: str, client: Any = None) -> None:
        if client is None:
            identity = _sdk("azure.identity", "azure-identity", "azure")
            # azure.mgmt.resource.resources: the old packages' and the split 24+ packages' home of the
            # client (26.0 has no azure.mgmt.resource.ResourceManagementClient any more).
            resource = _sdk("azure.mgmt.resource.resources", "azure-mgmt-resource", "azure")
            client = resource.ResourceManagementClient(identity.DefaultAzureCredential(), subscription)
        self.client = client

    def list_tagged(self) -> Listing:
        return Listing([Tagged("azure", "resourceGroups", g.name, g.location, dict(g.tags or {}))
                        for g in self.client.resource_groups.list(filter=f"tagName eq '{EXPIRY_TAG}'")])

    def delete(self, res: Tagged) -> str:
        try:
            self.client.resource_groups.begin_delete(res.id).result()
        except Exception as e:
            # azure.core.exceptions.ResourceNotFoundError (404): deleted since it was listed
            if getattr(e, "status_code", None) == 404 or type(e).__name__ == "ResourceNotFoundError":
                return GONE
            raise
        return DELETED


def inventory(cloud: str, project: str | None = None, subscription: str | None = None,
              regions: Iterable[str] | None = None) -> Inventory:
    """The real inventory of ``cloud``. GCP needs the project and Azure the subscription: given,
    or found as the preflight finds them (gcloud's order: environment, gcloud configuration,
    application default credentials; the Azure CLI's default subscription)."""
    if cloud == "aws":
        return AwsInventory(regions)
    env, home = accounts.environment()
    if cloud == "gcp":
        project = project or accounts.gcp_project(None, env, home)[0] or accounts.adc_project()
        if not project:
            raise ProvisionError("gcp", "gc", f"which project? pass --project, or {accounts.GCP_PROJECT_FIX}")
        return GcpInventory(project)
    if cloud == "azure":
        subscription = subscription or accounts.azure_subscription(env, home)[0]
        if not subscription:
            raise ProvisionError("azure", "gc", f"which subscription? pass --subscription, or "
                                 f"{accounts.AZURE_SUBSCRIPTION_FIX}")
        return AzureInventory(subscription)
    raise ProvisionError(cloud, "gc", f"no tag reaper for {cloud!r}: use aws, gcp or azure")
