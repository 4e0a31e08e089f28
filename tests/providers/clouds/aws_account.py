"""A cloudbench stack as the AWS program makes it, built in moto (an AWS API emulator).

Per region: a VPC, its internet gateway (attached), a route table (default route,
associated with the subnet), a subnet, a security group and instances whose root
volume carries the stack's tags (as Pulumi's default tags put them there); between
regions, a peering connection tagged on both sides. Used by the tag reaper's tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AMI = "ami-12c6146b"  # one of moto's built-in images


def tags(stack: str, expiry: str) -> list[dict[str, str]]:
    return [{"Key": "cloudbench-expiry", "Value": expiry}, {"Key": "cloudbench-stack", "Value": stack},
            {"Key": "cloudbench-campaign", "Value": "stormcloud-aws"},
            {"Key": "cloudbench-owner", "Value": "alice"}, {"Key": "Name", "Value": f"{stack}-x"}]


@dataclass
class StackIds:
    """What one stack made, per region: kind -> ids."""

    stack: str
    regions: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def add(self, region: str, kind: str, rid: str) -> None:
        self.regions.setdefault(region, {}).setdefault(kind, []).append(rid)

    def ids(self, kind: str) -> list[str]:
        return [i for r in self.regions.values() for i in r.get(kind, [])]


def make_stack(session: Any, stack: str, expiry: str, regions: list[str], hosts_per_region: int = 2,
               second_octet: int = 100) -> StackIds:
    out = StackIds(stack)

    def spec(kind: str) -> list[dict[str, Any]]:
        return [{"ResourceType": kind, "Tags": tags(stack, expiry)}]

    vpcs: dict[str, str] = {}
    for i, region in enumerate(regions):
        ec2 = session.client("ec2", region_name=region)
        cidr = f"10.{second_octet + i}.0.0/16"
        vpc = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=spec("vpc"))["Vpc"]["VpcId"]
        igw = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway"))["InternetGateway"][
            "InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        rt = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table"))["RouteTable"]["RouteTableId"]
        ec2.create_route(RouteTableId=rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
        sn = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr.replace("0.0/16", "1.0/24"),
                               AvailabilityZone=f"{region}a", TagSpecifications=spec("subnet"))["Subnet"]["SubnetId"]
        ec2.associate_route_table(RouteTableId=rt, SubnetId=sn)
        sg = ec2.create_security_group(GroupName=f"secgroup-{region}-{stack}", Description=f"cloudbench {stack}",
                                       VpcId=vpc, TagSpecifications=spec("security-group"))["GroupId"]
        res = ec2.run_instances(
            ImageId=AMI, MinCount=hosts_per_region, MaxCount=hosts_per_region, InstanceType="m5.large",
            SubnetId=sn, SecurityGroupIds=[sg], TagSpecifications=spec("instance") + spec("volume"),
            BlockDeviceMappings=[{"DeviceName": "/dev/sda1",
                                  "Ebs": {"VolumeSize": 16, "DeleteOnTermination": True}}])
        for inst in res["Instances"]:
            out.add(region, "instance", inst["InstanceId"])
            for bdm in inst["BlockDeviceMappings"]:
                out.add(region, "volume", bdm["Ebs"]["VolumeId"])
        for kind, rid in (("vpc", vpc), ("internet-gateway", igw), ("route-table", rt), ("subnet", sn),
                          ("security-group", sg)):
            out.add(region, kind, rid)
        vpcs[region] = vpc
    for i, ra in enumerate(regions):
        for rb in regions[i + 1:]:
            ec2a = session.client("ec2", region_name=ra)
            pcx = ec2a.create_vpc_peering_connection(
                VpcId=vpcs[ra], PeerVpcId=vpcs[rb], PeerRegion=rb,
                TagSpecifications=spec("vpc-peering-connection"))["VpcPeeringConnection"]["VpcPeeringConnectionId"]
            ec2b = session.client("ec2", region_name=rb)
            ec2b.accept_vpc_peering_connection(VpcPeeringConnectionId=pcx)
            ec2b.create_tags(Resources=[pcx], Tags=tags(stack, expiry))  # the accepter's tags (Pulumi)
            out.add(ra, "vpc-peering-connection", pcx)
    return out
