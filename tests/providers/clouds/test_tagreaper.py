"""`cloudbench gc --cloud`: the tag reaper against moto (AWS) and the real GCP and Azure clients.

Every boto3 call of the AWS inventory runs against moto (an AWS API emulator), in a
two-region stack built as the AWS program builds it (:mod:`tests.providers.clouds.aws_account`);
the GCP and Azure inventories use the real ``google-cloud-compute`` and ``azure-mgmt-resource``
client classes over a stubbed HTTP transport (``responses``), so method names, URLs and
query parameters are the real ones.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
import responses
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.errors import ProvisionError, ReapError
from cloudbench.providers.clouds import accounts
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds import tagreaper as tr
from tests.providers.clouds.aws_account import StackIds, make_stack

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PAST, FUTURE = "2030-01-01T11:00:00Z", "2030-01-01T13:00:00Z"
REGIONS = ["us-east-1", "us-west-2"]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A boto3 session on moto, with credentials that reach nothing real."""
    for var in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        yield boto3.session.Session()


def reap(inv: Any, yes: bool = False, sleeps: list[float] | None = None) -> list[str]:
    return tr.reap_tagged(inv, yes=yes, now=NOW, sleep=(sleeps if sleeps is not None else []).append)


def exists(ec2: Any, kind: str, rid: str) -> bool:
    """Whether ``rid`` still exists (terminated instances and deleted peerings count as gone)."""
    try:
        if kind == "instance":
            return any(x["State"]["Name"] != "terminated" for r in ec2.describe_instances(
                InstanceIds=[rid])["Reservations"] for x in r["Instances"])
        if kind == "vpc-peering-connection":
            return any(p["Status"]["Code"] != "deleted" for p in ec2.describe_vpc_peering_connections(
                VpcPeeringConnectionIds=[rid])["VpcPeeringConnections"])
        call, arg, key = {
            "volume": ("describe_volumes", "VolumeIds", "Volumes"),
            "vpc": ("describe_vpcs", "VpcIds", "Vpcs"),
            "subnet": ("describe_subnets", "SubnetIds", "Subnets"),
            "security-group": ("describe_security_groups", "GroupIds", "SecurityGroups"),
            "route-table": ("describe_route_tables", "RouteTableIds", "RouteTables"),
            "internet-gateway": ("describe_internet_gateways", "InternetGatewayIds", "InternetGateways"),
        }[kind]
        return bool(getattr(ec2, call)(**{arg: [rid]})[key])
    except ClientError as e:
        assert tr._aws_not_found(e), e
        return False


def remaining(session: Any, stack: StackIds) -> dict[str, list[str]]:
    """What of ``stack`` still exists, kind -> ids."""
    left: dict[str, list[str]] = {}
    for region, kinds in stack.regions.items():
        ec2 = session.client("ec2", region_name=region)
        for kind, ids in kinds.items():
            for rid in ids:
                if exists(ec2, kind, rid):
                    left.setdefault(kind, []).append(rid)
    return left


def count(stack: StackIds) -> int:
    return sum(len(ids) for kinds in stack.regions.values() for ids in kinds.values())


def test_gc_cloud_aws_yes_deletes_an_expired_two_region_stack_keeps_a_live_one_and_exits_0(
        aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    old = make_stack(aws, "old-r01", "2020-01-01T00:00:00Z", REGIONS)
    live = make_stack(aws, "live-r01", "2099-01-01T00:00:00Z", REGIONS, hosts_per_region=1, second_octet=120)
    assert len(old.ids("volume")) == 4  # the root volumes carry the stack's tags
    import cloudbench

    # On the public API the CLI calls (it caches what it imported lazily, so patch it there).
    monkeypatch.setattr(cloudbench, "cloud_inventory",
                        lambda cloud, **kw: tr.AwsInventory(REGIONS, session=aws), raising=False)
    res = CliRunner().invoke(app, ["gc", "--cloud", "aws"], terminal_width=400)
    assert res.exit_code == 0, res.output
    listed = [line for line in res.output.splitlines() if line.startswith("would delete")]
    assert len(listed) == count(old) + 1  # the peering is listed in both of its regions
    assert "live-r01" not in res.output and "--yes" in res.output
    assert sum(len(v) for v in remaining(aws, old).values()) == count(old)
    res = CliRunner().invoke(app, ["gc", "--cloud", "aws", "--yes"], terminal_width=400)
    assert res.exit_code == 0, res.output
    assert remaining(aws, old) == {}
    assert sum(len(v) for v in remaining(aws, live).values()) == count(live)  # all of it kept
    lines = res.output.splitlines()
    assert all(line.split(" aws ")[0] in ("deleted", "already gone", "deleted with its instance")
               for line in lines), lines
    # a second sweep finds nothing left to do but what is still being forgotten by the tagging API
    again = CliRunner().invoke(app, ["gc", "--cloud", "aws", "--yes"], terminal_width=400)
    assert again.exit_code == 0, again.output


def test_a_volume_of_a_live_instance_is_kept_and_one_kept_on_termination_is_deleted_after_it(aws: Any) -> None:
    stack = make_stack(aws, "old-r01", PAST, ["us-east-1"], hosts_per_region=1)
    ec2 = aws.client("ec2", region_name="us-east-1")
    inv = tr.AwsInventory(["us-east-1"], session=aws)
    vol = stack.ids("volume")[0]
    # The instance is not expired (its tags were changed), the volume is: the volume waits for it.
    ec2.create_tags(Resources=stack.ids("instance"), Tags=[{"Key": "cloudbench-expiry", "Value": FUTURE}])
    with pytest.raises(ProvisionError, match=rf"volume {vol} is attached to instance {stack.ids('instance')[0]}, "
                       "which is running"):
        inv.delete(tr.Tagged("aws", "volume", vol, "us-east-1"))
    # Kept on termination (DeleteOnTermination false): deleted once its instance is gone.
    ec2.modify_instance_attribute(InstanceId=stack.ids("instance")[0], BlockDeviceMappings=[
        {"DeviceName": "/dev/sda1", "Ebs": {"DeleteOnTermination": False}}])
    ec2.create_tags(Resources=stack.ids("instance"), Tags=[{"Key": "cloudbench-expiry", "Value": PAST}])
    reap(inv, yes=True)
    assert remaining(aws, stack) == {}


def test_already_gone_counts_as_deleted_for_every_kind(aws: Any) -> None:
    inv = tr.AwsInventory(["us-east-1"], session=aws)
    ids = {"instance": "i-0123456789abcdef0", "volume": "vol-0123456789abcdef0",
           "vpc-peering-connection": "pcx-0123456789abcdef0", "security-group": "sg-0123456789abcdef0",
           "subnet": "subnet-0123456789abcdef0", "route-table": "rtb-0123456789abcdef0",
           "internet-gateway": "igw-0123456789abcdef0", "vpc": "vpc-0123456789abcdef0"}
    assert set(ids) == set(tr.ORDER["aws"]) - {"placement-group"}  # moto has no placement groups
    for kind, rid in ids.items():
        assert inv.delete(tr.Tagged("aws", kind, rid, "us-east-1")) in (tr.GONE, tr.DELETED), kind


def test_placement_groups_are_deleted_by_name_in_the_real_request_shape(aws: Any) -> None:
    """moto does not emulate placement groups; botocore's Stubber checks the request against the
    EC2 service model instead."""
    ec2 = aws.client("ec2", region_name="us-east-1")

    class Session:
        def client(self, service: str, region_name: str) -> Any:
            return ec2

    inv = tr.AwsInventory(["us-east-1"], session=Session())
    with Stubber(ec2) as stub:
        stub.add_response("delete_placement_group", {}, {"GroupName": "pg-us-east-1a-123"})
        stub.add_client_error("delete_placement_group", "InvalidPlacementGroup.Unknown",
                              expected_params={"GroupName": "pg-gone"})
        assert inv.delete(tr.Tagged("aws", "placement-group", "pg-us-east-1a-123", "us-east-1")) == tr.DELETED
        assert inv.delete(tr.Tagged("aws", "placement-group", "pg-gone", "us-east-1")) == tr.GONE
        stub.assert_no_pending_responses()


def fail_calls(session: Any, region: str, service: str, operations: list[str], code: str, times: int) -> Any:
    """``session`` whose ``service`` clients in ``region`` answer each of ``operations`` with the
    error ``code``, its first ``times`` calls (moto is more lenient than AWS about dependencies)."""
    left = dict.fromkeys(operations, times)

    def refuse(event_name: str, **kwargs: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if left.get(operation, 0) > 0:
            left[operation] -= 1
            raise ClientError({"Error": {"Code": code, "Message": f"{code} (injected)"}}, operation)

    class Session:
        def client(self, svc: str, region_name: str) -> Any:
            c = session.client(svc, region_name=region_name)
            if svc == service and region_name == region:
                c.meta.events.register("before-call.*.*", refuse)
            return c

    return Session()


def test_a_region_whose_listing_fails_is_reported_and_the_others_are_swept(
        aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    old = make_stack(aws, "old-r01", "2020-01-01T00:00:00Z", REGIONS)
    session = fail_calls(aws, "us-west-2", "resourcegroupstaggingapi", ["GetResources"], "AccessDeniedException",
                         99)
    import cloudbench

    monkeypatch.setattr(cloudbench, "cloud_inventory",
                        lambda cloud, **kw: tr.AwsInventory(REGIONS, session=session), raising=False)
    res = CliRunner().invoke(app, ["gc", "--cloud", "aws", "--yes"], terminal_width=400)
    assert res.exit_code == 1
    assert "not listed: region us-west-2: ClientError: " in res.output and "AccessDeniedException" in res.output
    assert "stack(s)" not in res.output and "resource(s) not deleted or listings failed" in res.output
    left = remaining(aws, old)
    # us-east-1 is swept (its peering too, so the us-west-2 side of it is gone as well)
    assert not any(rid in old.regions["us-east-1"].get(k, []) for k, ids in left.items() for rid in ids)
    assert left and all(rid in old.regions["us-west-2"].get(k, []) for k, ids in left.items() for rid in ids)


def test_when_no_region_can_be_listed_it_is_one_credentials_error(aws: Any) -> None:
    session = fail_calls(aws, "us-east-1", "resourcegroupstaggingapi", ["GetResources"],
                         "UnrecognizedClientException", 99)
    with pytest.raises(ProvisionError, match=r"UnrecognizedClientException.*cloudbench doctor"):
        reap(tr.AwsInventory(["us-east-1"], session=session))


def test_a_deletion_refused_once_is_retried_after_the_others(aws: Any) -> None:
    stack = make_stack(aws, "old-r01", PAST, ["us-east-1"], hosts_per_region=1)
    # As AWS answers while a terminated instance's interface is still being released: the group
    # is refused, and so is the VPC it is in.
    session = fail_calls(aws, "us-east-1", "ec2", ["DeleteSecurityGroup", "DeleteVpc"], "DependencyViolation", 1)
    sleeps: list[float] = []
    done = reap(tr.AwsInventory(["us-east-1"], session=session), yes=True, sleeps=sleeps)
    assert sleeps == [tr.RETRY_AFTER_S] and remaining(aws, stack) == {}
    # both retried, in the order the cloud accepts
    order = [line.split(" aws ")[1].split()[0] for line in done]
    assert order[-2:] == ["security-group", "vpc"]


def test_what_still_fails_after_the_retry_is_listed_and_the_rest_is_deleted(aws: Any) -> None:
    stack = make_stack(aws, "old-r01", PAST, ["us-east-1"], hosts_per_region=1)
    # An interface someone else made in our group: AWS refuses the group and its VPC for good.
    session = fail_calls(aws, "us-east-1", "ec2", ["DeleteSecurityGroup", "DeleteVpc"], "DependencyViolation", 99)
    sleeps: list[float] = []
    with pytest.raises(ReapError) as ei:
        reap(tr.AwsInventory(["us-east-1"], session=session), yes=True, sleeps=sleeps)
    msg = str(ei.value)
    assert sleeps == [tr.RETRY_AFTER_S]
    assert msg.startswith("aws [gc]: ") and "resource(s) not deleted:" in msg and "stack(s)" not in msg
    assert "cloudbench gc --cloud aws --yes` tries again" in msg
    left = remaining(aws, stack)
    for kind in left:
        assert f"aws {kind} {left[kind][0]}" in msg
    assert sorted(left) == ["security-group", "vpc"] and msg.count("(injected)") == 2


def test_gc_cloud_without_its_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "azure.identity", None)
    res = CliRunner().invoke(app, ["gc", "--cloud", "azure", "--subscription", "s"], terminal_width=300)
    assert res.exit_code == 1 and "pip install azure-identity" in res.output
    res = CliRunner().invoke(app, ["gc", "--cloud", "gcp"], env={"GOOGLE_CLOUD_PROJECT": ""}, terminal_width=300)
    assert res.exit_code == 1 and "--project" in res.output


def test_a_missing_cloud_sdk_is_a_message_naming_the_package() -> None:
    from cloudbench.providers.clouds import hostkeys

    want = r"^aws \[gc\]: `gc --cloud aws` needs no-such-sdk: pip install no-such-sdk$"
    with pytest.raises(ProvisionError, match=want):
        tr._sdk("cloudbench_no_such_sdk", "no-such-sdk", "aws")
    with pytest.raises(ProvisionError, match=r"^gcp \[-\]: host_keys: generated needs no-such-sdk: pip install"):
        hostkeys._sdk("cloudbench_no_such_sdk", "no-such-sdk", "gcp")


def test_gcp_sweeps_vms_and_the_unlabelled_network_resources_through_the_real_client() -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    base = "https://compute.googleapis.com/compute/v1/projects/p"
    s = cc.CloudSettings(cloud="gcp", campaign="stormcloud-gcp", stack="20300101t000000z-ab-r01", owner="alice",
                         expiry_utc=PAST, controller_cidr="198.51.100.7/32", client_public_key="ssh-ed25519 A")
    desc = cc.gcp_description(s, "campaign network")
    live = cc.gcp_description(cc.CloudSettings(**{**s.to_dict(), "expiry_utc": FUTURE}), "ingress: ssh")
    op = {"name": "operation-1", "status": "DONE"}
    with responses.RequestsMock() as rs:
        rs.get(f"{base}/aggregated/instances", json={"items": {
            "zones/us-east1-b": {"instances": [
                {"name": "vm-a", "labels": cc.gcp_labels(s)},
                {"name": "vm-b", "labels": {"cloudbench-expiry": "2030-01-01t13-00-00z"}}]},
            "zones/us-east1-c": {"warning": {"code": "NO_RESULTS_ON_PAGE"}}}})
        rs.get(f"{base}/global/firewalls", json={"items": [
            {"name": "cloudbench-fw-ssh-1a2b3c4", "description": desc},
            {"name": "cloudbench-fw-workers-5d6e7f8", "description": live},
            {"name": "cloudbench-someone-elses", "description": "not ours"}]})
        rs.get(f"{base}/aggregated/subnetworks", json={"items": {"regions/us-east1": {"subnetworks": [
            {"name": "cloudbench-subnet-us-east1-b-s1-9a8b7c6", "description": desc}]}}})
        rs.get(f"{base}/aggregated/resourcePolicies", json={"items": {"regions/us-east1": {"resourcePolicies": [
            {"name": "cloudbench-placement-us-east1-b-1234567", "description": desc}]}}})
        rs.get(f"{base}/global/networks", json={"items": [{"name": "cloudbench-net-7654321", "description": desc}]})
        rs.delete(f"{base}/zones/us-east1-b/instances/vm-a", json=op)
        rs.delete(f"{base}/global/firewalls/cloudbench-fw-ssh-1a2b3c4", json=op)
        rs.delete(f"{base}/regions/us-east1/subnetworks/cloudbench-subnet-us-east1-b-s1-9a8b7c6", json=op)
        rs.delete(f"{base}/regions/us-east1/resourcePolicies/cloudbench-placement-us-east1-b-1234567", status=404,
                  json={"error": {"code": 404, "message": "The resource was not found"}})
        rs.delete(f"{base}/global/networks/cloudbench-net-7654321", json=op)
        creds = AnonymousCredentials()  # type: ignore[no-untyped-call]
        clients = {name: getattr(compute_v1, name)(credentials=creds, transport="rest")
                   for name in ("InstancesClient", "FirewallsClient", "SubnetworksClient", "ResourcePoliciesClient",
                                "NetworksClient")}
        done = reap(tr.GcpInventory("p", clients=clients), yes=True)
        calls = [(c.request.method, str(c.request.url).split("/projects/p/")[1]) for c in rs.calls]
    assert [line.split(" gcp ")[0] + " " + line.split(" gcp ")[1].split()[1] for line in done] == [
        "deleted vm-a", "deleted cloudbench-fw-ssh-1a2b3c4", "deleted cloudbench-subnet-us-east1-b-s1-9a8b7c6",
        "already gone cloudbench-placement-us-east1-b-1234567", "deleted cloudbench-net-7654321"]
    assert "stack 20300101t000000z-ab-r01, campaign stormcloud-gcp, owner alice, expiry 2030-01-01T11:00:00Z" in done[1]
    assert calls[0] == ("GET", "aggregated/instances?filter=labels.cloudbench-expiry%3A%2A")
    assert {c for c in calls[1:5]} == {(("GET", f"{p}?filter=name+eq+%22cloudbench-.%2A%22"))
                                       for p in ("global/firewalls", "aggregated/subnetworks",
                                                 "aggregated/resourcePolicies", "global/networks")}
    assert [m for m, _ in calls[5:]] == ["DELETE"] * 5


def test_gcp_a_kind_whose_listing_fails_is_reported_and_the_others_swept() -> None:
    from google.api_core.exceptions import Forbidden

    class Failing:
        def list(self, request: dict[str, str]) -> Any:
            raise Forbidden("compute.firewalls.list denied")  # type: ignore[no-untyped-call]

        aggregated_list = list

    class Instances:
        def aggregated_list(self, request: dict[str, str]) -> Any:
            vm = type("Vm", (), {"name": "vm-a", "labels": {"cloudbench-expiry": "2030-01-01t11-00-00z"}})()
            return [("zones/us-east1-b", type("Scoped", (), {"instances": [vm]})())]

        def delete(self, project: str, zone: str, instance: str) -> Any:
            return type("Op", (), {"result": lambda self: None})()

    inv = tr.GcpInventory("p", clients={"InstancesClient": Instances(), **{
        cls: Failing() for cls, *_ in tr.GCP_KINDS.values()}})
    with pytest.raises(ReapError) as ei:
        reap(inv, yes=True)
    assert ei.value.done == ["deleted gcp instance vm-a in us-east1-b (stack ?, campaign ?, owner ?, "
                             "expiry 2030-01-01t11-00-00z)"]
    assert len(ei.value.failures) == 4 and "not listed: firewalls: Forbidden: 403" in ei.value.failures[0]


def test_azure_deletes_expired_resource_groups_through_the_real_client() -> None:
    from azure.core.credentials import AccessToken, AccessTokenInfo
    from azure.mgmt.resource.resources import ResourceManagementClient

    class Credential:
        def get_token(self, *scopes: str, **kw: Any) -> AccessToken:
            return AccessToken("token", int(time.time()) + 3600)

        def get_token_info(self, *scopes: str, **kw: Any) -> AccessTokenInfo:
            return AccessTokenInfo("token", int(time.time()) + 3600)

    base = "https://management.azure.com/subscriptions/sub/resourcegroups"
    with responses.RequestsMock() as rs:
        rs.get(base, json={"value": [
            {"name": "rg-eastus-x", "location": "eastus", "tags": {"cloudbench-expiry": PAST}},
            {"name": "rg-westus-x", "location": "westus", "tags": {"cloudbench-expiry": PAST}},
            {"name": "rg-live", "location": "eastus", "tags": {"cloudbench-expiry": FUTURE}}]})
        rs.delete(f"{base}/rg-eastus-x", status=200)
        rs.delete(f"{base}/rg-westus-x", status=404, json={"error": {
            "code": "ResourceGroupNotFound", "message": "Resource group 'rg-westus-x' could not be found."}})
        inv = tr.AzureInventory("sub", client=ResourceManagementClient(Credential(), "sub"))
        done = reap(inv, yes=True)
        calls = [(c.request.method, str(c.request.url)) for c in rs.calls]
    assert [line.split(" (")[0] for line in done] == ["deleted azure resourceGroups rg-eastus-x in eastus",
                                                      "already gone azure resourceGroups rg-westus-x in westus"]
    assert calls[0][0] == "GET" and "$filter=tagName%20eq%20%27cloudbench-expiry%27" in calls[0][1]
    assert [m for m, _ in calls[1:]] == ["DELETE", "DELETE"]


def test_expiry_in_tag_label_and_description_forms() -> None:
    assert tr.parse_expiry("2030-01-01T11:00:00Z") == tr.parse_expiry("2030-01-01t11-00-00z") == datetime(
        2030, 1, 1, 11, tzinfo=UTC)
    assert tr.parse_expiry("soon") is None and tr.parse_expiry("") is None
    s = cc.CloudSettings(cloud="gcp", campaign="my campaign", stack="x-r01", owner="a b", expiry_utc=PAST,
                         controller_cidr="198.51.100.7/32", client_public_key="ssh-ed25519 A")
    tags = cc.tags_from_description(cc.gcp_description(s, "campaign network"))
    assert tags == {"cloudbench-campaign": "my_campaign", "cloudbench-stack": "x-r01", "cloudbench-owner": "a_b",
                    "cloudbench-expiry": PAST}


def test_gc_finds_the_gcp_project_as_gcloud_does_and_names_the_fix_when_it_cannot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gc --cloud gcp` without --project: the gcloud configuration's project, as the preflight
    finds it (it read only $GOOGLE_CLOUD_PROJECT); none anywhere is an error that says where to set it."""
    cfg = tmp_path / "gcloud"
    (cfg / "configurations").mkdir(parents=True)
    (cfg / "active_config").write_text("work\n")
    (cfg / "configurations" / "config_work").write_text("[core]\nproject = from-gcloud\n")
    monkeypatch.setattr(accounts, "environment", lambda: ({"CLOUDSDK_CONFIG": str(cfg)}, tmp_path))
    monkeypatch.setattr(accounts, "adc_project", lambda: None)
    monkeypatch.setattr(tr, "GcpInventory", lambda project: project)  # no client: no credentials here
    assert tr.inventory("gcp") == "from-gcloud"
    assert tr.inventory("gcp", project="given") == "given"
    monkeypatch.setattr(accounts, "environment", lambda: ({}, tmp_path / "nohome"))
    with pytest.raises(ProvisionError, match="gcloud config set project"):
        tr.inventory("gcp")
    with pytest.raises(ProvisionError, match="az login"):
        tr.inventory("azure")
