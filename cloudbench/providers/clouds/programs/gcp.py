"""GCP: one VPC network for the campaign, a subnetwork per spec subnet, Compute Engine VMs.

A GCP network is global and its subnetworks are regional, so one network already
joins all regions over private addresses (no peering); each spec subnet becomes a
subnetwork in its zone's region and each VM is placed in its spec zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_gcp as gcp

from cloudbench.core import catalog
from cloudbench.core.topology import PortRange, Topology
from cloudbench.providers.clouds import common as cc

IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-{arch}"
BOOT_GB = 16


def firewall_rules(settings: cc.CloudSettings, plan: cc.AddressPlan,
                   ports: list[PortRange]) -> list[dict[str, Any]]:
    """Ingress rules as (name, sources, allows): SSH from the controller, workers from the campaign."""
    by_proto: dict[str, list[str]] = {}
    for p in ports:
        for proto in p.protocols:
            by_proto.setdefault(proto, []).append(p.text())
    workers = [gcp.compute.FirewallAllowArgs(protocol=proto, ports=ports) for proto, ports in by_proto.items()]
    workers.append(gcp.compute.FirewallAllowArgs(protocol="icmp"))
    return [
        {"name": "ssh", "sources": [settings.controller_cidr],
         "allows": [gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(cc.SSH_PORT)])]},
        {"name": "workers", "sources": plan.campaign_cidrs, "allows": workers},
    ]


def name(what: str) -> str:
    """The Pulumi name (and so, with Pulumi's random suffix, the GCE name) of a resource
    without labels: ``cloudbench-…``, which `gc --cloud gcp` lists."""
    return cc.gcp_name(cc.GCP_NAME_PREFIX + what)


def program(topology_dict: Mapping[str, Any], settings: cc.CloudSettings | Mapping[str, Any]) -> None:
    """The Pulumi program of a GCP testbed: builds every resource of the topology and exports
    the stack's metadata and its hosts (addresses, zones) as outputs."""
    topo = Topology.from_dict(dict(topology_dict))
    s = cc.as_settings(settings)
    cc.check_settings(topo, s)
    plan = cc.plan_addresses(topo)
    project = s.project  # as the preflight resolved it (spec, environment, gcloud, ADC)
    labels = cc.gcp_labels(s)
    target = cc.cloud_slug(f"cb-{s.stack}", 63)  # network tag the firewall rules apply to
    # Networks, subnetworks, firewall rules and resource policies take no labels: their names
    # start with cloudbench- and their descriptions carry the tags, so `gc --cloud gcp` finds them.
    net = gcp.compute.Network(name("net"), auto_create_subnetworks=False, routing_mode="GLOBAL",
                              description=cc.gcp_description(s, "campaign network"), project=project)
    for rule in firewall_rules(s, plan, cc.worker_ports(topo)):
        gcp.compute.Firewall(name(f"fw-{rule['name']}"), network=net.id, direction="INGRESS", priority=1000,
                             source_ranges=rule["sources"], allows=rule["allows"], target_tags=[target],
                             description=cc.gcp_description(s, f"ingress: {rule['name']}"), project=project)

    placement: dict[str, gcp.compute.ResourcePolicy] = {}
    hosts_out: dict[str, Any] = {}
    for (r, zone, subnet), members in cc.hosts_by_subnet(topo).items():
        sn = gcp.compute.Subnetwork(name(f"subnet-{zone}-{subnet}"), network=net.id, region=r,
                                    ip_cidr_range=plan.subnet_cidr[(r, zone, subnet)], project=project,
                                    description=cc.gcp_description(s, f"subnet {subnet} in {zone}"))
        if s.placement_group and zone not in placement:
            placement[zone] = gcp.compute.ResourcePolicy(
                name(f"placement-{zone}"), region=r, project=project,
                description=cc.gcp_description(s, f"compact placement in {zone}"),
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                    collocation="COLLOCATED"))
        for h in members:
            arch = "arm64" if catalog.vm_arch("gcp", h.vm_type) == "arm64" else "amd64"
            policy = placement.get(zone)
            vm = gcp.compute.Instance(
                cc.gcp_name(f"vm-{h.name}"), machine_type=h.vm_type, zone=zone, project=project,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    auto_delete=True,
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=s.image or IMAGE.format(arch=arch), size=BOOT_GB, type=catalog.gcp_boot_disk(h.vm_type),
                        labels=labels)),
                network_interfaces=[gcp.compute.InstanceNetworkInterfaceArgs(
                    subnetwork=sn.id, access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()])],
                metadata={
                    "user-data": pulumi.Output.secret(cc.render_cloud_init(s, h)),
                    "ssh-keys": f"{cc.USER}:{s.client_public_key}",
                    # Only our key: no project-wide keys, no OS Login replacing metadata keys.
                    "block-project-ssh-keys": "true",
                    "enable-oslogin": "FALSE",
                    # The guest agent publishes the VM's host keys (host_keys: generated reads them).
                    "enable-guest-attributes": "TRUE",
                },
                labels=labels, tags=[target],
                resource_policies=policy.self_link if policy is not None else None,
                # Compact placement cannot live-migrate.
                scheduling=gcp.compute.InstanceSchedulingArgs(on_host_maintenance="TERMINATE")
                if policy is not None else None,
                allow_stopping_for_update=True)
            nic = vm.network_interfaces.apply(lambda nics: nics[0])
            hosts_out[h.name] = {
                **cc.host_record(h, zone), "id": vm.id,
                "private_ip": nic.apply(lambda n: n.network_ip),
                "public_ip": nic.apply(lambda n: n.access_configs[0].nat_ip if n.access_configs else None),
            }

    pulumi.export(cc.OUTPUT_META, cc.meta_output(s))
    pulumi.export(cc.OUTPUT_HOSTS, hosts_out)
