"""`cloudbench gc --cloud`: the tag reaper, with fakes of the clouds' SDK calls."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.errors import ProvisionError, ReapError
from cloudbench.providers.clouds import tagreaper as tr

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PAST, FUTURE = "2030-01-01T11:00:00Z", "2030-01-01T13:00:00Z"


def tags(expiry: str, stack: str = "c-r01") -> list[dict[str, str]]:
    return [{"Key": "cloudbench-expiry", "Value": expiry}, {"Key": "cloudbench-stack", "Value": stack},
            {"Key": "cloudbench-campaign", "Value": "c"}, {"Key": "cloudbench-owner", "Value": "alice"}]


class FakeEc2:
    def __init__(self, log: list[str], fail: set[str]) -> None:
        self.log, self.fail = log, fail

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            ident = next(iter(kwargs.values()))
            ident = ident[0] if isinstance(ident, list) else ident
            self.log.append(f"{name} {ident}")
            if ident in self.fail:
                raise RuntimeError("DependencyViolation (fake)")
            if name == "describe_internet_gateways":
                return {"InternetGateways": [{"Attachments": [{"VpcId": "vpc-1"}]}]}
            return {}
        return call

    def get_waiter(self, name: str) -> Any:
        return SimpleNamespace(wait=lambda **kw: self.log.append(f"wait {name}"))


class FakeSession:
    """boto3.session.Session: the tagging API's paginator and an EC2 client, per region."""

    def __init__(self, mappings: dict[str, list[dict[str, Any]]], fail: set[str] | None = None) -> None:
        self.mappings, self.log, self.fail = mappings, [], fail or set()

    def client(self, service: str, region_name: str) -> Any:
        if service == "ec2":
            return FakeEc2(self.log, self.fail)
        assert service == "resourcegroupstaggingapi"
        pages = [{"ResourceTagMappingList": self.mappings.get(region_name, [])}]

        def paginate(TagFilters: list[dict[str, str]]) -> list[dict[str, Any]]:
            assert TagFilters == [{"Key": "cloudbench-expiry"}]
            return pages
        return SimpleNamespace(get_paginator=lambda name: SimpleNamespace(paginate=paginate))


def arn(kind: str, rid: str, region: str = "us-east-1") -> str:
    return f"arn:aws:ec2:{region}:123456789012:{kind}/{rid}"


def aws_session(fail: set[str] | None = None) -> FakeSession:
    return FakeSession({
        "us-east-1": [
            {"ResourceARN": arn("vpc", "vpc-1"), "Tags": tags(PAST)},
            {"ResourceARN": arn("subnet", "subnet-1"), "Tags": tags(PAST)},
            {"ResourceARN": arn("internet-gateway", "igw-1"), "Tags": tags(PAST)},
            {"ResourceARN": arn("instance", "i-1"), "Tags": tags(PAST)},
            {"ResourceARN": arn("security-group", "sg-0abc"), "Tags": tags(PAST)},
            {"ResourceARN": arn("instance", "i-live"), "Tags": tags(FUTURE, "live-r01")},
            {"ResourceARN": arn("instance", "i-odd"), "Tags": tags("soon")},
        ],
        "us-west-2": [{"ResourceARN": arn("instance", "i-2", "us-west-2"), "Tags": tags(PAST)}],
    }, fail)


def test_aws_lists_expired_then_deletes_in_dependency_order() -> None:
    session = aws_session()
    inv = tr.AwsInventory(["us-east-1", "us-west-2"], session=session)
    listed = tr.reap_tagged(inv, now=NOW)
    assert all(line.startswith("would delete aws ") for line in listed) and session.log == []
    assert [line.split()[4] for line in listed] == ["i-1", "i-2", "sg-0abc", "subnet-1", "igw-1", "vpc-1"]
    assert not any("i-live" in x or "i-odd" in x for x in listed)  # not expired, or no readable expiry
    assert "stack c-r01, campaign c, owner alice" in listed[0]
    done = tr.reap_tagged(inv, yes=True, now=NOW)
    assert [d.split()[0] for d in done] == ["deleted"] * 6
    assert session.log == ["terminate_instances i-1", "wait instance_terminated", "terminate_instances i-2",
                           "wait instance_terminated", "delete_security_group sg-0abc", "delete_subnet subnet-1",
                           "describe_internet_gateways igw-1", "detach_internet_gateway igw-1",
                           "delete_internet_gateway igw-1", "delete_vpc vpc-1"]


def test_one_failed_deletion_does_not_stop_the_others() -> None:
    session = aws_session(fail={"subnet-1"})
    with pytest.raises(ReapError, match=r"(?s)1 stack\(s\) not destroyed.*subnet-1.*DependencyViolation") as ei:
        tr.reap_tagged(tr.AwsInventory(["us-east-1"], session=session), yes=True, now=NOW)
    assert "delete_vpc vpc-1" in session.log and len(ei.value.done) == 4


def test_gcp_label_expiry_and_zone() -> None:
    deleted: list[tuple[str, str, str]] = []

    class Client:
        def aggregated_list(self, request: dict[str, str]) -> list[tuple[str, Any]]:
            assert request == {"project": "p", "filter": "labels.cloudbench-expiry:*"}
            vm = SimpleNamespace(name="vm-a-1-x", labels={"cloudbench-expiry": "2030-01-01t11-00-00z",
                                                          "cloudbench-stack": "s"})
            live = SimpleNamespace(name="vm-b", labels={"cloudbench-expiry": "2030-01-01t13-00-00z"})
            return [("zones/us-east1-b", SimpleNamespace(instances=[vm, live])),
                    ("zones/us-east1-c", SimpleNamespace(instances=[]))]

        def delete(self, project: str, zone: str, instance: str) -> Any:
            deleted.append((project, zone, instance))
            return SimpleNamespace(result=lambda: None)

    assert tr.reap_tagged(tr.GcpInventory("p", client=Client()), yes=True, now=NOW) == [
        "deleted gcp instance vm-a-1-x in us-east1-b (stack s, campaign ?, owner ?, expiry 2030-01-01t11-00-00z)"]
    assert deleted == [("p", "us-east1-b", "vm-a-1-x")]


def test_azure_deletes_expired_resource_groups() -> None:
    deleted: list[str] = []
    groups = [SimpleNamespace(name="rg-eastus-x", location="eastus", tags={"cloudbench-expiry": PAST}),
              SimpleNamespace(name="rg-live", location="eastus", tags={"cloudbench-expiry": FUTURE})]
    client = SimpleNamespace(resource_groups=SimpleNamespace(
        list=lambda filter: groups if filter == "tagName eq 'cloudbench-expiry'" else [],
        begin_delete=lambda name: SimpleNamespace(result=lambda: deleted.append(name))))
    assert len(tr.reap_tagged(tr.AzureInventory("sub", client=client), yes=True, now=NOW)) == 1
    assert deleted == ["rg-eastus-x"]


def test_listing_errors_are_cloudbench_errors() -> None:
    class Broken:
        cloud = "aws"

        def list_tagged(self) -> list[tr.Tagged]:
            raise RuntimeError("UnrecognizedClientException: The security token is invalid")

        def delete(self, res: tr.Tagged) -> None:
            raise AssertionError

    with pytest.raises(tr.ProvisionError, match=r"security token.*cloudbench doctor"):
        tr.reap_tagged(Broken())


def test_gc_cloud_through_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    session = aws_session()
    import cloudbench

    # On the public API the CLI calls (it caches what it imported lazily, so patch it there).
    monkeypatch.setattr(cloudbench, "cloud_inventory",
                        lambda cloud, **kw: tr.AwsInventory(["us-east-1"], session=session), raising=False)
    monkeypatch.setattr(cloudbench, "reap_tagged",
                        lambda inv, yes=False: tr.reap_tagged(inv, yes=yes, now=NOW), raising=False)
    res = CliRunner().invoke(app, ["gc", "--cloud", "aws"], terminal_width=300)
    assert res.exit_code == 0, res.output
    assert "would delete aws instance i-1" in res.output and "--yes" in res.output and session.log == []
    res = CliRunner().invoke(app, ["gc", "--cloud", "aws", "--yes"], terminal_width=300)
    assert res.exit_code == 0 and "deleted aws vpc vpc-1" in res.output and "delete_vpc vpc-1" in session.log


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


def test_every_aws_kind_in_the_deletion_order_can_be_deleted() -> None:
    session = FakeSession({})
    inv = tr.AwsInventory(["us-east-1"], session=session)
    for i, kind in enumerate(tr.ORDER["aws"]):
        inv.delete(tr.Tagged("aws", kind, f"id-{i}", "us-east-1"))
    deleted = [line for line in session.log if line.startswith(("delete_", "terminate_"))]
    assert [line.split()[1] for line in deleted] == [f"id-{i}" for i in range(len(tr.ORDER["aws"]))]
    with pytest.raises(ProvisionError, match="no deletion for nat-gateway"):
        inv.delete(tr.Tagged("aws", "nat-gateway", "nat-1", "us-east-1"))
