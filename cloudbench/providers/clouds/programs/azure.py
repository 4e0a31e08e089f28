"""Azure: a resource group and VNet per region (globally peered), a subnet per spec subnet, VMs.

Spec zones are ``<region>-<n>``; the VM and its public IP go to zone ``n``. The
network security group ends with an explicit deny of all other inbound traffic,
so Azure's default "allow from VirtualNetwork" rule never applies.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_azure_native as azure

from cloudbench.core import catalog
from cloudbench.core.topology import HostSpec, PortRange, Topology
from cloudbench.providers.clouds import common as cc

IMAGE = {"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "version": "latest"}
IMAGE_SKU = {"x86_64": "server", "arm64": "server-arm64"}
OS_DISK_GB = 30
DENY_PRIORITY = 4096


def security_rules(settings: cc.CloudSettings, plan: cc.AddressPlan,
                   ports: list[PortRange]) -> list[azure.network.SecurityRuleArgs]:
    """The network security group's inbound rules: SSH from the controller; the workers' ports
    and ICMP from the campaign's subnets; then a deny of everything else, so that Azure's
    default "allow from VirtualNetwork" rule never applies."""
    rules = [azure.network.SecurityRuleArgs(
        name="ssh-from-controller", priority=100, direction="Inbound", access="Allow", protocol="Tcp",
        source_address_prefix=settings.controller_cidr, source_port_range="*",
        destination_address_prefix="*", destination_port_range=str(cc.SSH_PORT))]
    prio = 110
    for p in ports:
        for proto in p.protocols:
            rules.append(azure.network.SecurityRuleArgs(
                name=f"{p.name}-{proto}", priority=prio, direction="Inbound", access="Allow",
                protocol=proto.capitalize(), source_address_prefixes=plan.campaign_cidrs,
                source_port_range="*", destination_address_prefix="*", destination_port_range=p.text()))
            prio += 10
    rules.append(azure.network.SecurityRuleArgs(
        name="icmp-campaign", priority=prio, direction="Inbound", access="Allow", protocol="Icmp",
        source_address_prefixes=plan.campaign_cidrs, source_port_range="*",
        destination_address_prefix="*", destination_port_range="*"))
    rules.append(azure.network.SecurityRuleArgs(
        name="deny-other-inbound", priority=DENY_PRIORITY, direction="Inbound", access="Deny",
        protocol="*", source_address_prefix="*", source_port_range="*",
        destination_address_prefix="*", destination_port_range="*"))
    return rules


def _image(settings: cc.CloudSettings, vm_type: str) -> dict[str, str]:
    if settings.image:
        publisher, offer, sku, version = settings.image.split(":")
        return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}
    return {**IMAGE, "sku": IMAGE_SKU[catalog.vm_arch("azure", vm_type)]}


def program(topology_dict: Mapping[str, Any], settings: cc.CloudSettings | Mapping[str, Any]) -> None:
    """The Pulumi program of an Azure testbed: builds every resource of the topology and exports
    the stack's metadata and its hosts (addresses, zones) as outputs."""
    topo = Topology.from_dict(dict(topology_dict))
    s = cc.as_settings(settings)
    cc.check_settings(topo, s)
    if s.image and s.image.count(":") != 3:
        raise ValueError(f"azure image {s.image!r}: write publisher:offer:sku:version")
    plan = cc.plan_addresses(topo)
    regions = topo.regions
    groups, vnets, nsgs = _region_networks(topo, s, plan)

    # Azure accepts one write at a time per VNet, and the azure-native provider does not queue
    # them: subnets and peerings created in parallel fail with AnotherOperationInProgress. So
    # every write to a VNet waits for the previous one (see _after); a peering changes both of
    # its VNets.
    last_write: dict[str, pulumi.Resource] = {}
    hosts_out = _subnets_and_vms(topo, s, plan, groups, vnets, nsgs, last_write)
    _peer_regions(regions, groups, vnets, last_write)
    pulumi.export(cc.OUTPUT_META, cc.meta_output(s))
    pulumi.export(cc.OUTPUT_HOSTS, hosts_out)


def _after(last_write: dict[str, pulumi.Resource], *regions_touched: str) -> pulumi.ResourceOptions:
    """Options that make a write wait for the last write to the VNets of ``regions_touched``."""
    return pulumi.ResourceOptions(depends_on=[last_write[x] for x in dict.fromkeys(regions_touched)
                                              if x in last_write])


def _region_networks(topo: Topology, s: cc.CloudSettings, plan: cc.AddressPlan) -> tuple[
        dict[str, azure.resources.ResourceGroup], dict[str, azure.network.VirtualNetwork],
        dict[str, azure.network.NetworkSecurityGroup]]:
    """Per region: the resource group, the VNet and the network security group."""
    groups: dict[str, azure.resources.ResourceGroup] = {}
    vnets: dict[str, azure.network.VirtualNetwork] = {}
    nsgs: dict[str, azure.network.NetworkSecurityGroup] = {}
    for r in topo.regions:
        rg = azure.resources.ResourceGroup(f"rg-{r}", location=r, tags=cc.tags(s, f"rg-{r}"))
        vnets[r] = azure.network.VirtualNetwork(
            f"vnet-{r}", resource_group_name=rg.name, location=r,
            address_space=azure.network.AddressSpaceArgs(address_prefixes=[plan.region_cidr[r]]),
            tags=cc.tags(s, f"vnet-{r}"),
            # The subnets are their own resources; an update of the VNet must not drop them.
            opts=pulumi.ResourceOptions(ignore_changes=["subnets"]))
        nsgs[r] = azure.network.NetworkSecurityGroup(
            f"nsg-{r}", resource_group_name=rg.name, location=r,
            security_rules=security_rules(s, plan, cc.worker_ports(topo)), tags=cc.tags(s, f"nsg-{r}"))
        groups[r] = rg
    return groups, vnets, nsgs


def _subnets_and_vms(topo: Topology, s: cc.CloudSettings, plan: cc.AddressPlan,
                     groups: dict[str, azure.resources.ResourceGroup],
                     vnets: dict[str, azure.network.VirtualNetwork],
                     nsgs: dict[str, azure.network.NetworkSecurityGroup],
                     last_write: dict[str, pulumi.Resource]) -> dict[str, Any]:
    """A subnet per spec subnet (one VNet write after another), a proximity placement group per
    zone if asked for, and the VMs; returns the hosts output (name → record)."""
    placement: dict[str, azure.compute.ProximityPlacementGroup] = {}
    hosts_out: dict[str, Any] = {}
    for (r, zone, subnet), members in cc.hosts_by_subnet(topo).items():
        rg = groups[r]
        zid = catalog.zone_id("azure", zone)
        sn = azure.network.Subnet(
            f"subnet-{zone}-{subnet}", resource_group_name=rg.name, virtual_network_name=vnets[r].name,
            address_prefix=plan.subnet_cidr[(r, zone, subnet)],
            network_security_group=azure.network.NetworkSecurityGroupArgs(id=nsgs[r].id),
            opts=_after(last_write, r))
        last_write[r] = sn
        if s.placement_group and zone not in placement:
            placement[zone] = azure.compute.ProximityPlacementGroup(
                f"ppg-{zone}", resource_group_name=rg.name, location=r,
                proximity_placement_group_type="Standard", zones=[zid], tags=cc.tags(s, f"ppg-{zone}"))
        for h in members:
            hosts_out[h.name] = _vm(s, h, r, rg, zid, sn, nsgs[r], placement.get(zone))
    return hosts_out


def _vm(s: cc.CloudSettings, h: HostSpec, r: str, rg: azure.resources.ResourceGroup, zid: str,
        sn: azure.network.Subnet, nsg: azure.network.NetworkSecurityGroup,
        ppg: azure.compute.ProximityPlacementGroup | None) -> dict[str, Any]:
    """One host: its static public IP, its NIC in the subnet, and the VM; returns its record."""
    pip = azure.network.PublicIPAddress(
        f"pip-{h.name}", resource_group_name=rg.name, location=r, zones=[zid],
        sku=azure.network.PublicIPAddressSkuArgs(name="Standard"),
        public_ip_allocation_method="Static", tags=cc.tags(s, f"pip-{h.name}"))
    nic = azure.network.NetworkInterface(
        f"nic-{h.name}", resource_group_name=rg.name, location=r,
        ip_configurations=[azure.network.NetworkInterfaceIPConfigurationArgs(
            name="ipconfig1", primary=True, private_ip_allocation_method="Dynamic",
            subnet=azure.network.SubnetArgs(id=sn.id),
            public_ip_address=azure.network.PublicIPAddressArgs(id=pip.id))],
        network_security_group=azure.network.NetworkSecurityGroupArgs(id=nsg.id),
        tags=cc.tags(s, f"nic-{h.name}"))
    user_data = base64.b64encode(cc.render_cloud_init(s, h).encode()).decode()
    vm = azure.compute.VirtualMachine(
        f"vm-{h.name}", resource_group_name=rg.name, location=r, zones=[zid],
        hardware_profile=azure.compute.HardwareProfileArgs(vm_size=h.vm_type),
        network_profile=azure.compute.NetworkProfileArgs(network_interfaces=[
            azure.compute.NetworkInterfaceReferenceArgs(id=nic.id, primary=True,
                                                        delete_option="Delete")]),
        os_profile=azure.compute.OSProfileArgs(
            computer_name=cc.cloud_slug(h.name, 63), admin_username=cc.USER,
            custom_data=pulumi.Output.secret(user_data),
            linux_configuration=azure.compute.LinuxConfigurationArgs(
                disable_password_authentication=True,
                ssh=azure.compute.SshConfigurationArgs(public_keys=[azure.compute.SshPublicKeyArgs(
                    path=f"/home/{cc.USER}/.ssh/authorized_keys", key_data=s.client_public_key)]))),
        storage_profile=azure.compute.StorageProfileArgs(
            image_reference=azure.compute.ImageReferenceArgs(**_image(s, h.vm_type)),
            os_disk=azure.compute.OSDiskArgs(
                create_option="FromImage", delete_option="Delete", disk_size_gb=OS_DISK_GB,
                managed_disk=azure.compute.ManagedDiskParametersArgs(
                    storage_account_type="StandardSSD_LRS"))),
        proximity_placement_group=azure.compute.SubResourceArgs(id=ppg.id) if ppg else None,
        # The serial console log (managed storage), where host_keys: generated reads the key.
        diagnostics_profile=azure.compute.DiagnosticsProfileArgs(
            boot_diagnostics=azure.compute.BootDiagnosticsArgs(enabled=True)),
        tags=cc.tags(s, h.name))
    return {
        **cc.host_record(h, zid), "id": vm.id,
        "private_ip": nic.ip_configurations.apply(
            lambda cfgs: cfgs[0].private_ip_address if cfgs else None),
        "public_ip": pip.ip_address,
    }


def _peer_regions(regions: list[str], groups: dict[str, azure.resources.ResourceGroup],
                  vnets: dict[str, azure.network.VirtualNetwork],
                  last_write: dict[str, pulumi.Resource]) -> None:
    """Peer every pair of regional VNets, one peering per direction, each after the last write
    to both of its VNets."""
    for i, ra in enumerate(regions):
        for rb in regions[i + 1:]:
            for src, dst in ((ra, rb), (rb, ra)):
                peering = azure.network.VirtualNetworkPeering(
                    f"peer-{src}-{dst}", resource_group_name=groups[src].name,
                    virtual_network_name=vnets[src].name,
                    remote_virtual_network=azure.network.SubResourceArgs(id=vnets[dst].id),
                    allow_virtual_network_access=True, allow_forwarded_traffic=False,
                    opts=_after(last_write, src, dst))
                last_write[src] = last_write[dst] = peering
