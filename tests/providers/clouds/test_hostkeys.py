"""host_keys: injected | generated — the VM's own key read from the cloud's API, with fakes."""

from __future__ import annotations

import configparser
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import asyncssh
import pytest
import yaml

from cloudbench.errors import ProvisionError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds import hostkeys as hk
from cloudbench.testing.pulumi import FakeAutomation
from cloudbench.workloads import parse_spec
from tests.providers.clouds.test_clouds import provider, settings_for, stormcloud, stormcloud_yaml


def public_key() -> str:
    return " ".join(asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2])


def console(key: str) -> str:
    """What cloud-init prints to the serial console (keys_to_console), amid boot noise."""
    return ("[    3.1] cloud-init[812]: Generating public/private ed25519 key pair.\n"
            "ci-info: no authorized SSH keys fingerprints found for user ubuntu.\n"
            "-----BEGIN SSH HOST KEY KEYS-----\n"
            f"{key} root@ip-10-100-0-10\n"
            "-----END SSH HOST KEY KEYS-----\n"
            "[   40.2] cloud-init[1001]: Cloud-init v. 24.1 finished\n")


def test_console_output_yields_the_ed25519_key() -> None:
    key = public_key()
    assert cc.host_key_from_console(console(key)) == f"{key} root@ip-10-100-0-10"
    assert cc.host_key_from_console("[ 1.0] booting\n") is None
    old, new = public_key(), public_key()
    assert cc.host_key_from_console(console(old) + console(new)).startswith(new)  # the last boot's


def test_generated_keys_put_no_private_key_anywhere_and_pin_the_published_one(tmp_path: Path) -> None:
    spec = parse_spec(stormcloud_yaml("aws", "host_keys: generated"), "a.yaml")
    hosts = spec.topology().hosts
    published = {h.name: public_key() for h in hosts}
    asked: list[str] = []

    def fetch(rec: dict[str, Any]) -> str | None:  # FakeAutomation's VM i has id i-<i>
        asked.append(rec["id"])
        return published[hosts[int(rec["id"].removeprefix("i-"))].name] + " root@vm"

    auto = FakeAutomation()
    prov = provider(auto, tmp_path, spec)
    prov.fetch_host_key = fetch
    run_dir = tmp_path / spec.name / "r"
    run_dir.mkdir(parents=True)
    cluster = prov.provision(spec.topology(), run_dir)
    assert {h.name: h.host_key for h in cluster.hosts} == published
    assert len(asked) == len(published)
    program = next(run_dir.rglob("program.json")).read_text()
    assert "PRIVATE KEY" not in program
    _, settings = cc.read_program_file(next(run_dir.rglob("program.json")))
    assert settings.host_key_mode == "generated" and settings.host_keys == {}
    user_data = cc.render_cloud_init(settings, spec.topology().hosts[0])
    doc = yaml.safe_load(user_data)
    assert "PRIVATE KEY" not in user_data and "ssh_keys" not in doc
    assert doc["ssh_genkeytypes"] == ["ed25519"] and doc["ssh"]["emit_keys_to_console"] is True
    prov.destroy(cluster)


def test_injected_stays_the_default() -> None:
    topo = stormcloud("aws").topology()
    s = settings_for(topo, "aws")
    assert s.host_key_mode == "injected"
    assert "PRIVATE KEY" in cc.render_cloud_init(s, topo.hosts[0])
    with pytest.raises(Exception, match="host_keys"):
        parse_spec(stormcloud_yaml("aws", "host_keys: both"), "a.yaml")


def test_waiting_for_keys_polls_and_names_the_silent_hosts() -> None:
    t = [0.0]
    calls: dict[str, int] = {}
    key = public_key()

    def fetch(rec: dict[str, Any]) -> str | None:
        calls[rec["id"]] = calls.get(rec["id"], 0) + 1
        return key if rec["id"] == "i-a" and calls["i-a"] >= 3 else None

    def sleep(s: float) -> None:
        t[0] += s

    records = {"a": {"id": "i-a"}, "b": {"id": "i-b"}}
    with pytest.raises(ProvisionError, match=r"after 60 s by b \(console"):
        hk.wait_for_host_keys("aws", "s", records, fetch, 60.0, poll=10.0, clock=lambda: t[0], sleep=sleep)
    assert calls["i-a"] == 3  # asked until it answered, then no more
    assert hk.wait_for_host_keys("aws", "s", {"a": {"id": "i-a"}}, lambda r: key + " c", 1.0) == {"a": key}
    with pytest.raises(ProvisionError, match="not an ed25519 key"):
        hk.wait_for_host_keys("aws", "s", {"a": {"id": "i-a"}}, lambda r: "ssh-rsa AAAA", 1.0)


def test_each_cloud_s_fetcher_reads_its_api() -> None:
    key = public_key()
    aws_calls: list[tuple[str, Any]] = []

    def ec2_client(service: str, region_name: str) -> Any:
        def get_console_output(InstanceId: str, Latest: bool) -> dict[str, str]:
            aws_calls.append((region_name, InstanceId))
            return {"Output": console(key)}
        return SimpleNamespace(get_console_output=get_console_output)

    aws = hk.aws_fetcher(session=SimpleNamespace(client=ec2_client))
    assert aws({"id": "i-1", "region": "us-east-1"}, ).startswith(key)  # type: ignore[union-attr]
    assert aws_calls == [("us-east-1", "i-1")]

    vm_id = "/subscriptions/s/resourceGroups/rg-eastus-x/providers/Microsoft.Compute/virtualMachines/vm-a"
    az_client = SimpleNamespace(virtual_machines=SimpleNamespace(
        retrieve_boot_diagnostics_data=lambda group, vm: SimpleNamespace(
            serial_console_log_blob_uri=f"https://blob/{group}/{vm}?sas")))
    got: list[str] = []
    fetch = hk.azure_fetcher("s", client=az_client, get=lambda url: got.append(url) or console(key))
    assert fetch({"id": vm_id}).startswith(key)  # type: ignore[union-attr]
    assert got == ["https://blob/rg-eastus-x/vm-a?sas"]


def test_gcp_fetcher_reads_the_guest_attribute_else_the_serial_console() -> None:
    """The real compute_v1 client: its request names and URLs are the API's."""
    compute_v1 = pytest.importorskip("google.cloud.compute_v1")
    from cloudbench.testing.cloudapis import StubHttp, gcp_client

    key, agent_key = public_key(), public_key()
    base = r"^/compute/v1/projects/p/zones/us-east1-b/instances/vm-a"
    rec = {"id": "projects/p/zones/us-east1-b/instances/vm-a", "zone": "us-east1-b"}
    not_found = {"error": {"code": 404, "message": "The resource 'hostkeys/' was not found"}}
    serial = {"contents": console(key), "start": "0", "next": "100"}
    # the agent made no key (set_host_keys = false): the console's is the one
    http = StubHttp([("GET", base + r"/getGuestAttributes\?queryPath=hostkeys/$", 404, not_found),
                     ("GET", base + r"/serialPort\?port=1$", 200, serial)])
    assert hk.gcp_fetcher("p", client=gcp_client(compute_v1.InstancesClient, http))(rec) == \
        f"{key} root@ip-10-100-0-10"
    assert [c.path.rsplit("/", 1)[-1] for c in http.calls] == ["getGuestAttributes", "serialPort"]
    # an image whose agent made the keys anyway: its published key is the final one
    attrs = {"queryValue": {"items": [{"namespace": "hostkeys", "key": "ssh-ed25519",
                                       "value": agent_key.split()[1]}]}}
    http = StubHttp([("GET", base + r"/getGuestAttributes\?queryPath=hostkeys/$", 200, attrs),
                     ("GET", base + r"/serialPort\?port=1$", 200, serial)])
    assert hk.gcp_fetcher("p", client=gcp_client(compute_v1.InstancesClient, http))(rec) == agent_key
    # neither yet: None (polled again), and an error of the API is raised, not taken for "not yet"
    http = StubHttp([("GET", base + r"/getGuestAttributes", 404, not_found),
                     ("GET", base + r"/serialPort", 200, {"contents": "[ 1.0] booting\n"})])
    assert hk.gcp_fetcher("p", client=gcp_client(compute_v1.InstancesClient, http))(rec) is None
    http = StubHttp([("GET", base + r"/getGuestAttributes", 403, {"error": {"code": 403, "message": "denied"}})])
    with pytest.raises(Exception, match="denied"):
        hk.gcp_fetcher("p", client=gcp_client(compute_v1.InstancesClient, http))(rec)


@pytest.mark.parametrize("mode", ["injected", "generated"])
def test_gcp_user_data_tells_the_guest_agent_to_keep_cloud_init_s_host_key(mode: str) -> None:
    spec = parse_spec(stormcloud_yaml("gcp", f"host_keys: {mode}"), "a.yaml")
    topo = spec.topology()
    s = settings_for(topo, "gcp")
    s = dataclasses.replace(s, host_key_mode=mode, host_keys=s.host_keys if mode == "injected" else {})
    doc = yaml.safe_load(cc.render_cloud_init(s, topo.hosts[0]))
    files = {f["path"]: f for f in doc["write_files"]}
    cfg = files["/etc/default/instance_configs.cfg"]
    parsed = configparser.ConfigParser()
    parsed.read_string(cfg["content"])
    assert parsed.getboolean("InstanceSetup", "set_host_keys") is False
    assert cfg["permissions"] == "0644" and cfg["owner"] == "root:root"
    if mode == "injected":
        assert doc["ssh_keys"]["ed25519_public"] == s.host_keys[topo.hosts[0].name].public
    # other clouds have no such agent: their user data carries no such file
    aws = settings_for(stormcloud("aws").topology(), "aws")
    assert "write_files" not in yaml.safe_load(cc.render_cloud_init(aws, stormcloud("aws").topology().hosts[0]))


def test_aws_fetcher_calls_get_console_output_as_boto3_has_it(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """On moto: a real instance, the real call; moto's console holds no key block, so None (not yet)."""
    moto = pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    from tests.providers.clouds.test_accounts import no_aws_credentials

    no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    with moto.mock_aws():
        session = boto3.session.Session()
        ec2 = session.client("ec2", region_name="us-east-2")
        (inst,) = ec2.run_instances(ImageId="ami-12c6146b", InstanceType="m5.large", MinCount=1,
                                    MaxCount=1)["Instances"]
        fetch = hk.aws_fetcher(session=session)
        assert fetch({"id": inst["InstanceId"], "region": "us-east-2"}) is None
        with pytest.raises(Exception, match="InvalidInstanceID"):
            fetch({"id": "i-0123456789abcdef0", "region": "us-east-2"})


def test_azure_fetcher_reads_boot_diagnostics_through_the_real_client() -> None:
    pytest.importorskip("azure.mgmt.compute")
    from azure.mgmt.compute import ComputeManagementClient

    from cloudbench.testing.cloudapis import StubHttp, azure_client

    key = public_key()
    http = StubHttp([("POST", r"^/subscriptions/s/resourceGroups/rg-eastus-x/providers/Microsoft.Compute/"
                      r"virtualMachines/vm-a/retrieveBootDiagnosticsData\?", 200,
                      {"serialConsoleLogBlobUri": "https://blob/serial.log?sas",
                       "consoleScreenshotBlobUri": "https://blob/shot.bmp?sas"})])
    got: list[str] = []
    fetch = hk.azure_fetcher("s", client=azure_client(ComputeManagementClient, http, subscription="s"),
                             get=lambda url: got.append(url) or console(key))
    vm_id = "/subscriptions/s/resourceGroups/rg-eastus-x/providers/Microsoft.Compute/virtualMachines/vm-a"
    assert fetch({"id": vm_id}).startswith(key)  # type: ignore[union-attr]
    assert got == ["https://blob/serial.log?sas"] and [c.method for c in http.calls] == ["POST"]
