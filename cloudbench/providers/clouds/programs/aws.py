"""AWS: a VPC per region (peered with the others), a subnet per spec subnet, EC2 VMs.

Cross-region traffic uses private addresses over inter-region VPC peering, so
the worker ports can stay closed to everything but the campaign's own subnets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from cloudbench.core import catalog
from cloudbench.core.topology import PortRange, Topology
from cloudbench.providers.clouds import common as cc

CANONICAL_OWNER = "099720109477"  # Canonical's AWS account: the official Ubuntu AMIs
AMI_NAME = "ubuntu/images/hvm-ssd-gp3/ubuntu-noble-24.04-{arch}-server-*"
ROOT_GB = 16


def ingress_rules(settings: cc.CloudSettings, plan: cc.AddressPlan,
                  ports: list[PortRange]) -> list[aws.ec2.SecurityGroupIngressArgs]:
    """The security group's inbound rules: SSH from the controller only; the workers' ports
    and ICMP from the campaign's own subnets only."""
    rules = [aws.ec2.SecurityGroupIngressArgs(
        description="ssh from the controller", protocol="tcp", from_port=cc.SSH_PORT,
        to_port=cc.SSH_PORT, cidr_blocks=[settings.controller_cidr])]
    for p in ports:
        for proto in p.protocols:
            rules.append(aws.ec2.SecurityGroupIngressArgs(
                description=f"{p.name} between campaign hosts", protocol=proto, from_port=p.first,
                to_port=p.last, cidr_blocks=plan.campaign_cidrs))
    rules.append(aws.ec2.SecurityGroupIngressArgs(
        description="icmp between campaign hosts", protocol="icmp", from_port=-1, to_port=-1,
        cidr_blocks=plan.campaign_cidrs))
    return rules


def program(topology_dict: Mapping[str, Any], settings: cc.CloudSettings | Mapping[str, Any]) -> None:
    """The Pulumi program of an AWS testbed: builds every resource of the topology and exports
    the stack's metadata and its hosts (addresses, zone IDs) as outputs."""
    topo = Topology.from_dict(dict(topology_dict))
    s = cc.as_settings(settings)
    cc.check_settings(topo, s)
    plan = cc.plan_addresses(topo)
    regions = topo.regions
    providers = {r: aws.Provider(f"aws-{r}", region=r,
                                 default_tags=aws.ProviderDefaultTagsArgs(tags=cc.tags(s)))
                 for r in regions}
    vpcs, tables, groups = _region_networks(topo, s, plan, providers)
    hosts_out = _subnets_and_vms(topo, s, plan, providers, vpcs, tables, groups)
    _peer_regions(regions, s, plan, providers, vpcs, tables)
    pulumi.export(cc.OUTPUT_META, cc.meta_output(s))
    pulumi.export(cc.OUTPUT_HOSTS, hosts_out)


def _region_networks(topo: Topology, s: cc.CloudSettings, plan: cc.AddressPlan,
                     providers: dict[str, aws.Provider]) -> tuple[dict[str, aws.ec2.Vpc],
                                                                  dict[str, aws.ec2.RouteTable],
                                                                  dict[str, aws.ec2.SecurityGroup]]:
    """Per region: the VPC, its internet gateway and route table, and the security group."""
    vpcs: dict[str, aws.ec2.Vpc] = {}
    tables: dict[str, aws.ec2.RouteTable] = {}
    groups: dict[str, aws.ec2.SecurityGroup] = {}
    for r in topo.regions:
        opts = pulumi.ResourceOptions(provider=providers[r])
        vpc = aws.ec2.Vpc(f"vpc-{r}", cidr_block=plan.region_cidr[r], enable_dns_support=True,
                          enable_dns_hostnames=True, tags=cc.tags(s, f"vpc-{r}"), opts=opts)
        igw = aws.ec2.InternetGateway(f"igw-{r}", vpc_id=vpc.id, tags=cc.tags(s, f"igw-{r}"), opts=opts)
        rt = aws.ec2.RouteTable(f"rt-{r}", vpc_id=vpc.id, tags=cc.tags(s, f"rt-{r}"), opts=opts)
        # Outbound only (apt); no inbound rule ever names 0.0.0.0/0.
        aws.ec2.Route(f"route-{r}-internet", route_table_id=rt.id, destination_cidr_block="0.0.0.0/0",
                      gateway_id=igw.id, opts=opts)
        # Not "sg-…": AWS reserves that prefix and refuses it in the GroupName Pulumi derives.
        groups[r] = aws.ec2.SecurityGroup(
            f"secgroup-{r}", vpc_id=vpc.id, description=f"cloudbench {s.campaign} {s.stack}",
            ingress=ingress_rules(s, plan, cc.worker_ports(topo)),
            egress=[aws.ec2.SecurityGroupEgressArgs(protocol="-1", from_port=0, to_port=0,
                                                    cidr_blocks=["0.0.0.0/0"])],
            tags=cc.tags(s, f"secgroup-{r}"), opts=opts)
        vpcs[r], tables[r] = vpc, rt
    return vpcs, tables, groups


def _subnets_and_vms(topo: Topology, s: cc.CloudSettings, plan: cc.AddressPlan,
                     providers: dict[str, aws.Provider], vpcs: dict[str, aws.ec2.Vpc],
                     tables: dict[str, aws.ec2.RouteTable],
                     groups: dict[str, aws.ec2.SecurityGroup]) -> dict[str, Any]:
    """A subnet per spec subnet (routed by its region's table), a placement group per zone if
    asked for, and the EC2 VMs; returns the hosts output (name → record)."""
    placement: dict[str, aws.ec2.PlacementGroup] = {}
    amis: dict[tuple[str, str], pulumi.Output[str]] = {}
    hosts_out: dict[str, Any] = {}
    for (r, zone, subnet), members in cc.hosts_by_subnet(topo).items():
        opts = pulumi.ResourceOptions(provider=providers[r])
        sn = aws.ec2.Subnet(f"subnet-{zone}-{subnet}", vpc_id=vpcs[r].id,
                            cidr_block=plan.subnet_cidr[(r, zone, subnet)], availability_zone=zone,
                            map_public_ip_on_launch=True, tags=cc.tags(s, f"{zone}-{subnet}"), opts=opts)
        aws.ec2.RouteTableAssociation(f"rta-{zone}-{subnet}", subnet_id=sn.id,
                                      route_table_id=tables[r].id, opts=opts)
        if s.placement_group and zone not in placement:
            placement[zone] = aws.ec2.PlacementGroup(f"pg-{zone}", strategy="cluster",
                                                     tags=cc.tags(s, f"pg-{zone}"), opts=opts)
        for h in members:
            arch = "arm64" if catalog.vm_arch("aws", h.vm_type) == "arm64" else "amd64"
            ami = _ami(s, r, arch, providers, amis)
            vm = aws.ec2.Instance(
                f"vm-{h.name}", ami=ami, instance_type=h.vm_type, subnet_id=sn.id,
                vpc_security_group_ids=[groups[r].id], associate_public_ip_address=True,
                user_data=pulumi.Output.secret(cc.render_cloud_init(s, h)),
                user_data_replace_on_change=True,
                placement_group=placement[zone].name if zone in placement else None,
                metadata_options=aws.ec2.InstanceMetadataOptionsArgs(http_tokens="required"),
                root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                    volume_type="gp3", volume_size=ROOT_GB, encrypted=True, delete_on_termination=True),
                tags=cc.tags(s, h.name), opts=opts)
            # The zone *name* maps to a different physical zone in every account; its ID
            # (use1-az4) is the same everywhere, so that is what a run records.
            hosts_out[h.name] = {**cc.host_record(h, zone), "zone_id": sn.availability_zone_id, "id": vm.id,
                                 "private_ip": vm.private_ip, "public_ip": vm.public_ip}
    return hosts_out


def _ami(s: cc.CloudSettings, r: str, arch: str, providers: dict[str, aws.Provider],
         amis: dict[tuple[str, str], pulumi.Output[str]]) -> pulumi.Input[str]:
    """The image of a VM: the spec's, else the newest official Ubuntu AMI of the region and
    architecture (looked up once per pair, cached in ``amis``)."""
    if s.image:
        ami: pulumi.Input[str] = s.image
    else:
        if (r, arch) not in amis:
            amis[(r, arch)] = aws.ec2.get_ami_output(
                most_recent=True, owners=[CANONICAL_OWNER],
                filters=[aws.ec2.GetAmiFilterArgs(name="name", values=[AMI_NAME.format(arch=arch)]),
                         aws.ec2.GetAmiFilterArgs(name="state", values=["available"])],
                opts=pulumi.InvokeOptions(provider=providers[r])).id
        ami = amis[(r, arch)]
    return ami


def _peer_regions(regions: list[str], s: cc.CloudSettings, plan: cc.AddressPlan,
                  providers: dict[str, aws.Provider], vpcs: dict[str, aws.ec2.Vpc],
                  tables: dict[str, aws.ec2.RouteTable]) -> None:
    """Peer every pair of regional VPCs (requested in one region, accepted in the other) and
    route each region's CIDR to the other over the peering."""
    for i, ra in enumerate(regions):
        for rb in regions[i + 1:]:
            pcx = aws.ec2.VpcPeeringConnection(
                f"pcx-{ra}-{rb}", vpc_id=vpcs[ra].id, peer_vpc_id=vpcs[rb].id, peer_region=rb,
                auto_accept=False, tags=cc.tags(s, f"pcx-{ra}-{rb}"),
                opts=pulumi.ResourceOptions(provider=providers[ra]))
            accept = aws.ec2.VpcPeeringConnectionAccepter(
                f"pcx-accept-{ra}-{rb}", vpc_peering_connection_id=pcx.id, auto_accept=True,
                tags=cc.tags(s, f"pcx-{ra}-{rb}"), opts=pulumi.ResourceOptions(provider=providers[rb]))
            for src, dst in ((ra, rb), (rb, ra)):
                aws.ec2.Route(f"route-{src}-to-{dst}", route_table_id=tables[src].id,
                              destination_cidr_block=plan.region_cidr[dst], vpc_peering_connection_id=pcx.id,
                              opts=pulumi.ResourceOptions(provider=providers[src], depends_on=[accept]))
