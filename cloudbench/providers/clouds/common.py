"""What the AWS, GCP and Azure programs share: settings, ports, addresses, tags, cloud-init.

The three Pulumi programs (:mod:`cloudbench.providers.clouds.programs`) are thin: every
decision that must be the same on all clouds — which ports are open to whom,
which addresses the subnets get, what is tagged how, what cloud-init installs and
which host key each VM presents — is made here, from the validated topology.
Nothing here imports pulumi.
"""

from __future__ import annotations

import hashlib
import importlib
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cloudbench.core.files import write_json_atomic
from cloudbench.core.topology import HostSpec, PortRange, Topology
from cloudbench.errors import ProvisionError
from cloudbench.store import formats

SSH_PORT = 22
USER = "ubuntu"  # the default user of Ubuntu's cloud images on all three clouds
WORKDIR = f"/home/{USER}/cloudbench"
PACKAGES = ("python3", "nuttcp", "iperf3", "scamper")
# Outputs every program exports; the driver builds the Cluster from them.
OUTPUT_HOSTS = "hosts"
OUTPUT_META = "cloudbench"


# Worker ports opened when a topology carries none (built by hand, not from a spec). A spec's
# topology lists the ports of its workloads (WorkloadModel.listen_ports): echo's and the
# throughput tools' configurable ports, the traceroute method's destination ports.
WORKER_PORTS: tuple[PortRange, ...] = (
    PortRange("echo", 7100, 7100, ("tcp",)),
    PortRange("nuttcp", 5000, 5101),  # control 5000, data 5001-5101
    PortRange("iperf3", 5201, 5299),
    # MDA traceroute probes the destination's high UDP ports; without them the
    # last hop never answers and every path looks one hop short.
    PortRange("traceroute", 33434, 33534, ("udp",)),
)


def worker_ports(topology: Topology) -> list[PortRange]:
    """The ports to open between the campaign's hosts, one entry per (range, protocol set).

    Names are firewall-rule friendly (:func:`cloud_slug`) and unique; identical ranges of two
    workloads are opened once.
    """
    out: dict[tuple[int, int, tuple[str, ...]], PortRange] = {}
    for p in topology.ports or WORKER_PORTS:
        key = (p.first, p.last, tuple(sorted(p.protocols)))
        if key not in out:
            out[key] = PortRange(cloud_slug(p.name, 40), p.first, p.last, key[2])
    names: dict[str, int] = {}
    ports: list[PortRange] = []
    for p in out.values():
        n = names[p.name] = names.get(p.name, 0) + 1
        ports.append(p if n == 1 else PortRange(f"{p.name}-{n}", p.first, p.last, p.protocols))
    return ports


@dataclass(frozen=True)
class HostKeyPair:
    """A host key made by cloudbench, so it is pinned before the first connection."""

    private: str  # OpenSSH private key (PEM-like text); secret
    public: str  # "ssh-ed25519 AAAA… comment"


@dataclass(frozen=True)
class CloudSettings:
    """Everything a cloud program needs besides the topology (one stack)."""

    cloud: str
    campaign: str
    stack: str
    owner: str
    expiry_utc: str  # ISO 8601, "2025-01-01T12:00:00Z"
    controller_cidr: str
    client_public_key: str
    host_keys: dict[str, HostKeyPair] = field(default_factory=dict)
    placement_group: bool = False
    image: str | None = None
    project: str | None = None  # GCP project, or Azure subscription id (as the preflight resolved it)
    # injected: cloudbench makes each VM's host key (its private half passes through the cloud's
    # user data and the encrypted stack state); generated: the VM makes its own and publishes
    # the public half (console output; GCP: serial port 1), read before the first connection.
    host_key_mode: str = "injected"

    def to_dict(self, secrets: bool = True) -> dict[str, Any]:
        d = asdict(self)
        if not secrets:
            d["host_keys"] = {k: {"public": v.public} for k, v in self.host_keys.items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CloudSettings:
        keys = {k: HostKeyPair(v.get("private", ""), v["public"]) for k, v in
                dict(d.get("host_keys", {})).items()}
        fields = {k: v for k, v in d.items() if k != "host_keys"}
        return cls(host_keys=keys, **fields)


def as_settings(settings: CloudSettings | Mapping[str, Any]) -> CloudSettings:
    """``settings`` as :class:`CloudSettings`; a mapping (their ``to_dict`` form) is converted."""
    return settings if isinstance(settings, CloudSettings) else CloudSettings.from_dict(settings)


def new_host_keys(names: list[str], stack: str) -> dict[str, HostKeyPair]:
    """A new ed25519 host key pair per host (comment ``host@stack``), for ``host_keys: injected``:
    the VM gets the private half in its user data, so its key is known before the first connection."""
    import asyncssh

    out: dict[str, HostKeyPair] = {}
    for n in names:
        k = asyncssh.generate_private_key("ssh-ed25519", comment=f"{n}@{stack}")
        out[n] = HostKeyPair(k.export_private_key().decode(), k.export_public_key().decode().strip())
    return out


# -- names, tags, labels -------------------------------------------------------------
def cloud_slug(text: str, limit: int = 40) -> str:
    """A name every cloud accepts: lowercase letters, digits, hyphens; starts with a letter."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    if not s or not s[0].isalpha():
        s = "cb-" + s
    return s[:limit].rstrip("-")


GCP_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # RFC 1035, as every GCE resource name
GCP_AUTONAME_SUFFIX = 8  # Pulumi appends "-" and 7 random characters to a resource's name


def gcp_name(text: str) -> str:
    """A GCE resource name for ``text`` that stays valid after Pulumi's random suffix (≤ 63).

    Names a spec allows (``S_1``) are lowercased and their other characters become
    ``-``; when that changed the name, a short hash of the original keeps two such
    names (``S_1``, ``s-1``) apart.
    """
    limit = 63 - GCP_AUTONAME_SUFFIX
    clean = cloud_slug(text, limit)
    if clean != text:
        digest = hashlib.sha1(text.encode()).hexdigest()[:6]
        clean = f"{cloud_slug(text, limit - 7)}-{digest}"
    return clean


def tags(settings: CloudSettings, name: str | None = None) -> dict[str, str]:
    """Tags on every AWS/Azure resource: who made it, for which campaign, until when."""
    t = {
        "cloudbench-campaign": settings.campaign,
        "cloudbench-stack": settings.stack,
        "cloudbench-owner": settings.owner,
        "cloudbench-expiry": settings.expiry_utc,
    }
    if name is not None:
        t["Name"] = f"{cloud_slug(settings.campaign)}-{name}"
    return t


GCP_NAME_PREFIX = "cloudbench-"  # of GCP resources without labels: what `gc --cloud gcp` lists
_DESCRIPTION_TAG = re.compile(r"(cloudbench-[a-z]+)=(\S+)")


def gcp_description(settings: CloudSettings, what: str) -> str:
    """The description of a GCP resource that takes no labels (networks, subnetworks, firewall
    rules, resource policies): ``what``, then the tags as ``key=value`` words, which
    :func:`tags_from_description` reads back (``gc --cloud gcp`` finds them so)."""
    words = " ".join(f"{k}={re.sub(r'[^A-Za-z0-9_.:@+-]', '_', v)}" for k, v in tags(settings).items())
    return f"{what}; {words}"


def tags_from_description(text: str) -> dict[str, str]:
    """The ``cloudbench-*`` tags of a :func:`gcp_description` (empty for other descriptions)."""
    return dict(_DESCRIPTION_TAG.findall(text))


def gcp_labels(settings: CloudSettings) -> dict[str, str]:
    """The same as :func:`tags`, within GCP's label rules (lowercase, ``[a-z0-9_-]``, 63)."""

    def value(v: str) -> str:
        return re.sub(r"[^a-z0-9_-]", "-", v.lower())[:63]

    return {k: value(v) for k, v in tags(settings).items()}


# -- addresses -----------------------------------------------------------------------
@dataclass(frozen=True)
class AddressPlan:
    """Private address space: one network per region, one CIDR per spec subnet."""

    region_cidr: dict[str, str]
    subnet_cidr: dict[tuple[str, str, str], str]  # (region, zone, subnet) -> CIDR

    @property
    def campaign_cidrs(self) -> list[str]:
        """Every subnet of the campaign: the only sources allowed to reach worker ports."""
        return sorted(set(self.subnet_cidr.values()), key=_net_key)


def _net_key(cidr: str) -> tuple[int, int]:
    n = ipaddress.ip_network(cidr)
    return int(n.network_address), n.prefixlen


def plan_addresses(topology: Topology) -> AddressPlan:
    """Subnet CIDRs from the spec where given, else /24s carved from 10.<100+i>.0.0/16.

    Region networks must not overlap: cross-region traffic uses private addresses
    over VPC/VNet peering (AWS, Azure) or one global network (GCP).
    """
    regions = list(dict.fromkeys(s.region for s in topology.subnets)) or topology.regions
    region_cidr: dict[str, str] = {}
    subnet_cidr: dict[tuple[str, str, str], str] = {}
    subnets = topology.subnets or _subnets_from_hosts(topology)
    for i, region in enumerate(regions):
        mine = [s for s in subnets if s.region == region]
        given = [ipaddress.IPv4Network(s.cidr) for s in mine if s.cidr]
        auto = ipaddress.IPv4Network(f"10.{100 + i}.0.0/16")
        net = _supernet(given, room=len(given) < len(mine)) if given else auto
        region_cidr[region] = str(net)
        free = (n for n in net.subnets(new_prefix=max(24, net.prefixlen))
                if not any(n.overlaps(g) for g in given))
        for s in mine:
            if s.cidr:
                subnet_cidr[(s.region, s.zone, s.name)] = str(ipaddress.IPv4Network(s.cidr))
            else:
                try:
                    subnet_cidr[(s.region, s.zone, s.name)] = str(next(free))
                except StopIteration:
                    raise ValueError(f"region {region}: no room for subnet {s.name} in {net}; "
                                     "give every subnet of the region a `cidr`") from None
    nets = [(r, ipaddress.IPv4Network(c)) for r, c in region_cidr.items()]
    for i, (ra, na) in enumerate(nets):
        for rb, nb in nets[i + 1:]:
            if na.overlaps(nb):
                raise ValueError(f"the networks of regions {ra} ({na}) and {rb} ({nb}) overlap; "
                                 "give their subnets CIDRs from distinct ranges")
    return AddressPlan(region_cidr, subnet_cidr)


def _supernet(nets: list[ipaddress.IPv4Network], room: bool) -> ipaddress.IPv4Network:
    """The smallest network holding all ``nets``; its /16 if other subnets need ``room``."""
    net = nets[0]
    while not all(n.subnet_of(net) for n in nets):
        net = net.supernet()
    if net.prefixlen < 16:
        raise ValueError(f"subnets {', '.join(map(str, nets))} of one region span {net}; "
                         "a region's network can be at most a /16")
    return net.supernet(new_prefix=16) if room and net.prefixlen > 16 else net


def _subnets_from_hosts(topology: Topology) -> list[Any]:
    from cloudbench.core.topology import SubnetSpec

    seen = dict.fromkeys((h.provider, h.region, h.zone, h.subnet) for h in topology.hosts)
    return [SubnetSpec(s, p, r, z) for p, r, z, s in seen]


def hosts_by_subnet(topology: Topology) -> dict[tuple[str, str, str], list[HostSpec]]:
    """The topology's hosts by (region, zone, subnet), in host order: one cloud subnet each."""
    out: dict[tuple[str, str, str], list[HostSpec]] = {}
    for h in topology.hosts:
        out.setdefault((h.region, h.zone, h.subnet), []).append(h)
    return out


# -- cloud-init ------------------------------------------------------------------------
class _Literal(str):
    """A string dumped as a YAML block (keys stay readable in the rendered file)."""


def _literal(dumper: yaml.SafeDumper, data: _Literal) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Literal, _literal)


HOST_KEY_MODES = ("injected", "generated")

# GCE's guest agent regenerates every SSH host key on an instance's first boot
# ([InstanceSetup] set_host_keys, true by default), which would replace the key cloud-init
# installed. Its unit starts After=network-online.target, and cloud-init's network stage (whose
# modules run write_files, then ssh) is Before=network-online.target; the agent reads this file
# when it starts, so cloud-init's key stays the only one (both host_keys modes: one key maker).
GCE_AGENT_CONFIG_PATH = "/etc/default/instance_configs.cfg"
GCE_AGENT_CONFIG = {
    "path": GCE_AGENT_CONFIG_PATH,
    "owner": "root:root",
    "permissions": "0644",
    "content": "[InstanceSetup]\nset_host_keys = false\n",
}


def render_cloud_init(settings: CloudSettings, host: HostSpec) -> str:
    """The user-data of one VM: its host key (ours, or made there), our client key, the tools."""
    keys: dict[str, Any]
    if settings.host_key_mode == "generated":
        # The VM makes one fresh ed25519 key and prints it to the console, where the driver
        # reads it (cloud-init's keys_to_console) before it connects; no private key leaves it.
        keys = {"ssh_deletekeys": True, "ssh_genkeytypes": ["ed25519"],
                "ssh": {"emit_keys_to_console": True}, "ssh_key_console_blacklist": []}
    else:
        key = settings.host_keys.get(host.name)
        if key is None or not key.private:
            raise ValueError(f"no host key for {host.name}: the driver generates one per host")
        # Our key replaces the image's; no other host key type is generated, so the
        # pinned ed25519 key is the only one sshd can present.
        keys = {"ssh_deletekeys": True, "ssh_genkeytypes": [], "ssh_keys": {
            "ed25519_private": _Literal(key.private if key.private.endswith("\n") else key.private + "\n"),
            "ed25519_public": key.public,
        }}
    doc: dict[str, Any] = {
        **keys,
        **({"write_files": [GCE_AGENT_CONFIG]} if settings.cloud == "gcp" else {}),
        "ssh_pwauth": False,
        "disable_root": True,
        "ssh_authorized_keys": [settings.client_public_key],
        "package_update": True,
        "packages": list(PACKAGES),
        "runcmd": [["install", "-d", "-o", USER, "-g", USER, "-m", "0700", WORKDIR]],
    }
    return "#cloud-config\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000)


def host_record(host: HostSpec, zone_id: str) -> dict[str, Any]:
    """The static part of a host's output entry (the programs add addresses and ids)."""
    return {"region": host.region, "zone": host.zone, "zone_id": zone_id, "subnet": host.subnet,
            "vm_type": host.vm_type}


def meta_output(settings: CloudSettings) -> dict[str, Any]:
    """The stack's metadata output: output schema version, cloud, campaign, stack, expiry, and
    the SSH user and work directory of its VMs."""
    return {"schema": formats.CLOUD_OUTPUTS.current, "cloud": settings.cloud, "campaign": settings.campaign,
            "stack": settings.stack, "expiry_utc": settings.expiry_utc, "user": USER,
            "workdir": WORKDIR}


# -- stack config (the `pulumi` CLI path) -----------------------------------------------
PROGRAM_FILE = "program.json"  # in the stack's run directory, mode 0600
PROGRAM_FILE_KEY = "cloudbench:program_file"


def write_program_file(path: Path, topology: Topology, settings: CloudSettings) -> Path:
    """The program's inputs, private host keys included, in a file only its owner can read.

    The inline program gets them in memory; ``stacks/<cloud>/__main__.py`` (the ``pulumi``
    CLI path) reads them back from this file, whose path is the stack's only
    ``cloudbench:`` config. So no secret ever travels on a command line (``/proc/*/cmdline``
    is readable by every local user) nor in an environment, and a topology of any size
    fits (one argument is at most 128 KiB on Linux).
    """
    doc = {"topology": topology.to_dict(), "settings": settings.to_dict(secrets=True)}
    path = Path(path).resolve()
    write_json_atomic(path, doc, mode=0o600)  # never readable by others
    return path


def read_program_file(path: str | Path) -> tuple[dict[str, Any], CloudSettings]:
    """Inverse of :func:`write_program_file`; refuses a file others can read."""
    p = Path(path)
    try:
        mode = p.stat().st_mode & 0o777
        if mode & 0o077:
            raise ValueError(f"{p} holds private host keys but has mode {mode:o}: chmod 600 {p}")
        doc = json.loads(p.read_text())
    except OSError as e:
        raise ValueError(f"cannot read the program inputs {p}: {e.strerror} (the stack's run "
                         "directory under results/ must still exist)") from e
    return dict(doc["topology"]), CloudSettings.from_dict(doc["settings"])


def stack_config(topology: Topology, settings: CloudSettings,
                 program_file: Path) -> dict[str, tuple[str, bool]]:
    """The stack's config, key -> (value, secret): the provider's defaults and where the inputs are.

    Nothing secret and nothing long: these values go to ``pulumi config set-all`` as arguments.
    """
    cfg = {PROGRAM_FILE_KEY: (str(Path(program_file).resolve()), False)}
    if settings.cloud == "aws" and topology.regions:
        cfg["aws:region"] = (topology.regions[0], False)
    if settings.cloud == "gcp" and settings.project:
        cfg["gcp:project"] = (settings.project, False)
    if settings.cloud == "azure" and settings.project:
        cfg["azure-native:subscriptionId"] = (settings.project, False)
    return cfg


def import_sdk(module: str, package: str, cloud: str, stack: str, needed_by: str) -> Any:
    """A cloud's own Python SDK (boto3, google-cloud-compute, azure-*), imported on use:
    :mod:`~cloudbench.providers.clouds.hostkeys` and :mod:`~cloudbench.providers.clouds.tagreaper`
    need it, nothing else does. Missing: a :class:`ProvisionError` naming the package."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ProvisionError(cloud, stack, f"{needed_by} needs {package}: pip install {package}") from e


CONTROLLER_ENV = "CLOUDBENCH_CONTROLLER_CIDR"


def controller_cidr(cloud: str, given: str | None, env: Mapping[str, str]) -> tuple[str | None, str]:
    """The controller's address for ``cloud``'s SSH rule and where it came from: the spec's
    ``controller_cidr``, else ``$CLOUDBENCH_CONTROLLER_CIDR`` (None when neither is set)."""
    if given:
        return given, f"providers.{cloud}.controller_cidr"
    return env.get(CONTROLLER_ENV) or None, f"${CONTROLLER_ENV}"


def controller_cidr_fix(cloud: str) -> str:
    """What to do when the controller's address is missing or refused."""
    return (f"set providers.{cloud}.controller_cidr in the spec (or ${CONTROLLER_ENV}) to your public "
            "address as a /32, e.g. from `curl -s https://checkip.amazonaws.com`")


def check_settings(topology: Topology, settings: CloudSettings) -> None:
    """Refuse settings that would make an unsafe or unreachable cluster (raises ValueError)."""
    from cloudbench.spec.clouds import controller_cidr_error

    msg = controller_cidr_error(settings.controller_cidr)
    if msg:
        raise ValueError(f"controller_cidr: {msg}")
    if settings.host_key_mode not in HOST_KEY_MODES:
        raise ValueError(f"host_keys: {settings.host_key_mode!r} is not one of {', '.join(HOST_KEY_MODES)}")
    missing = [h.name for h in topology.hosts if h.name not in settings.host_keys]
    if missing and settings.host_key_mode == "injected":
        raise ValueError(f"no host keys for {', '.join(missing)}")
    if not settings.client_public_key.startswith("ssh-"):
        raise ValueError("client_public_key is not an OpenSSH public key")


CONSOLE_KEYS = re.compile(r"-----BEGIN SSH HOST KEY KEYS-----(.*?)-----END SSH HOST KEY KEYS-----", re.S)


def host_key_from_console(text: str) -> str | None:
    """The ed25519 host key cloud-init printed to the console (the last boot's), or None yet."""
    blocks: list[str] = [m.group(1) for m in CONSOLE_KEYS.finditer(text)]
    if not blocks:
        return None
    for raw in blocks[-1].splitlines():
        line = raw.strip()
        if "ssh-ed25519 " in line:
            return line[line.index("ssh-ed25519 "):].strip()  # console lines may carry a prefix
    return None
