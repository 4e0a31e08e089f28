"""The cloud programs under Pulumi mocks, the Automation driver with a fake, the reaper, spec checks.

For each cloud the StormCloud topology (8 hosts; 3 regions; the main region has
3 zones, one of them with 2 subnets) is built under ``pulumi.runtime.set_mocks``
and the recorded resources are checked: VMs in the right zones and subnets, no
ingress from 0.0.0.0/0, SSH only from the controller, worker ports only from
the campaign's subnets, tags everywhere, outputs that make a Cluster.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import signal
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pulumi
import pytest

from cloudbench.core import catalog
from cloudbench.core.topology import Topology
from cloudbench.errors import CloudbenchError, ProvisionError, ReapError, SpecError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds import leases as cls
from cloudbench.providers.clouds import passphrase as cpw
from cloudbench.providers.clouds import provider as cpv
from cloudbench.providers.clouds import stack as cst
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import CloudProviderModel
from cloudbench.testing.pulumi import FakeAutomation, fake_cloud_provider
from cloudbench.workloads import parse_spec
from tests.paths import EXPERIMENTS, ROOT

CONTROLLER = "203.0.113.7/32"  # TEST-NET-3: never contacted
# Workloads whose ports the firewalls must open (and no other): derived from the spec.
PORT_WORKLOADS = """\
  - {kind: echo, duration: 10s, port: 7300}
  - {kind: throughput, name: i3, tool: iperf3, port: 6000, duration: 10s}
  - {kind: throughput, name: nt, tool: nuttcp, port: 5500, streams: 4, duration: 10s}
  - {kind: traceroute, method: tcp-sport}
"""
OPENED = {("tcp", 7300, 7300), ("tcp", 6000, 6000), ("udp", 6000, 6000), ("tcp", 5500, 5504),
          ("udp", 5500, 5504), ("tcp", 80, 80), ("icmp", -1, -1)}

STORMCLOUD = {
    "aws": ("m5.large", {
        "us-east-1": {"us-east-1a": {"s1": 3, "s2": 1}, "us-east-1b": {"s3": 1}, "us-east-1c": {"s4": 1}},
        "us-east-2": {"us-east-2a": {"s5": 1}},
        "us-west-2": {"us-west-2a": {"s6": 1}},
    }),
    "gcp": ("n2-standard-2", {
        "us-east1": {"us-east1-b": {"s1": 3, "s2": 1}, "us-east1-c": {"s3": 1}, "us-east1-d": {"s4": 1}},
        "us-east4": {"us-east4-a": {"s5": 1}},
        "us-west1": {"us-west1-a": {"s6": 1}},
    }),
    "azure": ("Standard_D2s_v3", {
        "eastus": {"eastus-1": {"s1": 3, "s2": 1}, "eastus-2": {"s3": 1}, "eastus-3": {"s4": 1}},
        "eastus2": {"eastus2-1": {"s5": 1}},
        "westus2": {"westus2-1": {"s6": 1}},
    }),
}


def stormcloud_yaml(cloud: str, extra: str = "", vm_type: str | None = None, workloads: str | None = None) -> str:
    default_type, regions = STORMCLOUD[cloud]
    lines = [f"name: stormcloud-{cloud}", "providers:", f"  {cloud}:",
             f"    controller_cidr: {CONTROLLER}"]
    lines += ["    " + x for x in extra.splitlines() if x.strip()]
    lines.append("    regions:")
    for r, zones in regions.items():
        lines += [f"      {r}:", "        zones:"]
        for z, subnets in zones.items():
            lines += [f"          {z}:", "            subnets:"]
            for s, n in subnets.items():
                lines.append(f"              {s}: {{hosts: {n}, vm_type: {vm_type or default_type}}}")
    lines += ["workloads:", *(workloads.splitlines() if workloads else ["  - kind: echo", "    duration: 10s"])]
    return "\n".join(lines) + "\n"


def stormcloud(cloud: str, workloads: str | None = None) -> Spec:
    return parse_spec(stormcloud_yaml(cloud, "placement_group: true", workloads=workloads), f"{cloud}.yaml")


def settings_for(topo: Topology, cloud: str, stack: str = "test-r01") -> cc.CloudSettings:
    client = asyncssh.generate_private_key("ssh-ed25519")
    return cc.CloudSettings(
        cloud=cloud, campaign=f"stormcloud-{cloud}", stack=stack, owner="alice",
        expiry_utc="2030-01-01T00:00:00Z", controller_cidr=CONTROLLER,
        client_public_key=client.export_public_key().decode().strip(),
        host_keys=cc.new_host_keys([h.name for h in topo.hosts], stack), placement_group=True)


# This account's mapping of zone names to zone IDs (another account maps them differently).
AWS_ZONE_IDS = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1",
                "us-east-2a": "use2-az3", "us-west-2a": "usw2-az2"}


# -- Pulumi mocks ------------------------------------------------------------------------------
class RecordingMocks(pulumi.runtime.Mocks):
    """Records every resource; gives VMs addresses from the subnet they were put in."""

    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []
        self.calls: list[pulumi.runtime.MockCallArgs] = []
        self.cidr: dict[str, str] = {}  # subnet id -> CIDR
        self.used: dict[str, int] = {}

    def _address(self, subnet_id: str) -> str:
        net = ipaddress.ip_network(self.cidr[subnet_id])
        self.used[subnet_id] = self.used.get(subnet_id, 9) + 1
        return str(net.network_address + self.used[subnet_id])

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        rid = f"{args.name}-id"
        state = dict(args.inputs)
        public = f"203.0.113.{len(self.resources) % 250 + 1}"
        if args.typ == "aws:ec2/subnet:Subnet":
            self.cidr[rid] = args.inputs["cidrBlock"]
            state["availabilityZoneId"] = AWS_ZONE_IDS[args.inputs["availabilityZone"]]
        elif args.typ == "gcp:compute/subnetwork:Subnetwork":
            self.cidr[rid] = args.inputs["ipCidrRange"]
            state["selfLink"] = rid
        elif args.typ == "azure-native:network:Subnet":
            self.cidr[rid] = args.inputs["addressPrefix"]
        elif args.typ == "aws:ec2/instance:Instance":
            state.update(privateIp=self._address(args.inputs["subnetId"]), publicIp=public)
        elif args.typ == "gcp:compute/instance:Instance":
            nic = dict(args.inputs["networkInterfaces"][0])
            nic["networkIp"] = self._address(nic["subnetwork"])
            nic["accessConfigs"] = [{"natIp": public}]
            state["networkInterfaces"] = [nic]
        elif args.typ == "azure-native:network:NetworkInterface":
            cfg = dict(args.inputs["ipConfigurations"][0])
            cfg["privateIPAddress"] = self._address(cfg["subnet"]["id"])
            state["ipConfigurations"] = [cfg]
        elif args.typ == "azure-native:network:PublicIPAddress":
            state["ipAddress"] = public
        elif args.typ == "gcp:compute/resourcePolicy:ResourcePolicy":
            state["selfLink"] = rid
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        # A bare dict: the (result, None) tuple the base class declares crashes pulumi's mock monitor.
        self.calls.append(args)
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": "ami-0123456789abcdef0", "architecture": "x86_64"}
        return {}

    def of(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.resources if r.typ == typ]

    def by_id(self, rid: str) -> pulumi.runtime.MockResourceArgs:
        return next(r for r in self.resources if f"{r.name}-id" == rid)


@pytest.fixture
def mocks(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingMocks]:
    import asyncio

    # Pulumi's runtime uses the thread's current loop, which an earlier asyncio.run() unset.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    m = RecordingMocks()
    pulumi.runtime.set_mocks(m, project="cloudbench-test", stack="test", preview=False)
    yield m
    pulumi.runtime.settings.reset_options()  # the next test starts from a clean runtime
    asyncio.set_event_loop(None)
    loop.close()


def run_program(cloud: str, topo: Topology, settings: cc.CloudSettings,
                monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the cloud's program under the installed mocks; returns its exports, resolved."""
    import importlib

    module = importlib.import_module(f"cloudbench.providers.clouds.programs.{cloud}")
    exports: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda k, v: exports.__setitem__(k, v))
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def run() -> pulumi.Output[None]:
        module.program(topo.to_dict(), settings)
        return pulumi.Output.from_input(exports).apply(resolved.update)

    run()
    return resolved


def stack_inputs(auto: FakeAutomation, stack: str) -> cc.CloudSettings:
    """The settings the driver gave the program of ``stack`` (read from its program file)."""
    return cc.read_program_file(auto.config[stack][cc.PROGRAM_FILE_KEY][0])[1]


def check_cluster(cloud: str, topo: Topology, settings: cc.CloudSettings, outputs: dict[str, Any],
                  subnet_cidr: Callable[[str], str], tmp_path: Path) -> None:
    """The outputs make the same kind of Cluster the netns provider returns."""
    cluster = cpv.cluster_from_outputs(cloud, settings.stack, topo, outputs, settings, tmp_path / "k")
    assert [h.name for h in cluster.hosts] == [h.name for h in topo.hosts]
    for h in cluster.hosts:
        assert ipaddress.ip_address(h.address) in ipaddress.ip_network(subnet_cidr(h.name)), h.name
        assert ipaddress.ip_address(h.ssh_host) in ipaddress.ip_network("203.0.113.0/24")
        assert h.user == "ubuntu" and h.workdir == "/home/ubuntu/cloudbench" and h.ssh_port == 22
        assert h.host_key == settings.host_keys[h.name].public
        asyncssh.import_public_key(h.host_key)
        assert h.spec.labels()["zone"] == topo.host(h.name).zone


def check_tags(tags: dict[str, str], settings: cc.CloudSettings, what: str) -> None:
    expected = cc.gcp_labels(settings) if settings.cloud == "gcp" else cc.tags(settings)
    assert expected["cloudbench-campaign"] == settings.campaign
    for key, value in expected.items():
        assert tags.get(key) == value, (what, key, tags)


def secret_value(value: Any) -> Any:
    """The plaintext of a secret input; fails if the input was not marked secret."""
    from pulumi.runtime.rpc import _special_secret_sig, _special_sig_key

    assert isinstance(value, dict) and value.get(_special_sig_key) == _special_secret_sig, "not a secret"
    return value["value"]


def check_cloud_init(user_data: str, settings: cc.CloudSettings, host: str) -> None:
    import yaml

    assert user_data.startswith("#cloud-config\n")
    doc = yaml.safe_load(user_data)
    assert doc["ssh_keys"]["ed25519_public"] == settings.host_keys[host].public
    assert doc["ssh_keys"]["ed25519_private"].strip() == settings.host_keys[host].private.strip()
    assert doc["ssh_authorized_keys"] == [settings.client_public_key]
    assert doc["ssh_genkeytypes"] == [] and doc["ssh_pwauth"] is False
    assert set(doc["packages"]) >= {"python3", "nuttcp", "iperf3", "scamper"}


def test_aws_program(mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    topo = stormcloud("aws", PORT_WORKLOADS).topology()
    s = settings_for(topo, "aws")
    out = run_program("aws", topo, s, monkeypatch)

    subnets = {f"{r.name}-id": r.inputs for r in mocks.of("aws:ec2/subnet:Subnet")}
    assert len(subnets) == 6
    vms = {r.name.removeprefix("vm-"): r.inputs for r in mocks.of("aws:ec2/instance:Instance")}
    assert sorted(vms) == sorted(h.name for h in topo.hosts)
    vpc_of_region = {r.name.removeprefix("vpc-"): f"{r.name}-id" for r in mocks.of("aws:ec2/vpc:Vpc")}
    assert sorted(vpc_of_region) == ["us-east-1", "us-east-2", "us-west-2"]
    for h in topo.hosts:
        vm = vms[h.name]
        sn = subnets[vm["subnetId"]]
        assert sn["availabilityZone"] == h.zone
        assert sn["vpcId"] == vpc_of_region[h.region]
        assert mocks.by_id(vm["subnetId"]).name == f"subnet-{h.zone}-{h.subnet}"
        assert vm["instanceType"] == "m5.large" and vm["associatePublicIpAddress"] is True
        assert vm["metadataOptions"]["httpTokens"] == "required"
        check_tags(vm["tags"], s, h.name)
        check_cloud_init(secret_value(vm["userData"]), s, h.name)
    # Two subnets in us-east-1a, one per other zone.
    per_zone: dict[str, int] = {}
    for sn in subnets.values():
        per_zone[sn["availabilityZone"]] = per_zone.get(sn["availabilityZone"], 0) + 1
    assert per_zone == {"us-east-1a": 2, "us-east-1b": 1, "us-east-1c": 1, "us-east-2a": 1, "us-west-2a": 1}
    # Each host records its zone's ID in this account (use1-az4), besides the zone's name.
    for h in topo.hosts:
        rec = out[cc.OUTPUT_HOSTS][h.name]
        assert rec["zone"] == h.zone and rec["zone_id"] == AWS_ZONE_IDS[h.zone]

    campaign = sorted(sn["cidrBlock"] for sn in subnets.values())
    groups = mocks.of("aws:ec2/securityGroup:SecurityGroup")
    assert len(groups) == 3
    for g in groups:
        # AWS reserves the prefix sg- for group ids and refuses it in a GroupName, which
        # Pulumi derives from the resource's name when none is given.
        assert not str(g.inputs.get("name") or g.name).lower().startswith("sg-"), g.name
        opened: set[tuple[str, int, int]] = set()
        for rule in g.inputs["ingress"]:
            sources = rule.get("cidrBlocks", [])
            assert "0.0.0.0/0" not in sources and not rule.get("ipv6CidrBlocks")
            ports = (rule["protocol"], int(rule["fromPort"]), int(rule["toPort"]))
            if ports == ("tcp", 22, 22):
                assert sources == [CONTROLLER]
            else:
                assert sorted(sources) == campaign, rule
                opened.add(ports)
        assert opened == OPENED  # the spec's ports, not fixed ranges (7100 is not opened)
        check_tags(g.inputs["tags"], s, g.name)
    for p in mocks.of("pulumi:providers:aws"):
        check_tags(json.loads(p.inputs["defaultTags"])["tags"] if isinstance(p.inputs["defaultTags"], str)
                   else p.inputs["defaultTags"]["tags"], s, p.name)
    for r in mocks.resources:
        if "tags" in r.inputs:
            check_tags(r.inputs["tags"], s, r.name)
    # Regions are joined by peering (3 pairs) with a route each way.
    assert len(mocks.of("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")) == 3
    peer_routes = [r for r in mocks.of("aws:ec2/route:Route") if "vpcPeeringConnectionId" in r.inputs]
    assert len(peer_routes) == 6
    assert len(mocks.of("aws:ec2/placementGroup:PlacementGroup")) == 5  # one per zone
    assert {c.token for c in mocks.calls} == {"aws:ec2/getAmi:getAmi"}
    check_cluster("aws", topo, s, out, lambda n: subnets[vms[n]["subnetId"]]["cidrBlock"], tmp_path)


def test_gcp_program(mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    topo = stormcloud("gcp", PORT_WORKLOADS).topology()
    s = settings_for(topo, "gcp")
    out = run_program("gcp", topo, s, monkeypatch)

    subnets = {f"{r.name}-id": r.inputs for r in mocks.of("gcp:compute/subnetwork:Subnetwork")}
    assert len(subnets) == 6
    assert len(mocks.of("gcp:compute/network:Network")) == 1
    vms = {r.name.removeprefix("vm-"): r.inputs for r in mocks.of("gcp:compute/instance:Instance")}
    assert sorted(vms) == sorted(h.name for h in topo.hosts)
    target = cc.cloud_slug(f"cb-{s.stack}", 63)
    for h in topo.hosts:
        vm = vms[h.name]
        assert vm["zone"] == h.zone and vm["machineType"] == "n2-standard-2"
        sid = vm["networkInterfaces"][0]["subnetwork"]
        assert subnets[sid]["region"] == h.region
        assert mocks.by_id(sid).name == cc.gcp_name(f"cloudbench-subnet-{h.zone}-{h.subnet}")
        assert vm["networkInterfaces"][0]["accessConfigs"] == [{}]
        assert vm["tags"] == [target]
        meta = secret_value(vm["metadata"])  # the map holds the user-data, so all of it is secret
        assert meta["block-project-ssh-keys"] == "true" and meta["enable-oslogin"] == "FALSE"
        assert meta["ssh-keys"] == f"ubuntu:{s.client_public_key}"
        assert vm["resourcePolicies"] == f"cloudbench-placement-{h.zone}-id"
        check_tags(vm["labels"], s, h.name)
        check_tags(vm["bootDisk"]["initializeParams"]["labels"], s, h.name)
        check_cloud_init(meta["user-data"], s, h.name)

    campaign = sorted(sn["ipCidrRange"] for sn in subnets.values())
    rules = mocks.of("gcp:compute/firewall:Firewall")
    assert len(rules) == 2
    opened: set[tuple[str, int, int]] = set()
    for rule in rules:
        r = rule.inputs
        assert r["direction"] == "INGRESS" and r["targetTags"] == [target]
        assert "0.0.0.0/0" not in r["sourceRanges"]
        for allow in r["allows"]:
            for spec_ in allow.get("ports", ["-1"]):
                lo, _, hi = spec_.partition("-") if spec_ != "-1" else ("-1", "", "-1")
                ports = (allow["protocol"], int(lo), int(hi or lo))
                if ports == ("tcp", 22, 22):
                    assert r["sourceRanges"] == [CONTROLLER] and len(r["allows"]) == 1
                else:
                    assert sorted(r["sourceRanges"]) == campaign
                    opened.add(ports)
    assert opened == OPENED  # the spec's ports, not fixed ranges (7100 is not opened)
    # Every zone with hosts gets a compact placement policy in its region.
    assert len(mocks.of("gcp:compute/resourcePolicy:ResourcePolicy")) == 5
    check_cluster("gcp", topo, s, out,
                  lambda n: subnets[vms[n]["networkInterfaces"][0]["subnetwork"]]["ipCidrRange"], tmp_path)


def test_azure_program(mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    topo = stormcloud("azure", PORT_WORKLOADS).topology()
    s = settings_for(topo, "azure")
    out = run_program("azure", topo, s, monkeypatch)

    subnets = {f"{r.name}-id": r.inputs for r in mocks.of("azure-native:network:Subnet")}
    assert len(subnets) == 6
    vnets = {r.name.removeprefix("vnet-"): r.inputs for r in mocks.of("azure-native:network:VirtualNetwork")}
    assert sorted(vnets) == ["eastus", "eastus2", "westus2"]
    nics = {r.name.removeprefix("nic-"): r.inputs for r in mocks.of("azure-native:network:NetworkInterface")}
    pips = {r.name.removeprefix("pip-"): r.inputs for r in mocks.of("azure-native:network:PublicIPAddress")}
    vms = {r.name.removeprefix("vm-"): r.inputs for r in mocks.of("azure-native:compute:VirtualMachine")}
    assert sorted(vms) == sorted(h.name for h in topo.hosts)
    for h in topo.hosts:
        vm, zid = vms[h.name], h.zone.rsplit("-", 1)[1]
        assert vm["zones"] == [zid] and vm["location"] == h.region and pips[h.name]["zones"] == [zid]
        assert vm["hardwareProfile"]["vmSize"] == "Standard_D2s_v3"
        assert vm["networkProfile"]["networkInterfaces"][0]["id"] == f"nic-{h.name}-id"
        sid = nics[h.name]["ipConfigurations"][0]["subnet"]["id"]
        assert mocks.by_id(sid).name == f"subnet-{h.zone}-{h.subnet}"
        net = ipaddress.IPv4Network(subnets[sid]["addressPrefix"])
        assert net.subnet_of(ipaddress.IPv4Network(vnets[h.region]["addressSpace"]["addressPrefixes"][0]))
        osp = secret_value(vm["osProfile"])  # it holds the cloud-init text
        assert osp["adminUsername"] == "ubuntu"
        assert osp["linuxConfiguration"]["disablePasswordAuthentication"] is True
        assert osp["linuxConfiguration"]["ssh"]["publicKeys"][0]["keyData"] == s.client_public_key
        check_cloud_init(base64.b64decode(osp["customData"]).decode(), s, h.name)
        check_tags(vm["tags"], s, h.name)
        assert vm["proximityPlacementGroup"]["id"] == f"ppg-{h.zone}-id"

    campaign = sorted(sn["addressPrefix"] for sn in subnets.values())
    groups = mocks.of("azure-native:network:NetworkSecurityGroup")
    assert len(groups) == 3
    for g in groups:
        opened: set[tuple[str, int, int]] = set()
        rules = g.inputs["securityRules"]
        for rule in rules:
            if rule["access"] == "Deny":
                continue
            assert rule["direction"] == "Inbound"
            sources = rule.get("sourceAddressPrefixes") or [rule["sourceAddressPrefix"]]
            assert not {"0.0.0.0/0", "*", "Internet", "VirtualNetwork", "Any"} & set(sources), rule
            lo, _, hi = rule["destinationPortRange"].partition("-")
            proto = rule["protocol"].lower()
            ports = (proto, -1, -1) if proto == "icmp" else (proto, int(lo), int(hi or lo))
            if ports == ("tcp", 22, 22):
                assert sources == [CONTROLLER]
            else:
                assert sorted(sources) == campaign
                opened.add(ports)
        assert opened == OPENED  # the spec's ports, not fixed ranges (7100 is not opened)
        # Everything else is denied explicitly, before Azure's "allow from VirtualNetwork" default.
        deny = [r for r in rules if r["access"] == "Deny"]
        assert len(deny) == 1 and deny[0]["priority"] > max(r["priority"] for r in rules if r["access"] == "Allow")
        assert deny[0]["priority"] < 65000
        for nic in nics.values():
            assert nic["networkSecurityGroup"]["id"].startswith("nsg-")
    assert len(mocks.of("azure-native:network:VirtualNetworkPeering")) == 6  # 3 pairs, both ways
    for r in mocks.resources:
        if r.typ.startswith("azure-native:") and "tags" in r.inputs:
            check_tags(r.inputs["tags"], s, r.name)
    assert all("tags" in r.inputs for r in mocks.resources
               if r.typ in ("azure-native:resources:ResourceGroup", "azure-native:network:PublicIPAddress",
                            "azure-native:network:NetworkInterface", "azure-native:network:VirtualNetwork"))
    check_cluster("azure", topo, s, out,
                  lambda n: subnets[nics[n]["ipConfigurations"][0]["subnet"]["id"]]["addressPrefix"], tmp_path)


# -- shared logic --------------------------------------------------------------------------------
def test_address_plan_uses_spec_cidrs_and_refuses_overlaps() -> None:
    spec = parse_spec(textwrap.dedent(f"""\
        name: c
        providers:
          aws:
            controller_cidr: {CONTROLLER}
            regions:
              us-east-1:
                zones:
                  us-east-1a:
                    subnets:
                      a: {{hosts: 1, vm_type: m5.large, cidr: 10.1.1.0/24}}
                      b: {{hosts: 1, vm_type: m5.large}}
              eu-west-1:
                zones:
                  eu-west-1a:
                    subnets:
                      c: {{hosts: 1, vm_type: m5.large}}
        workloads: [{{kind: echo}}]
        """), "c.yaml")
    plan = cc.plan_addresses(spec.topology())
    assert plan.subnet_cidr[("us-east-1", "us-east-1a", "a")] == "10.1.1.0/24"
    b = ipaddress.IPv4Network(plan.subnet_cidr[("us-east-1", "us-east-1a", "b")])
    assert b.subnet_of(ipaddress.IPv4Network(plan.region_cidr["us-east-1"]))
    assert not b.overlaps(ipaddress.IPv4Network("10.1.1.0/24"))
    assert not ipaddress.ip_network(plan.region_cidr["us-east-1"]).overlaps(
        ipaddress.ip_network(plan.region_cidr["eu-west-1"]))
    topo = spec.topology()
    clash = Topology(topo.hosts, [type(x)(x.name, x.provider, x.region, x.zone, "10.1.0.0/24")
                                  if x.name == "c" else x for x in topo.subnets])
    with pytest.raises(ValueError, match="overlap"):
        cc.plan_addresses(clash)


def test_programs_refuse_ssh_from_anywhere() -> None:
    topo = stormcloud("aws").topology()
    s = settings_for(topo, "aws")
    wide = cc.CloudSettings(**{**s.__dict__, "controller_cidr": "0.0.0.0/0"})
    with pytest.raises(ValueError, match="controller_cidr"):
        cc.check_settings(topo, wide)


def test_worker_ports_come_from_the_spec() -> None:
    ports = cc.worker_ports(stormcloud("aws", PORT_WORKLOADS).topology())
    assert {(proto, p.first, p.last) for p in ports for proto in p.protocols} == OPENED - {("icmp", -1, -1)}
    assert len({p.name for p in ports}) == len(ports)  # rule names are unique
    # Every traceroute method opens what its probes reach; a topology without ports gets the defaults.
    want = {"udp-dport": {("udp", 33434, 33534)}, "udp-sport": {("udp", 33435, 33435)},
            "tcp-sport": {("tcp", 80, 80)}, "icmp-echo": set()}
    for method, opened in want.items():
        topo = stormcloud("aws", f"  - {{kind: traceroute, method: {method}}}").topology()
        assert {(proto, p.first, p.last) for p in topo.ports for proto in p.protocols} == opened
    assert Topology.from_dict(stormcloud("aws").topology().to_dict()).ports == stormcloud("aws").topology().ports
    assert cc.worker_ports(Topology(hosts=[])) == list(cc.WORKER_PORTS)


# -- spec checks -----------------------------------------------------------------------------------
def test_stormcloud_example_is_valid() -> None:
    from cloudbench.workloads import load_spec

    spec = load_spec(EXPERIMENTS / "stormcloud-aws.yaml")
    topo = spec.topology()
    assert len(topo) == 8 and topo.regions == ["us-east-1", "us-east-2", "us-west-2"]
    assert topo.zones("us-east-1") == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert topo.subnets_in("us-east-1a") == ["s1", "s2"]
    assert isinstance(spec.providers["aws"], CloudProviderModel) and spec.warnings == []


@pytest.mark.parametrize(
    ("cloud", "replace", "field", "words"),
    [
        ("aws", ("us-east-2:", "us-east-9:"), "providers.aws.regions.us-east-9",
         ["unknown aws region 'us-east-9'", "us-east-"]),
        ("aws", ("us-east-1c:", "us-east-1z:"), "providers.aws.regions.us-east-1.zones.us-east-1z",
         ["zone 'us-east-1z' is not in aws region 'us-east-1'", "us-east-1a"]),
        ("gcp", ("us-east1-d:", "us-east1-a:"), "providers.gcp.regions.us-east1.zones.us-east1-a",
         ["not in gcp region 'us-east1'"]),
        ("azure", ("eastus-3:", "eastus-7:"), "providers.azure.regions.eastus.zones.eastus-7",
         ["eastus-1, eastus-2, eastus-3"]),
        ("aws", (f"controller_cidr: {CONTROLLER}", "controller_cidr: 0.0.0.0/0"),
         "providers.aws.controller_cidr", ["would open SSH"]),
    ],
)
def test_invalid_cloud_input_names_file_line_field(
        cloud: str, replace: tuple[str, str], field: str, words: list[str]) -> None:
    text = stormcloud_yaml(cloud)
    assert replace[0] in text
    bad = text.replace(replace[0], replace[1])
    with pytest.raises(SpecError) as info:
        parse_spec(bad, f"{cloud}.yaml")
    errors = getattr(info.value, "errors", [info.value])
    match = [e for e in errors if e.field == field]
    assert match, [str(e) for e in errors]
    line = next(i for i, t in enumerate(bad.splitlines(), 1) if replace[1].strip() in t)
    assert match[0].line == line and match[0].path == f"{cloud}.yaml"
    for w in words:
        assert w in match[0].message


def test_cloud_subnet_needs_a_vm_type_and_netns_refuses_cloud_keys() -> None:
    text = stormcloud_yaml("aws").replace("s6: {hosts: 1, vm_type: m5.large}", "s6: {hosts: 1}")
    with pytest.raises(SpecError, match="needs a `vm_type`"):
        parse_spec(text, "a.yaml")
    netns = textwrap.dedent("""\
        name: n
        providers:
          netns:
            controller_cidr: 10.0.0.1/32
            regions: {r1: {zones: {r1-a: {subnets: {s1: {hosts: 2}}}}}}
        workloads: [{kind: echo}]
        """)
    with pytest.raises(SpecError) as info:
        parse_spec(netns, "n.yaml")
    assert info.value.field == "providers.netns.controller_cidr" and info.value.line == 4
    assert "unknown key 'controller_cidr'; known keys: regions" in str(info.value)


def test_unknown_vm_type_warns_with_closest_names() -> None:
    spec = parse_spec(stormcloud_yaml("aws", vm_type="m5.larg"), "w.yaml")
    assert len(spec.warnings) == 6  # one per subnet
    first = spec.warnings[0]
    assert "w.yaml:" in first and "vm_type 'm5.larg'" in first and "m5.large" in first
    spec = parse_spec(stormcloud_yaml("azure", vm_type="Standard_D2s_v9"), "w.yaml")
    assert "Standard_D2s_v" in spec.warnings[0]
    assert parse_spec(stormcloud_yaml("gcp"), "ok.yaml").warnings == []


def test_unknown_provider_name_is_a_spec_error() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(stormcloud_yaml("aws").replace("  aws:", "  oracle:"), "o.yaml")
    assert "providers.oracle" in str(info.value) and "'aws'" in str(info.value)


# -- the Automation driver with a fake ----------------------------------------------------------------
def provider(auto: FakeAutomation, results: Path, spec: Spec | None = None,
             ready: Callable[[Any], None] | None = None) -> cpv.PulumiProvider:
    return fake_cloud_provider(auto, spec or stormcloud("aws"), results, "aws", ready)


def test_driver_builds_cluster_and_destroys(tmp_path: Path) -> None:
    auto = FakeAutomation()
    spec = stormcloud("aws")
    prov = provider(auto, tmp_path)
    run_dir = tmp_path / spec.name / "20250101T000000Z-abcd"
    run_dir.mkdir(parents=True)
    cluster = prov.provision(spec.topology(), run_dir)
    stack = cluster.stack
    assert stack == "20250101T000000Z-abcd-r01"
    assert len(cluster.hosts) == 8 and cluster.provider == "aws"
    assert cluster.hosts[0].ssh_host == "203.0.113.10" and cluster.hosts[0].address == "10.0.0.10"
    # Fresh client key, 0600, under the run directory; host keys pinned from what we generated.
    assert cluster.client_key.parent.parent.parent == run_dir
    assert (cluster.client_key.stat().st_mode & 0o777) == 0o600
    asyncssh.read_private_key(str(cluster.client_key))
    # No secret in the stack config (it goes to `pulumi config set-all` as arguments): the
    # program's inputs, host keys included, are in a 0600 file whose path is the config.
    cfg = auto.config[stack]
    assert set(cfg) == {cc.PROGRAM_FILE_KEY, "aws:region"}
    assert not any(secret for _, secret in cfg.values())
    assert all("PRIVATE KEY" not in value and len(value) < 1000 for value, _ in cfg.values())
    program_file = Path(cfg[cc.PROGRAM_FILE_KEY][0])
    assert program_file.is_absolute() and program_file.parent == cluster.client_key.parent
    assert (program_file.stat().st_mode & 0o777) == 0o600
    _, inputs = cc.read_program_file(program_file)
    for h in cluster.hosts:
        assert h.host_key == inputs.host_keys[h.name].public and "PRIVATE KEY" in inputs.host_keys[h.name].private
    assert inputs.controller_cidr == CONTROLLER
    # State and lease live under the campaign directory.
    lease = tmp_path / spec.name / ".pulumi" / cls.LEASES / f"cloudbench-aws.{stack}.json"
    assert "PRIVATE KEY" not in lease.read_text()
    assert json.loads(lease.read_text())["controller"]["pid"] == os.getpid()
    prov.destroy(cluster)
    assert auto.events[-2:] == [("destroy", stack), ("remove", stack)]
    assert not lease.exists() and auto.created == set()
    prov.destroy(cluster)  # twice is fine
    assert auto.events.count(("destroy", stack)) == 1
    # The next repetition gets a new stack name.
    assert prov.provision(spec.topology(), run_dir).stack.endswith("-r02")


def test_driver_destroys_after_failing_up_and_sigint(tmp_path: Path) -> None:
    spec = stormcloud("aws")
    run_dir = tmp_path / spec.name / "run"
    run_dir.mkdir(parents=True)
    auto = FakeAutomation()

    def fail(ref: cst.StackRef) -> None:
        raise ProvisionError("aws", ref.stack, "InsufficientInstanceCapacity (partially created)")

    auto.on_up = fail
    with pytest.raises(ProvisionError, match="InsufficientInstanceCapacity"):
        provider(auto, tmp_path).provision(spec.topology(), run_dir)
    assert [e[0] for e in auto.events] == ["stack", "up", "destroy", "remove"]
    assert auto.created == set()
    assert list((tmp_path / spec.name / ".pulumi" / cls.LEASES).glob("*.json")) == []

    auto = FakeAutomation()
    auto.on_up = lambda ref: signal.raise_signal(signal.SIGINT)  # Ctrl-C while `up` runs
    with pytest.raises(KeyboardInterrupt):
        provider(auto, tmp_path).provision(spec.topology(), run_dir)
    assert [e[0] for e in auto.events][-2:] == ["destroy", "remove"] and auto.created == set()

    # VMs that never become ready are destroyed too.
    auto = FakeAutomation()

    def not_ready(c: Any) -> None:
        raise ProvisionError("aws", c.stack, "VMs are not ready")

    with pytest.raises(ProvisionError, match="not ready"):
        provider(auto, tmp_path, ready=not_ready).provision(spec.topology(), run_dir)
    assert auto.events[-2:][0][0] == "destroy" and auto.created == set()


def test_driver_needs_controller_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLOUDBENCH_CONTROLLER_CIDR", raising=False)
    spec = parse_spec(stormcloud_yaml("aws").replace(f"    controller_cidr: {CONTROLLER}\n", ""), "a.yaml")
    auto = FakeAutomation()
    with pytest.raises(ProvisionError, match=r"controller_cidr.*checkip"):
        provider(auto, tmp_path, spec).provision(spec.topology(), tmp_path / "c" / "r")
    assert auto.events == []
    monkeypatch.setenv("CLOUDBENCH_CONTROLLER_CIDR", "198.51.100.4/32")
    (tmp_path / "c" / "r").mkdir(parents=True)
    cluster = provider(auto, tmp_path, spec).provision(spec.topology(), tmp_path / "c" / "r")
    assert stack_inputs(auto, cluster.stack).controller_cidr == "198.51.100.4/32"


def _runner_with(tmp_path: Path, auto: FakeAutomation,
                 repetition: Callable[..., Any]) -> tuple[Any, list[str]]:
    runner_mod = pytest.importorskip("cloudbench.runner")
    spec = stormcloud("aws").model_copy(update={"repetitions": 2})
    prov: list[cpv.PulumiProvider] = []

    def factory(name: str) -> Any:
        prov.append(provider(auto, tmp_path / "results", spec))
        return prov[0]

    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(stormcloud_yaml("aws"))
    runner = runner_mod.CampaignRunner(spec, str(spec_file), tmp_path / "results", provider_factory=factory)
    runner._repetition = repetition  # no SSH to fake VMs: the repetition is scripted
    return runner, [e[1] for e in auto.events if e[0] == "up"]


def test_runner_destroys_stacks_on_success_failing_trial_and_sigint(tmp_path: Path) -> None:
    async def ok(rep: int, cluster: Any) -> None:
        assert len(cluster.hosts) == 8

    auto = FakeAutomation()
    runner, _ = _runner_with(tmp_path, auto, ok)
    runner._write_summaries = lambda: None
    runner.execute()
    ups = [e[1] for e in auto.events if e[0] == "up"]
    assert len(ups) == 2 and auto.created == set()  # one fresh stack per repetition, both gone
    assert [e[1] for e in auto.events if e[0] == "destroy"] == ups

    async def failing(rep: int, cluster: Any) -> None:
        raise CloudbenchError("trial r000-t000-echo failed on s1-1")

    auto = FakeAutomation()
    runner, _ = _runner_with(tmp_path, auto, failing)
    runner._write_summaries = lambda: None
    with pytest.raises(CloudbenchError, match="trial"):
        runner.execute()
    assert auto.created == set() and ("destroy", next(e[1] for e in auto.events if e[0] == "up")) in auto.events

    async def interrupted(rep: int, cluster: Any) -> None:
        signal.raise_signal(signal.SIGINT)

    auto = FakeAutomation()
    runner, _ = _runner_with(tmp_path, auto, interrupted)
    runner._write_summaries = lambda: None
    with pytest.raises(KeyboardInterrupt):
        runner.execute()
    assert auto.created == set() and any(e[0] == "destroy" for e in auto.events)


# -- the reaper ------------------------------------------------------------------------------------
def _lease(root: Path, campaign: str, stack: str, expiry: float, pid: int | None = None,
           cmdline: str | None = None) -> Path:
    path = root / campaign / ".pulumi" / cls.LEASES / f"cloudbench-aws.{stack}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    from cloudbench.core.processes import pid_cmdline

    me = os.getpid()
    path.write_text(json.dumps({
        "cloud": "aws", "project": "cloudbench-aws", "stack": stack, "campaign": campaign,
        "expiry": expiry, "expiry_utc": "x",
        "controller": {"pid": pid or me, "cmdline": cmdline if cmdline is not None else pid_cmdline(me),
                       "host": __import__("socket").gethostname()},
    }))
    return path


def test_reaper_destroys_only_expired_or_orphaned_stacks(tmp_path: Path) -> None:
    now = time.time()
    expired = _lease(tmp_path, "a", "a-r01", now - 60)
    alive = _lease(tmp_path, "a", "a-r02", now + 3600)
    orphan = _lease(tmp_path, "b", "b-r01", now + 3600, pid=2**22 + 12345, cmdline="cloudbench run gone")
    auto = FakeAutomation()

    lines = cls.reap(tmp_path, dry_run=True, automation=auto, now=now)
    assert len(lines) == 2 and all(x.startswith("would destroy") for x in lines)
    assert auto.events == [] and expired.exists() and orphan.exists()

    lines = cls.reap(tmp_path, automation=auto, now=now)
    assert sorted(e for e in auto.events if e[0] == "destroy") == [("destroy", "a-r01"), ("destroy", "b-r01")]
    assert any("expired" in x for x in lines) and any("controller" in x and "gone" in x for x in lines)
    assert not expired.exists() and not orphan.exists() and alive.exists()
    # The destroyed stack was selected where its lease is, in its campaign's backend.
    assert cls.reap(tmp_path, automation=auto, now=now) == []


def test_reaper_keeps_lease_when_destroy_fails(tmp_path: Path) -> None:
    lease = _lease(tmp_path, "a", "a-r01", time.time() - 1)
    auto = FakeAutomation()
    auto.fail_destroy = True
    with pytest.raises(ReapError, match="fake destroy failure"):
        cls.reap(tmp_path, automation=auto)
    assert lease.exists()


def test_stack_ref_paths_follow_the_campaign_dir(tmp_path: Path) -> None:
    ref = cst.StackRef("gcp", "cloudbench-gcp", "r-r01", tmp_path / "camp" / ".pulumi")
    assert ref.backend_url == f"file://{tmp_path}/camp/.pulumi"
    assert ref.work_dir.is_relative_to(tmp_path / "camp")
    p = cpw.ensure_passphrase(ref.state_dir)
    assert (p.stat().st_mode & 0o777) == 0o600 and len(p.read_text()) > 20
    assert (ref.state_dir.stat().st_mode & 0o777) == 0o700
    assert cpw.ensure_passphrase(ref.state_dir).read_text() == p.read_text()  # stable
    # kept outside the results folder, found again through the id the state carries
    assert p == ref.passphrase_file and p.parent == cpw.secrets_dir() and not p.is_relative_to(tmp_path / "camp")
    assert not list((tmp_path / "camp").rglob(cpw.PASSPHRASE))
    assert p.name in (ref.state_dir / cpw.PASSPHRASE_ID).read_text()


def test_an_old_passphrase_beside_the_state_moves_out_and_a_missing_one_is_refused(tmp_path: Path) -> None:
    state = cpw.ensure_state_dir(tmp_path / "old" / ".pulumi")
    (state / cpw.PASSPHRASE).write_text("from-an-older-cloudbench")
    p = cpw.ensure_passphrase(state)
    assert p.read_text() == "from-an-older-cloudbench" and not (state / cpw.PASSPHRASE).exists()
    assert (p.stat().st_mode & 0o777) == 0o600
    p.unlink()  # results copied to a machine without it
    with pytest.raises(ProvisionError, match=rf"passphrase of the Pulumi state {state} is not in "
                       rf"{cpw.secrets_dir()} \(file {p.name}\): copy it there"):
        cpw.ensure_passphrase(state)


def test_the_secrets_dir_follows_the_environment(tmp_path: Path) -> None:
    assert cpw.secrets_dir({"CLOUDBENCH_SECRETS_DIR": "/s"}) == Path("/s")
    assert cpw.secrets_dir({"XDG_STATE_HOME": "/x"}) == Path("/x/cloudbench/secrets")
    assert cpw.secrets_dir({}) == Path.home() / ".local" / "state" / "cloudbench" / "secrets"


def test_pulumi_cli_entry_reads_the_stack_config(mocks: RecordingMocks, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``stacks/gcp/__main__.py`` rebuilds the program from the file the stack config names."""
    import runpy

    entry = ROOT / "stacks" / "gcp" / "__main__.py"
    runpy.run_path(str(entry), run_name="imported")  # importing does no work
    assert mocks.resources == []
    topo = stormcloud("gcp").topology()
    s = settings_for(topo, "gcp")
    cfg = cc.stack_config(topo, s, cc.write_program_file(tmp_path / "program.json", topo, s))
    assert not any(secret for _, secret in cfg.values())
    assert all("PRIVATE KEY" not in v for v, _ in cfg.values())
    pulumi.runtime.set_all_config({k: v for k, (v, _) in cfg.items()})
    exports: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda k, v: exports.__setitem__(k, v))
    try:
        @pulumi.runtime.test  # type: ignore[untyped-decorator]
        def run() -> pulumi.Output[Any]:
            runpy.run_path(str(entry), run_name="__main__")
            return pulumi.Output.from_input(exports)

        run()
    finally:
        pulumi.runtime.set_all_config({})
    vms = mocks.of("gcp:compute/instance:Instance")
    assert len(vms) == 8 and set(exports) == {cc.OUTPUT_HOSTS, cc.OUTPUT_META}
    meta = secret_value(vms[0].inputs["metadata"])
    check_cloud_init(meta["user-data"], s, vms[0].name.removeprefix("vm-"))


def test_cloudbench_works_without_the_cloud_sdks(tmp_path: Path) -> None:
    """pulumi and the cloud SDKs are extras: validating, planning and reaping never import them."""
    import subprocess
    import sys

    code = textwrap.dedent("""\
        import sys
        for m in ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_azure_native"):
            sys.modules[m] = None  # importing them now raises ImportError
        import cloudbench.cli.app, cloudbench.cost, cloudbench.providers.clouds.leases, cloudbench.providers.static
        from cloudbench.providers import get_provider
        from cloudbench.workloads import load_spec
        spec = load_spec(sys.argv[1])
        cloudbench.cost.check_budget(spec, sys.argv[1])
        print(type(get_provider("aws", spec=spec)).__name__, cloudbench.providers.clouds.leases.reap(sys.argv[2]))
        """)
    example = EXPERIMENTS / "stormcloud-aws.yaml"
    res = subprocess.run([sys.executable, "-c", code, str(example), str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "PulumiProvider []"


def test_missing_cloud_sdk_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "cloudbench.providers.clouds.programs.azure", raising=False)
    monkeypatch.setitem(sys.modules, "pulumi_azure_native", None)
    topo = stormcloud("aws").topology()
    with pytest.raises(ProvisionError, match=r"pip install 'cloudbench\[azure\]'"):
        cst.run_program("azure", topo.to_dict(), settings_for(topo, "azure"))


def test_state_paths_handed_to_pulumi_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--results results` (relative): the CLI runs in the workspace and would resolve it there."""
    monkeypatch.chdir(tmp_path)
    ref = cst.StackRef("aws", "cloudbench-aws", "s1", Path("results") / "c" / ".pulumi")
    want = tmp_path / "results" / "c" / ".pulumi"
    assert ref.state_dir == want and ref.backend_url == f"file://{want}"
    assert ref.passphrase_file.is_absolute() and ref.work_dir.is_absolute()
    lease = Path("results") / "c" / ".pulumi" / "cloudbench-leases" / "x.json"
    assert cls._ref_from_lease(lease, {"cloud": "aws", "project": "p", "stack": "s"}).state_dir == want


@pytest.mark.parametrize(("given", "rule"), [("203.0.113.7", "203.0.113.7/32"),
                                             ("203.0.113.7/24", "203.0.113.0/24")])
def test_the_controller_address_reaches_the_firewall_as_a_network(tmp_path: Path, given: str,
                                                                   rule: str) -> None:
    spec = parse_spec(stormcloud_yaml("aws").replace(CONTROLLER, given), "aws.yaml")
    auto = FakeAutomation()
    run_dir = tmp_path / spec.name / "20250101T000000Z-abcd"
    run_dir.mkdir(parents=True)
    cluster = provider(auto, tmp_path, spec).provision(spec.topology(), run_dir)
    assert stack_inputs(auto, cluster.stack).controller_cidr == rule


def test_a_bad_controller_address_from_the_environment_is_refused_before_anything_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_spec(stormcloud_yaml("aws").replace(f"    controller_cidr: {CONTROLLER}\n", ""), "aws.yaml")
    monkeypatch.setenv("CLOUDBENCH_CONTROLLER_CIDR", "0.0.0.0/0")
    auto = FakeAutomation()
    with pytest.raises(ProvisionError, match=r"\$CLOUDBENCH_CONTROLLER_CIDR\): .*would open SSH to"):
        provider(auto, tmp_path, spec).provision(spec.topology(), tmp_path / spec.name / "r")
    assert auto.events == []


def test_gcp_names_are_valid_for_subnets_the_spec_allows(mocks: RecordingMocks,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Capitals and `_` are valid in a spec's subnet names and invalid in GCE names."""
    text = stormcloud_yaml("gcp").replace("s1: {hosts: 3", "Subnet_A: {hosts: 3").replace(
        "s2: {hosts: 1", "subnet-a: {hosts: 1")
    topo = parse_spec(text, "gcp.yaml").topology()
    run_program("gcp", topo, settings_for(topo, "gcp"), monkeypatch)
    named = [r for r in mocks.resources if r.typ.startswith("gcp:compute/")]
    names = [str(r.inputs.get("name") or r.name) for r in named]
    assert len(names) == len(set(names))
    for name in names:
        assert cc.GCP_NAME.match(name) and len(name) + cc.GCP_AUTONAME_SUFFIX <= 63, name
    assert cc.gcp_name("cloudbench-subnet-us-east1-b-Subnet_A") != cc.gcp_name("cloudbench-subnet-us-east1-b-subnet-a")


@pytest.mark.parametrize(("cloud", "vm_type"), [("aws", "t3.large"), ("aws", "t4g.medium"), ("gcp", "e2-standard-2")])
def test_placement_on_series_the_cloud_refuses_is_a_spec_error(cloud: str, vm_type: str) -> None:
    text = stormcloud_yaml(cloud, "placement_group: true", vm_type=vm_type)
    with pytest.raises(SpecError) as info:
        parse_spec(text, f"{cloud}.yaml")
    msgs = str(info.value).splitlines()
    assert msgs and all(".vm_type]" in m and vm_type in m and "placement_group: false" in m for m in msgs)
    example = msgs[0].split("(e.g. ", 1)[1].split(")", 1)[0]  # the type suggested instead must fit
    assert example in catalog.vm_types(cloud) and catalog.placement_error(cloud, example) is None
    parse_spec(stormcloud_yaml(cloud, "placement_group: false", vm_type=vm_type), f"{cloud}.yaml")  # fine


def test_gcp_machines_without_persistent_disk_boot_from_hyperdisk(mocks: RecordingMocks,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    text = stormcloud_yaml("gcp", vm_type="c4a-standard-2")
    topo = parse_spec(text, "gcp.yaml").topology()
    run_program("gcp", topo, settings_for(topo, "gcp"), monkeypatch)
    disks = {r.inputs["bootDisk"]["initializeParams"]["type"] for r in mocks.of("gcp:compute/instance:Instance")}
    assert disks == {"hyperdisk-balanced"}


def test_the_cloud_extras_pin_one_major_version_that_is_installed() -> None:
    """A new major of a provider package renames resources and arguments under the programs."""
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    reqs = [Requirement(r) for cloud in ("aws", "gcp", "azure") for r in extras[cloud]]
    pulumi = [r for r in reqs if r.name.startswith("pulumi")]
    assert {r.name for r in pulumi} == {"pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-azure-native"}
    for r in pulumi:
        upper = [s for s in r.specifier if s.operator == "<"]
        lower = [s for s in r.specifier if s.operator == ">="]
        assert upper and lower, f"{r} does not pin a major version"
        assert int(upper[0].version.split(".")[0]) == int(lower[0].version.split(".")[0]) + 1, r
        assert r.specifier.contains(version(r.name)), (r, version(r.name))


# What the preflight, `host_keys: generated` and the sweeper import, per cloud, and the
# distribution that provides it: each must come with `pip install 'cloudbench[CLOUD]'`.
CLOUD_SDKS = {
    "aws": {"boto3": "boto3"},
    "gcp": {"google.cloud.compute_v1": "google-cloud-compute", "google.auth": "google-auth",
            "google.auth.transport.requests": "google-auth"},
    "azure": {"azure.identity": "azure-identity", "azure.mgmt.compute": "azure-mgmt-compute",
              "azure.mgmt.network": "azure-mgmt-network"},
}


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_each_cloud_s_extra_brings_the_sdks_its_code_imports(cloud: str) -> None:
    import importlib
    import re
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    reqs = {Requirement(r).name: Requirement(r) for r in extras[cloud]}
    for module, dist in CLOUD_SDKS[cloud].items():
        assert dist in reqs, f"cloudbench[{cloud}] does not install {dist} ({module})"
        assert reqs[dist].specifier.contains(version(dist)), (reqs[dist], version(dist))
        importlib.import_module(module)
    # and the code imports nothing of a cloud SDK that is not listed above
    code = "\n".join(p.read_text() for p in (ROOT / "cloudbench" / "providers" / "clouds").glob("*.py"))
    imported = set(re.findall(r'import_sdk\("([\w.]+)", "([\w-]+)", "(\w+)"', code))
    assert imported, "no import_sdk call found"
    for module, dist, c in imported:
        assert CLOUD_SDKS[c].get(module) == dist, (module, dist, c)


def test_program_file_is_private_and_refused_when_others_can_read_it(tmp_path: Path) -> None:
    topo = stormcloud("aws").topology()
    s = settings_for(topo, "aws")
    path = cc.write_program_file(tmp_path / "program.json", topo, s)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert cc.read_program_file(path)[1] == s
    path.chmod(0o644)
    with pytest.raises(ValueError, match="mode 644: chmod 600"):
        cc.read_program_file(path)
    with pytest.raises(ValueError, match="run directory"):
        cc.read_program_file(tmp_path / "gone.json")


def test_azure_writes_to_a_vnet_one_at_a_time(mocks: RecordingMocks, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    """Subnets and both peerings of each VNet form one dependency chain (AnotherOperationInProgress)."""
    from pulumi.runtime import mocks as pulumi_mocks

    deps: dict[str, set[str]] = {}  # resource name -> names it depends on
    register = pulumi_mocks.MockMonitor.RegisterResource

    def recording(self: Any, request: Any) -> Any:
        deps[request.name] = {u.rsplit("::", 1)[-1] for u in request.dependencies}
        return register(self, request)

    monkeypatch.setattr(pulumi_mocks.MockMonitor, "RegisterResource", recording)
    topo = stormcloud("azure").topology()
    run_program("azure", topo, settings_for(topo, "azure"), monkeypatch)

    def ancestors(name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for d in deps.get(todo.pop(), set()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    def vnets_written(name: str) -> set[str]:
        if name.startswith("subnet-"):
            zone = name.removeprefix("subnet-").rsplit("-s", 1)[0]
            return {topo.hosts[[h.zone for h in topo.hosts].index(zone)].region}
        src, dst = name.removeprefix("peer-").split("-", 1)
        return {src, dst} if dst in topo.regions else set()

    writes = [n for n in deps if n.startswith(("subnet-", "peer-"))]
    peerings = [n for n in writes if n.startswith("peer-")]
    assert len(peerings) == 6 and len([n for n in writes if n.startswith("subnet-")]) == 6
    for i, a in enumerate(writes):
        for b in writes[i + 1:]:
            if vnets_written(a) & vnets_written(b):
                assert a in ancestors(b) or b in ancestors(a), (a, b)


# -- each cloud's naming rules, on the programs' recorded inputs ---------------------------------
GCE_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")  # GCE labels: keys start with a letter
GCE_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
AWS_SG_DESCRIPTION = re.compile(r"^[a-zA-Z0-9. _\-:/()#,@\[\]+=&;{}!$*]{0,255}$")  # EC2 group and rule descriptions
AWS_TAG_VALUE = re.compile(r"^[\w\s.:/=+\-@]{0,256}$")  # letters, digits, spaces and _ . : / = + - @
AZURE_RULE_NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9._-]{0,78}[a-zA-Z0-9_])?$")
AZURE_TAG_NAME_FORBIDDEN = set("<>%&\\?/")


def awkward_settings(topo: Topology, cloud: str) -> cc.CloudSettings:
    """Settings as a real run makes them (stack from the run directory's name) with an owner
    that is a login name with capitals, a dot and an @."""
    s = settings_for(topo, cloud, stack="20250101T000000Z-ab12-r01")
    return cc.CloudSettings(**{**s.__dict__, "owner": "Alice.Smith@corp"})


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_recorded_inputs_follow_the_cloud_s_naming_rules(cloud: str, mocks: RecordingMocks,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text = stormcloud_yaml(cloud, "placement_group: true", workloads=PORT_WORKLOADS).replace(
        "s1: {hosts: 3", "Subnet_A: {hosts: 3")
    topo = parse_spec(text, f"{cloud}.yaml").topology()
    s = awkward_settings(topo, cloud)
    run_program(cloud, topo, s, monkeypatch)
    resources = [r for r in mocks.resources if not r.typ.startswith("pulumi:providers:")]
    assert resources
    if cloud == "gcp":
        for r in resources:
            name = str(r.inputs.get("name") or r.name)
            assert cc.GCP_NAME.match(name) and len(name) + cc.GCP_AUTONAME_SUFFIX <= 63, (r.typ, name)
            labels = dict(r.inputs.get("labels") or {})
            labels.update((r.inputs.get("bootDisk") or {}).get("initializeParams", {}).get("labels") or {})
            for k, v in labels.items():
                assert GCE_LABEL_KEY.match(k) and GCE_LABEL_VALUE.match(v), (r.typ, k, v)
            for tag in r.inputs.get("targetTags") or r.inputs.get("tags") or []:
                assert cc.GCP_NAME.match(tag) and len(tag) <= 63, tag
            if r.typ != "gcp:compute/instance:Instance":
                # found again by `gc --cloud gcp`: named cloudbench-…, its tags in the description
                assert name.startswith(cc.GCP_NAME_PREFIX), name
                desc = r.inputs["description"]
                assert len(desc) <= 2048
                assert cc.tags_from_description(desc)["cloudbench-expiry"] == s.expiry_utc
                assert cc.tags_from_description(desc)["cloudbench-stack"] == s.stack
    elif cloud == "aws":
        groups = mocks.of("aws:ec2/securityGroup:SecurityGroup")
        assert groups
        for g in groups:
            assert AWS_SG_DESCRIPTION.match(g.inputs["description"]), g.inputs["description"]
            for rule in g.inputs["ingress"] + g.inputs["egress"]:
                assert AWS_SG_DESCRIPTION.match(rule.get("description", "")), rule
        for r in resources:
            for k, v in (r.inputs.get("tags") or {}).items():
                assert 1 <= len(k) <= 128 and not k.lower().startswith("aws:") and AWS_TAG_VALUE.match(v), (k, v)
    else:
        for nsg in mocks.of("azure-native:network:NetworkSecurityGroup"):
            rules = nsg.inputs["securityRules"]
            for direction in {r["direction"] for r in rules}:
                prios = [r["priority"] for r in rules if r["direction"] == direction]
                assert len(prios) == len(set(prios)) and all(100 <= p <= 4096 for p in prios), prios
            assert all(AZURE_RULE_NAME.match(r["name"]) for r in rules), [r["name"] for r in rules]
        for r in resources:
            for k, v in (r.inputs.get("tags") or {}).items():
                assert len(k) <= 512 and len(v) <= 256 and not set(k) & AZURE_TAG_NAME_FORBIDDEN, (k, v)
        for rg in mocks.of("azure-native:resources:ResourceGroup"):
            assert re.fullmatch(r"[-\w.()]{1,82}", rg.name) and not rg.name.endswith("."), rg.name  # 90 with suffix


def test_the_naming_rule_checks_can_fail() -> None:
    assert not cc.GCP_NAME.match("net_1") and not GCE_LABEL_VALUE.match("2030-01-01T00:00:00Z")
    assert not AWS_SG_DESCRIPTION.match("cloudbench 'quoted' <x>") and not AWS_TAG_VALUE.match("a,b")
    assert not AZURE_RULE_NAME.match("rule-") and not AZURE_RULE_NAME.match("-rule")
