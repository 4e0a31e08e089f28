"""The preflight against account stand-ins: moto for AWS, the real GCP/Azure clients over StubHttp.

Each refusal must name the zone or region, the type, the quota and the numbers; the
project and subscription are resolved as gcloud and the Azure CLI do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudbench.errors import ProvisionError
from cloudbench.providers.base import FAIL, OK, WARN, Finding
from cloudbench.providers.clouds import accounts as acc
from cloudbench.testing.pulumi import FakeAutomation, fake_cloud_provider
from cloudbench.workloads import parse_spec
from tests.providers.clouds.test_clouds import stormcloud_yaml

# -- project and subscription, as the clouds' CLIs find them ---------------------------------


def gcloud_config(home: Path, name: str, project: str, active: bool = True) -> None:
    d = home / ".config" / "gcloud"
    (d / "configurations").mkdir(parents=True, exist_ok=True)
    (d / "configurations" / f"config_{name}").write_text(f"[core]\naccount = a@example.com\nproject = {project}\n")
    if active:
        (d / "active_config").write_text(name)


def test_gcp_project_is_found_where_gcloud_finds_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert acc.gcp_project(None, {}, home) == (None, "")
    adc = home / ".config" / "gcloud" / "application_default_credentials.json"
    adc.parent.mkdir(parents=True)
    adc.write_text(json.dumps({"type": "authorized_user", "quota_project_id": "from-adc"}))
    assert acc.gcp_project(None, {}, home)[0] == "from-adc"
    gcloud_config(home, "default", "from-default", active=False)  # no active_config: "default"
    assert acc.gcp_project(None, {}, home)[0] == "from-default"
    gcloud_config(home, "work", "from-work")
    project, source = acc.gcp_project(None, {}, home)
    assert project == "from-work" and "'work'" in source
    assert acc.gcp_project(None, {"CLOUDSDK_ACTIVE_CONFIG_NAME": "default"}, home)[0] == "from-default"
    env = {"GOOGLE_CLOUD_PROJECT": "from-env"}
    assert acc.gcp_project(None, env, home) == ("from-env", "$GOOGLE_CLOUD_PROJECT")
    assert acc.gcp_project(None, {**env, "CLOUDSDK_CORE_PROJECT": "gcloud-env"}, home)[0] == "gcloud-env"
    assert acc.gcp_project("from-spec", env, home) == ("from-spec", "providers.gcp.project")
    # $CLOUDSDK_CONFIG moves gcloud's whole directory; a service-account key names its project
    key = tmp_path / "sa.json"
    key.write_text(json.dumps({"type": "service_account", "project_id": "from-key"}))
    assert acc.gcp_project(None, {"CLOUDSDK_CONFIG": str(tmp_path / "none"),
                                  "GOOGLE_APPLICATION_CREDENTIALS": str(key)}, home)[0] == "from-key"


def test_azure_subscription_is_the_cli_s_default(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert acc.azure_subscription({}, home) == (None, "")
    profile = home / ".azure" / "azureProfile.json"
    profile.parent.mkdir(parents=True)
    subs = {"subscriptions": [{"id": "sub-other", "isDefault": False}, {"id": "sub-default", "isDefault": True}]}
    profile.write_text(json.dumps(subs), encoding="utf-8-sig")  # as az writes it: with a BOM
    sub, source = acc.azure_subscription({}, home)
    assert sub == "sub-default" and "Azure CLI" in source
    assert acc.azure_subscription({"AZURE_SUBSCRIPTION_ID": "s2"}, home)[0] == "s2"
    assert acc.azure_subscription({"AZURE_SUBSCRIPTION_ID": "s2", "ARM_SUBSCRIPTION_ID": "s1"}, home)[0] == "s1"
    moved = tmp_path / "az"
    moved.mkdir()
    (moved / "azureProfile.json").write_text(json.dumps({"subscriptions": [{"id": "s3", "isDefault": True}]}))
    assert acc.azure_subscription({"AZURE_CONFIG_DIR": str(moved)}, home)[0] == "s3"


@pytest.mark.parametrize("cloud", ["gcp", "azure"])
def test_no_project_or_subscription_refuses_before_anything_exists(tmp_path: Path, cloud: str) -> None:
    spec = parse_spec(stormcloud_yaml(cloud), "a.yaml")
    auto = FakeAutomation()
    prov = fake_cloud_provider(auto, spec, tmp_path)
    prov.env = {}
    prov.adc_project = lambda: None  # nothing on GCE metadata either (never asked here)
    found = prov.preflight(spec.topology())
    assert [f.status for f in found] == [FAIL]
    assert ("gcloud config set project" if cloud == "gcp" else "az account set") in found[0].fix
    run_dir = tmp_path / spec.name / "r"
    run_dir.mkdir(parents=True)
    with pytest.raises(ProvisionError, match=r"project|subscription"):
        prov.provision(spec.topology(), run_dir)
    assert auto.events == [] and not (run_dir / "stacks").exists()


def test_the_gce_metadata_project_is_the_last_resort(tmp_path: Path) -> None:
    spec = parse_spec(stormcloud_yaml("gcp"), "a.yaml")
    prov = fake_cloud_provider(FakeAutomation(), spec, tmp_path)
    prov.env = {}
    prov.adc_project = lambda: "from-metadata"
    found = prov.preflight(spec.topology())
    assert found[0].check == "gcp project" and found[0].status == OK
    assert found[0].detail.startswith("from-metadata (from the application default credentials")
    prov.env = {"GOOGLE_CLOUD_PROJECT": "from-env"}
    assert prov.preflight(spec.topology())[0].detail.startswith("from-env")


def test_the_resolved_project_and_subscription_reach_the_program(tmp_path: Path) -> None:
    for cloud, key, value in (("gcp", "gcp:project", "cloudbench-test"),
                              ("azure", "azure-native:subscriptionId", "00000000-0000-0000-0000-000000000001")):
        spec = parse_spec(stormcloud_yaml(cloud), "a.yaml")
        auto = FakeAutomation()
        prov = fake_cloud_provider(auto, spec, tmp_path)
        run_dir = tmp_path / spec.name / "r"
        run_dir.mkdir(parents=True, exist_ok=True)
        cluster = prov.provision(spec.topology(), run_dir)
        (config,) = auto.config.values()
        assert config[key] == (value, False)
        prov.destroy(cluster)


def test_generated_mode_builds_its_fetcher_in_the_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing SDK shows before `up`, not after every VM exists."""
    import builtins

    real_import = builtins.__import__

    def no_boto3(name: str, *args: Any, **kw: Any) -> Any:
        if name == "boto3" or name.startswith("boto3."):
            raise ImportError("No module named 'boto3'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_boto3)
    monkeypatch.delitem(__import__("sys").modules, "boto3", raising=False)
    spec = parse_spec(stormcloud_yaml("aws", "host_keys: generated"), "a.yaml")
    auto = FakeAutomation()
    prov = fake_cloud_provider(auto, spec, tmp_path)
    found = prov.preflight(spec.topology())
    assert [(f.check, f.status) for f in found] == [("aws SDK", FAIL)]
    assert "boto3" in found[0].detail and found[0].fix == "pip install 'cloudbench[aws]'"
    run_dir = tmp_path / spec.name / "r"
    run_dir.mkdir(parents=True)
    with pytest.raises(ProvisionError, match="boto3"):
        prov.provision(spec.topology(), run_dir)
    assert auto.events == []


# -- AWS on moto --------------------------------------------------------------------------------
AWS_CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                      "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                      "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN")


def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credential source at all: no variables, no files, no instance metadata (never asked)."""
    for var in AWS_CREDENTIAL_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A boto3 session on moto, with credentials only from the environment."""
    moto = pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    with moto.mock_aws():
        yield boto3.session.Session()


def set_quotas(monkeypatch: pytest.MonkeyPatch, values: dict[tuple[str, str], float],
               regions: tuple[str, ...] = ("us-east-1", "us-east-2", "us-west-2")) -> None:
    """moto's Service Quotas knows only the VPC defaults: answer these applied values too."""
    from moto.servicequotas.models import ServiceQuotasBackend

    original = ServiceQuotasBackend.get_service_quota

    def get(self: Any, service_code: str, quota_code: str) -> dict[str, Any]:
        if (service_code, quota_code) in values and self.region_name in regions:
            return {"ServiceCode": service_code, "QuotaCode": quota_code, "QuotaName": quota_code,
                    "Value": values[(service_code, quota_code)], "Unit": "None", "Adjustable": True,
                    "GlobalQuota": False}
        return original(self, service_code, quota_code)

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get)


AWS_SPEC = """\
name: quota-aws
providers:
  aws:
    controller_cidr: 203.0.113.7/32
    regions:
      us-east-1:
        zones:
          us-east-1a: {subnets: {s1: {hosts: 3, vm_type: m5.large}}}
          us-east-1e: {subnets: {s2: {hosts: 1, vm_type: m5.large}}}
      us-west-2:
        zones:
          us-west-2a: {subnets: {s3: {hosts: 2, vm_type: m5.xlarge}}}
workloads:
  - {kind: echo, duration: 10s}
"""


def by_check(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.check, []).append(f)
    return out


def test_aws_preflight_names_each_unoffered_type_and_missing_quota(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # us-east-1: 8 standard vCPUs allowed, one m5.large already running (2) + 4 more asked (8) > 8;
    # four VPCs made by hand beside the default one fill the 5 a region has.
    set_quotas(monkeypatch, {("ec2", "L-1216C47A"): 8.0}, regions=("us-east-1",))
    ec2 = aws.client("ec2", region_name="us-east-1")
    for i in range(4):
        ec2.create_vpc(CidrBlock=f"10.{i}.0.0/16")
    ec2.run_instances(ImageId="ami-12c6146b", InstanceType="m5.large", MinCount=1, MaxCount=1)
    spec = parse_spec(AWS_SPEC, "q.yaml")
    found = acc.check_account(acc.AwsAccount(aws), spec.topology())
    checks = by_check(found)
    assert checks["aws credentials"][0].status == OK and "123456789012" in checks["aws credentials"][0].detail
    (unoffered,) = [f for f in found if f.blocks and f.check == "aws us-east-1e offer"]
    assert "m5.large" in unoffered.detail and "us-east-1e" in unoffered.detail
    assert "us-east-1a" in unoffered.fix  # where it is offered
    assert [f.status for f in checks["aws us-east-1a offer"]] == [OK]
    east = {f.detail.split(":")[0]: f for f in checks["aws us-east-1 quota"]}
    vcpu = east["Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances vCPUs (L-1216C47A)"]
    assert vcpu.status == FAIL and "needs 8 vCPUs, 2 of 8 vCPUs in use" in vcpu.detail and "10" in vcpu.fix
    vpcs = east["VPCs per Region (L-F678F1CE)"]
    assert vpcs.status == FAIL and "needs 1, 5 of 5 in use" in vpcs.detail
    assert east["Internet gateways per Region (L-A4707A72)"].status == OK
    # us-west-2: the vCPU quota is not readable on moto (no default either): a warning, not a pass
    west = {f.detail.split(":")[0]: f for f in checks["aws us-west-2 quota"]}
    assert west["Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances vCPUs (L-1216C47A)"].status == WARN
    assert "needs 8 vCPUs" in west["Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances vCPUs "
                                   "(L-1216C47A)"].detail  # 2 x m5.xlarge, from DescribeInstanceTypes
    assert west["VPCs per Region (L-F678F1CE)"].status == OK
    assert sorted(f.check for f in found if f.blocks) == ["aws us-east-1 quota", "aws us-east-1 quota",
                                                         "aws us-east-1e offer"]


def test_aws_preflight_passes_an_account_with_room(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    set_quotas(monkeypatch, {("ec2", "L-1216C47A"): 64.0})
    spec = parse_spec(stormcloud_yaml("aws"), "a.yaml")
    found = acc.check_account(acc.AwsAccount(aws), spec.topology())
    assert [f for f in found if f.status != OK] == []
    assert len([f for f in found if f.check.endswith(" offer")]) == 5  # a (zone, type) each


def test_aws_credentials_are_checked_live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No source at all: the live call fails (nothing left the machine: no IMDS, moto intercepts)."""
    moto = pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    no_aws_credentials(monkeypatch, tmp_path)
    with moto.mock_aws(config={"core": {"mock_credentials": False}}):
        found = acc.check_account(acc.AwsAccount(boto3.session.Session(region_name="us-east-1")),
                                  parse_spec(stormcloud_yaml("aws"), "a.yaml").topology())
    assert [(f.check, f.status) for f in found] == [("aws credentials", FAIL)]
    assert "NoCredentials" in found[0].detail and "instance profile" in found[0].fix


def test_aws_vcpu_quota_codes_by_family() -> None:
    assert acc.aws_vcpu_quota("m5.large") == acc.AWS_VCPU_QUOTAS["standard"]
    assert acc.aws_vcpu_quota("c7gn.16xlarge") == acc.AWS_VCPU_QUOTAS["standard"]
    assert acc.aws_vcpu_quota("g5.xlarge")[0] == "L-DB2E81BA"  # type: ignore[index]
    assert acc.aws_vcpu_quota("inf2.xlarge")[0] == "L-1945791B"  # type: ignore[index]
    assert acc.aws_vcpu_quota("p4d.24xlarge")[0] == "L-417A185B"  # type: ignore[index]
    assert acc.aws_vcpu_quota("x2idn.16xlarge")[0] == "L-7295265B"  # type: ignore[index]
    assert acc.aws_vcpu_quota("trn1.2xlarge")[0] == "L-2C3B7624"  # type: ignore[index]
    assert acc.aws_vcpu_quota("u-6tb1.metal")[0] == "L-43DA4232"  # type: ignore[index]


def test_the_provider_refuses_before_up_with_every_finding(aws: Any, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    set_quotas(monkeypatch, {("ec2", "L-1216C47A"): 4.0})
    spec = parse_spec(AWS_SPEC, "q.yaml")
    auto = FakeAutomation()
    prov = fake_cloud_provider(auto, spec, tmp_path)
    prov.account = lambda cloud, target: acc.AwsAccount(aws)
    run_dir = tmp_path / spec.name / "r"
    run_dir.mkdir(parents=True)
    with pytest.raises(ProvisionError) as e:
        prov.provision(spec.topology(), run_dir)
    text = str(e.value)
    assert "us-east-1e" in text and "m5.large" in text and "L-1216C47A" in text and "needs 8 vCPUs" in text
    assert auto.events == [] and not (run_dir / "stacks").exists()


# -- GCP: the real compute_v1 clients over StubHttp ---------------------------------------------
def gcp_account(http: Any) -> acc.GcpAccount:
    compute_v1 = pytest.importorskip("google.cloud.compute_v1")
    from cloudbench.testing.cloudapis import gcp_client

    return acc.GcpAccount("p", gcp_client(compute_v1.RegionsClient, http), gcp_client(compute_v1.ProjectsClient, http),
                          gcp_client(compute_v1.MachineTypesClient, http), who=lambda: "sa@p.iam.gserviceaccount.com")


def q(metric: str, limit: float, usage: float) -> dict[str, Any]:
    return {"metric": metric, "limit": limit, "usage": usage}


def gcp_rules(region_quotas: dict[str, list[dict[str, Any]]], project_quotas: list[dict[str, Any]],
              missing: set[tuple[str, str]]) -> list[Any]:
    def machine_type(call: Any) -> Any:
        zone, name = call.path.split("/")[-3], call.path.split("/")[-1]
        return {"name": name, "zone": zone, "guestCpus": int(name.rsplit("-", 1)[-1])}

    rules: list[Any] = [("GET", rf"/zones/{z}/machineTypes/{t}$", 404,
                         {"error": {"code": 404, "message": f"The resource '{t}' was not found"}})
                        for z, t in missing]
    rules.append(("GET", r"/zones/[^/]+/machineTypes/[^/]+$", 200, machine_type))
    rules += [("GET", rf"^/compute/v1/projects/p/regions/{r}$", 200, {"name": r, "quotas": qs})
              for r, qs in region_quotas.items()]
    rules.append(("GET", r"^/compute/v1/projects/p$", 200, {"name": "p", "quotas": project_quotas}))
    return rules


def test_gcp_preflight_names_each_missing_machine_type_and_quota() -> None:
    from cloudbench.testing.cloudapis import StubHttp

    spec = parse_spec(stormcloud_yaml("gcp"), "g.yaml")  # 6 x n2-standard-2 in us-east1, 1 each elsewhere
    roomy = [q("CPUS", 24, 0), q("N2_CPUS", 24, 0), q("IN_USE_ADDRESSES", 8, 0)]
    http = StubHttp(gcp_rules(
        {"us-east1": [q("CPUS", 24, 0), q("N2_CPUS", 8, 2), q("IN_USE_ADDRESSES", 8, 4)],
         "us-east4": roomy, "us-west1": roomy},
        [q("NETWORKS", 5, 5), q("FIREWALLS", 200, 3), q("SUBNETWORKS", 100, 2), q("CPUS_ALL_REGIONS", 32, 2)],
        missing={("us-east1-d", "n2-standard-2")}))
    found = acc.check_account(gcp_account(http), spec.topology())
    checks = by_check(found)
    assert "sa@p.iam" in checks["gcp credentials"][0].detail and "project p" in checks["gcp credentials"][0].detail
    (unoffered,) = checks["gcp us-east1-d offer"]
    assert unoffered.status == FAIL and "n2-standard-2" in unoffered.detail and "us-east1-d" in unoffered.detail
    east = {f.detail.split(":")[0]: f for f in checks["gcp us-east1 quota"]}
    # the region's 6 VMs (also the one whose zone must change): 12 vCPUs of N2 against 8, 2 in use
    assert east["N2_CPUS"].status == FAIL and "needs 12, 2 of 8 in use" in east["N2_CPUS"].detail
    assert east["IN_USE_ADDRESSES"].status == FAIL and "needs 6, 4 of 8 in use" in east["IN_USE_ADDRESSES"].detail
    assert "CPUS" not in east  # N2 has its own quota here
    project = {f.detail.split(":")[0]: f for f in checks["gcp project quota"]}
    assert project["NETWORKS (p)"].status == FAIL and "needs 1, 5 of 5 in use" in project["NETWORKS (p)"].detail
    assert project["SUBNETWORKS (p)"].status == OK and "needs 6" in project["SUBNETWORKS (p)"].detail
    assert project["FIREWALLS (p)"].status == OK
    # requests went where the API has them
    paths = {c.path for c in http.calls}
    assert "/compute/v1/projects/p/zones/us-east1-b/machineTypes/n2-standard-2" in paths
    assert "/compute/v1/projects/p/regions/us-west1" in paths and "/compute/v1/projects/p" in paths
    assert all(c.method == "GET" for c in http.calls)  # read-only


def test_gcp_cpu_metric_is_the_family_s_where_the_region_has_one() -> None:
    assert acc.gcp_cpu_metric("n2-standard-2", ["CPUS", "N2_CPUS"]) == "N2_CPUS"
    assert acc.gcp_cpu_metric("n2d-standard-2", ["CPUS", "N2_CPUS"]) == "CPUS"
    assert acc.gcp_cpu_metric("n1-standard-2", ["CPUS", "N1_CPUS"]) == "CPUS"
    assert acc.gcp_cpu_metric("c3-standard-4", ["C3_CPUS"]) == "C3_CPUS"


# -- Azure: the real management clients over StubHttp -------------------------------------------
def sku(name: str, family: str, vcpus: int, zones: list[str], restrictions: list[Any] | None = None) -> dict[str, Any]:
    return {"resourceType": "virtualMachines", "name": name, "family": family, "locations": ["eastus"],
            "locationInfo": [{"location": "eastus", "zones": zones}],
            "capabilities": [{"name": "vCPUs", "value": str(vcpus)}], "restrictions": restrictions or []}


def usage(name: str, limit: int, current: int, label: str = "") -> dict[str, Any]:
    return {"name": {"value": name, "localizedValue": label or name}, "limit": limit, "currentValue": current,
            "unit": "Count"}


def test_azure_preflight_names_restricted_skus_and_quotas() -> None:
    pytest.importorskip("azure.mgmt.compute")
    from azure.mgmt.compute import ComputeManagementClient
    from azure.mgmt.network import NetworkManagementClient

    from cloudbench.testing.cloudapis import StubCredential, StubHttp, azure_client

    restricted = {"type": "Zone", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription",
                  "restrictionInfo": {"locations": ["eastus"], "zones": ["3"]}}
    skus = {"eastus": [sku("Standard_D2s_v3", "standardDSv3Family", 2, ["1", "2", "3"], [restricted])],
            "eastus2": [sku("Standard_D2s_v3", "standardDSv3Family", 2, ["2", "3"])],
            "westus2": [sku("Standard_D2s_v3", "standardDSv3Family", 2, ["1", "2", "3"],
                            [{"type": "Location", "values": ["westus2"],
                              "reasonCode": "NotAvailableForSubscription"}])]}
    for s in skus["eastus2"] + skus["westus2"]:
        s["locations"] = [next(r for r, v in skus.items() if s in v)]
        s["locationInfo"][0]["location"] = s["locations"][0]
    compute_usages = [usage("cores", 10, 0, "Total Regional vCPUs"),
                      usage("standardDSv3Family", 10, 4, "Standard DSv3 Family vCPUs")]
    network_usages = [usage("VirtualNetworks", 50, 0), usage("NetworkSecurityGroups", 100, 0),
                      usage("StandardSkuPublicIpAddresses", 10, 8)]

    def skus_of(call: Any) -> Any:
        region = call.query["$filter"][0].split("'")[1]
        return {"value": skus[region]}

    http = StubHttp([
        ("GET", r"/providers/Microsoft.Compute/skus\?", 200, skus_of),
        ("GET", r"/providers/Microsoft.Compute/locations/[a-z0-9]+/usages\?", 200, {"value": compute_usages}),
        ("GET", r"/providers/Microsoft.Network/locations/[a-z0-9]+/usages\?", 200, {"value": network_usages}),
    ])
    cred = StubCredential()
    account = acc.AzureAccount("sub-1", azure_client(ComputeManagementClient, http, credential=cred),
                               azure_client(NetworkManagementClient, http, credential=cred), cred)
    found = acc.check_account(account, parse_spec(stormcloud_yaml("azure"), "z.yaml").topology())
    checks = by_check(found)
    assert checks["azure credentials"][0].status == OK and cred.scopes[0] == ("https://management.azure.com/.default",)
    assert [f.status for f in checks["azure eastus-3 offer"]] == [FAIL]
    assert "zone 3 of eastus" in checks["azure eastus-3 offer"][0].detail
    assert "NotAvailableForSubscription" in checks["azure eastus-3 offer"][0].detail
    assert "zone 1 of eastus2" in checks["azure eastus2-1 offer"][0].detail  # offered in 2 and 3 only
    assert "restricted in westus2" in checks["azure westus2-1 offer"][0].detail
    east = {f.detail.split(":")[0]: f for f in checks["azure eastus quota"]}
    # the region's 6 VMs: 12 vCPUs against the family's 10 with 4 in use, and the regional 10
    fam = east["Standard DSv3 Family vCPUs (standardDSv3Family)"]
    assert fam.status == FAIL and "needs 12 vCPUs, 4 of 10 vCPUs in use" in fam.detail
    assert east["Total Regional vCPUs (cores)"].status == FAIL
    ips = east["StandardSkuPublicIpAddresses (StandardSkuPublicIpAddresses)"]
    assert ips.status == FAIL and "needs 6, 8 of 10 in use" in ips.detail  # a public IP per host
    targets = {c.target.split("?")[0] for c in http.calls}
    assert "/subscriptions/sub-1/providers/Microsoft.Compute/locations/eastus/usages" in targets
    assert "/subscriptions/sub-1/providers/Microsoft.Network/locations/eastus/usages" in targets
    assert all(c.method == "GET" for c in http.calls)
