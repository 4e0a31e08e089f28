"""The embedded default provider: the spec's topology as Linux network namespaces.

Layout (all inside namespaces; nothing is added to the root namespace but the
namespaces themselves and the sshd processes we start):

* one namespace per host (``cb<stack>-<host>``; routers are ``cb<stack>-_…``) with ``eth0`` at
  198.18.<subnet>.<10+i>/24;
* one router namespace per zone; it holds a bridge per subnet (gateway ``.1``),
  so hosts of a subnet share a bridge and subnets of a zone are one IP hop apart;
* one router per region joining its zones, and one core router joining regions,
  over /30 links from 198.19.0.0/16. Hop counts: same subnet 0, cross subnet 1,
  cross zone 3, cross region 5 routers;
* one ``sshd -D`` per host, listening only on the host's address, with its own
  config, host key (generated here, pinned by the controller) and pid file, and
  key-only login with the run's ed25519 client key.

Every name carries the provision's short id and a state file under
``/run/cloudbench`` lists what was made, written *before* it is made, so
``cloudbench gc`` can remove what a killed run left behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.files import write_json_atomic
from cloudbench.core.netns import connect_in_netns, ip_batch, list_netns, netns_pids, run
from cloudbench.core.processes import pid_alive, pid_cmdline
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError
from cloudbench.providers.base import Finding
from cloudbench.providers.netns.plan import TestbedPlan
from cloudbench.providers.netns.wan import plan_wan

DEFAULT_STATE_ROOT = "/run/cloudbench"
SSHD = "/usr/sbin/sshd"
SUBNET_BASE = ipaddress.IPv4Network("198.18.0.0/16")
LINK_BASE = ipaddress.IPv4Network("198.19.0.0/16")
NS_RE = re.compile(r"^cb([0-9a-f]{6})-")
ROUTER_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv4.icmp_ratelimit=0",
    "net.ipv4.fib_multipath_hash_policy=1",
)
# The key of the per-flow multipath hash (Linux >= 6.11). Left at 0, every namespace of one
# boot uses the same random key, so every testbed splits a given flow onto the same branch;
# each router gets its own nonzero key instead, drawn per testbed (:func:`plan_testbed`).
HASH_SEED_SYSCTL = "net.ipv4.fib_multipath_hash_seed"


def plan_testbed(topology: Topology, stack: str, hash_seeds: Mapping[str, int] | None = None) -> TestbedPlan:
    """The testbed of ``topology``: its namespaces, veth links, bridges and routes as ``ip`` batches."""
    p = TestbedPlan(stack)
    pre = f"cb{stack}-"
    if len(topology.hosts) == 0:
        raise ProvisionError("netns", stack, "the topology has no hosts")
    subnets = [(h.region, h.zone, h.subnet) for h in topology.hosts]
    subnet_ids = {s: i for i, s in enumerate(dict.fromkeys(subnets))}
    zones = {z: i for i, z in enumerate(dict.fromkeys((r, z) for r, z, _ in subnets))}
    regions = {r: i for i, r in enumerate(dict.fromkeys(r for r, _, _ in subnets))}
    if len(subnet_ids) > 250:
        raise ProvisionError("netns", stack, "the testbed supports at most 250 subnets")
    links = iter(LINK_BASE.subnets(new_prefix=30))

    def link(a_ns: str, a_if: str, b_ns: str, b_if: str) -> tuple[str, str]:
        net = next(links)
        a, b = (str(x) for x in list(net.hosts())[:2])
        p.root_batch.append(f"link add {a_if} netns {a_ns} type veth peer name {b_if} netns {b_ns}")
        p.ns_batches[a_ns] += [f"addr add {a}/30 dev {a_if}", f"link set {a_if} up"]
        p.ns_batches[b_ns] += [f"addr add {b}/30 dev {b_if}", f"link set {b_if} up"]
        return a, b

    # Router names start with "_", which no host name can, so they never collide.
    core = pre + "_core"
    region_ns = {r: f"{pre}_r{i}" for r, i in regions.items()}
    zone_ns = {z: f"{pre}_z{i}" for z, i in zones.items()}
    wan = topology.wan is not None  # emulated WAN links replace the core router
    p.routers = [*([] if wan else [core]), *region_ns.values(), *zone_ns.values()]
    for ns in p.routers:
        p.root_batch.append(f"netns add {ns}")
        p.ns_batches[ns] = ["link set lo up"]
    for h in topology.hosts:
        ns = pre + h.name
        p.host_ns[h.name] = ns
        p.root_batch.append(f"netns add {ns}")
        p.ns_batches[ns] = ["link set lo up"]

    region_up: dict[str, str] = {}
    for r, rns in ({} if wan else region_ns).items():
        core_side, _ = link(core, f"r{regions[r]}", rns, "up0")
        region_up[r] = core_side
        p.ns_batches[rns].append(f"route add default via {core_side}")
    zone_up: dict[tuple[str, str], str] = {}
    for (r, z), zns in zone_ns.items():
        reg_side, _ = link(region_ns[r], f"z{zones[(r, z)]}", zns, "up0")
        zone_up[(r, z)] = reg_side
        p.ns_batches[zns].append(f"route add default via {reg_side}")
    for (r, z, s), k in subnet_ids.items():
        net = list(SUBNET_BASE.subnets(new_prefix=24))[k + 1]
        gw = str(net.network_address + 1)
        zns = zone_ns[(r, z)]
        p.ns_batches[zns] += [f"link add br{k} type bridge", f"addr add {gw}/24 dev br{k}",
                              f"link set br{k} up"]
        p.ns_batches[region_ns[r]].append(f"route add {net} via {zone_side_of(p, zns)}")
        if not wan:
            p.ns_batches[core].append(f"route add {net} via {region_side_of(p, region_ns[r])}")
        members = [h for h in topology.hosts if (h.region, h.zone, h.subnet) == (r, z, s)]
        if len(members) > 240:
            raise ProvisionError("netns", stack, f"subnet {s!r} has more than 240 hosts")
        for i, h in enumerate(members):
            addr = str(net.network_address + 10 + i)
            p.host_addr[h.name] = addr
            hns = p.host_ns[h.name]
            peer = f"h{h.index}"
            p.host_peer[h.name] = (zns, peer)
            p.root_batch.append(f"link add eth0 netns {hns} type veth peer name {peer} netns {zns}")
            p.ns_batches[zns] += [f"link set {peer} master br{k}", f"link set {peer} up"]
            p.ns_batches[hns] += [f"addr add {addr}/24 dev eth0", "link set eth0 up",
                                  f"route add default via {gw}"]
    if wan:
        p.wan = plan_wan(p, topology, region_ns)
    # ``hash_seeds``: a run's recorded keys (facts['multipath_hash_seeds'], by namespace: the same
    # stack) to rebuild its testbed as it hashed; drawn afresh otherwise
    p.hash_seeds = {ns: (hash_seeds or {}).get(ns) or secrets.randbelow(2**32 - 1) + 1 for ns in p.routers}
    return p


def hash_seed_supported() -> bool:
    """Whether this kernel keys the multipath hash per namespace (``HASH_SEED_SYSCTL``)."""
    return Path("/proc/sys", *HASH_SEED_SYSCTL.split(".")).exists()


def router_sysctls(p: TestbedPlan, ns: str, seeded: bool) -> list[str]:
    """The ``sysctl -w`` settings of router ``ns``: forwarding, no rp_filter, no ICMP rate limit,
    the L4 multipath hash and (``seeded``: the kernel has the knob) its own hash key."""
    return [*ROUTER_SYSCTLS, *([f"{HASH_SEED_SYSCTL}={p.hash_seeds[ns]}"] if seeded else [])]


def zone_side_of(p: TestbedPlan, zns: str) -> str:
    """Address of a zone router's uplink (the region routes the zone's subnets to it)."""
    for line in p.ns_batches[zns]:
        if line.startswith("addr add ") and line.endswith(" dev up0"):
            return line.split()[2].split("/")[0]
    raise AssertionError(f"{zns} has no uplink")


def region_side_of(p: TestbedPlan, rns: str) -> str:
    """Address of a region router's uplink (the core routes the region's subnets to it)."""
    return zone_side_of(p, rns)


def _sshd_config(d: Path, addr: str, authorized: Path) -> str:
    return "\n".join(
        [
            f"ListenAddress {addr}",
            "Port 22",
            f"HostKey {d / 'ssh_host_ed25519_key'}",
            f"PidFile {d / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes yes",
            "UseDNS no",
            "PrintMotd no",
            "X11Forwarding no",
            "MaxSessions 64",
            "MaxStartups 200",
            "LogLevel ERROR",
            # bash sources ~/.bashrc when it thinks sshd started it with SHLVL < 2;
            # the namespaces share root's home, so every command paid ~110 ms for it.
            "SetEnv SHLVL=1",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


class NetnsProvider:
    """Builds a topology out of network namespaces on this machine (needs root)."""

    name = "netns"

    def __init__(self, state_root: str | None = None) -> None:
        self.state_root = Path(state_root or os.environ.get("CLOUDBENCH_STATE", DEFAULT_STATE_ROOT))

    # -- state file -------------------------------------------------------------------
    def _state_path(self, stack: str) -> Path:
        return self.state_root / f"{stack}.json"

    def _write_state(self, stack: str, state: dict[str, Any]) -> None:
        write_json_atomic(self._state_path(stack), state)

    def _claim_stack(self) -> str:
        """A short id no other testbed on this machine holds (its state file, made O_EXCL)."""
        for _ in range(100):
            stack = secrets.token_hex(3)
            if any(n.startswith(f"cb{stack}-") for n in list_netns()):
                continue
            try:
                fd = os.open(self._state_path(stack), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except FileExistsError:
                continue
            os.close(fd)
            return stack
        raise ProvisionError("netns", "-", f"no free testbed id in {self.state_root}")

    # -- provision ----------------------------------------------------------------------
    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        check_prerequisites()
        self.state_root.mkdir(parents=True, exist_ok=True, mode=0o700)
        stack = self._claim_stack()
        base = self.state_root / stack
        plan = plan_testbed(topology, stack)
        state: dict[str, Any] = {
            "stack": stack,
            "created": time.time(),
            "controller_pid": os.getpid(),
            "controller_cmdline": pid_cmdline(os.getpid()),
            "dir": str(base),
            "workdir": str(Path(workdir).resolve()),  # the run's directory (a campaign reaps its own)
            "namespaces": list(plan.routers) + list(plan.host_ns.values()),
            "pids": [],
        }
        self._write_state(stack, state)
        cluster = Cluster("netns", stack, topology, [], base / "client_key")
        try:
            self._build(topology, plan, base, state, cluster)
        except BaseException:
            self.destroy(cluster)
            raise
        return cluster

    def _build(
        self, topology: Topology, plan: TestbedPlan, base: Path, state: dict[str, Any], cluster: Cluster
    ) -> None:
        stack = plan.stack
        base.mkdir(mode=0o700)
        run(["mkdir", "-p", "-m", "0755", "/run/sshd"], stack)  # sshd's privilege separation dir
        ip_batch(plan.root_batch, stack=stack)
        for ns, lines in plan.ns_batches.items():
            ip_batch(lines, ns=ns, stack=stack)
        seeded = hash_seed_supported()
        for ns in plan.routers:
            run(["ip", "netns", "exec", ns, "sysctl", "-qw", *router_sysctls(plan, ns, seeded)], stack)
        wan_facts = None
        if plan.wan is not None:
            from cloudbench.providers.netns.wan import start_wan

            wan_facts = start_wan(plan.wan, base, state, stack, lambda: self._write_state(stack, state),
                                  self.state_root / "bin")

        client = asyncssh.generate_private_key("ssh-ed25519", comment=f"cloudbench-{stack}")
        client.write_private_key(str(cluster.client_key))
        os.chmod(cluster.client_key, 0o600)
        authorized = base / "authorized_keys"
        authorized.write_bytes(client.export_public_key())
        os.chmod(authorized, 0o600)
        kernel = os.uname().release
        procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        for h in topology.hosts:
            hd = base / "hosts" / h.name
            hd.mkdir(parents=True, mode=0o700)
            (hd / "work").mkdir(mode=0o700)
            key = asyncssh.generate_private_key("ssh-ed25519", comment=f"{h.name}-{stack}")
            key.write_private_key(str(hd / "ssh_host_ed25519_key"))
            os.chmod(hd / "ssh_host_ed25519_key", 0o600)
            conf = hd / "sshd_config"
            conf.write_text(_sshd_config(hd, plan.host_addr[h.name], authorized))
            ns = plan.host_ns[h.name]
            proc = subprocess.Popen(
                ["ip", "netns", "exec", ns, SSHD, "-D", "-f", str(conf), "-E", str(hd / "sshd.log")],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the controller, which tears down
            )
            procs.append((h.name, proc))
            state["pids"].append({"pid": proc.pid, "ns": ns, "match": str(conf)})
            cluster.hosts.append(
                HostAccess(
                    spec=h,
                    address=plan.host_addr[h.name],
                    ssh_host=plan.host_addr[h.name],
                    ssh_port=22,
                    user="root",
                    host_key=key.export_public_key().decode().strip(),
                    workdir=str(hd / "work"),
                    netns=ns,
                    facts={"kernel": kernel, "mtu": 1500, "netns": ns, "shaping": None},
                )
            )
        self._write_state(stack, state)
        deadline = time.monotonic() + 10.0
        for name, proc in procs:
            host = cluster.host(name)
            _wait_listening(host, proc, deadline, stack)
        from cloudbench.providers.netns.shaping import apply_physical_hosts, apply_shaping

        apply_shaping(cluster, topology)  # vm_type -> tc on each host's eth0; facts["shaping"]
        # physical_host -> one shared NIC cap per physical host; facts["physical_host"]
        nics = apply_physical_hosts(cluster, topology, plan.host_peer)
        cluster.facts = {"kernel": kernel, "state_file": str(self._state_path(stack)),
                         "routers": plan.routers,
                         # None: an older kernel, whose one key per boot all testbeds share
                         "multipath_hash_seeds": dict(plan.hash_seeds) if seeded else None}
        if nics:
            cluster.facts["physical_hosts"] = nics
        if wan_facts is not None:
            cluster.facts["wan"] = wan_facts

    # -- destroy ------------------------------------------------------------------------
    def preflight(self, topology: Topology) -> list[Finding]:
        """The local testbed has no account: nothing to refuse (root is checked by provision)."""
        return []

    def destroy(self, cluster: Cluster) -> None:
        self._destroy_stack(cluster.stack)

    def _destroy_stack(self, stack: str) -> list[str]:
        removed: list[str] = []
        path = self._state_path(stack)
        try:
            state = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            state = {"namespaces": [n for n in list_netns() if n.startswith(f"cb{stack}-")], "pids": []}
        namespaces = [n for n in state.get("namespaces", []) if n in set(list_netns())]
        victims: list[int] = []
        for rec in state.get("pids", []):
            pid = int(rec["pid"])
            # Only a process we started: its command line still names our config file.
            if pid_alive(pid) and rec.get("match", "") in pid_cmdline(pid):
                victims.append(pid)
        for ns in namespaces:
            victims += netns_pids(ns)  # workers started over SSH inside our namespaces
        _terminate(sorted(set(victims)))
        removed += [f"pid {p}" for p in sorted(set(victims))]
        if namespaces:
            ip_batch([f"netns del {n}" for n in namespaces], stack=stack, force=True)
            removed += [f"netns {n}" for n in namespaces]
        d = Path(state.get("dir", self.state_root / stack))
        if d.exists() and d.parent == self.state_root:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"dir {d}")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return removed

    # -- gc -------------------------------------------------------------------------------
    def gc(self, dry_run: bool = False, include_live: bool = False, under: Path | None = None) -> list[str]:
        """Remove testbeds whose controller is gone (or all, with ``include_live``).

        ``under``: only testbeds provisioned for a run directory under this path.
        """
        stacks: dict[str, str] = {}
        root = None if under is None else Path(under).resolve()
        if self.state_root.exists():
            for p in self.state_root.glob("*.json"):
                stack = p.stem
                try:
                    st = json.loads(p.read_text())
                except json.JSONDecodeError:
                    if root is None:
                        stacks[stack] = "unreadable state file"
                    continue
                if root is not None and not Path(st.get("workdir", "/nonexistent")).is_relative_to(root):
                    continue
                owner = int(st.get("controller_pid", 0))
                alive = pid_alive(owner) and pid_cmdline(owner) == st.get("controller_cmdline")
                if alive and not include_live:
                    continue
                stacks[stack] = "controller alive (forced)" if alive else f"controller {owner} is gone"
        if include_live and root is None:
            # Namespaces of ours with no state file at all (a crash before the state
            # was written, or a state root that was wiped): only on request.
            for ns in list_netns():
                m = NS_RE.match(ns)
                if m and m.group(1) not in stacks and not self._state_path(m.group(1)).exists():
                    stacks[m.group(1)] = "namespaces without a state file"
        out: list[str] = []
        for stack, why in sorted(stacks.items()):
            if dry_run:
                nss = [n for n in list_netns() if n.startswith(f"cb{stack}-")]
                out.append(f"would remove testbed {stack} ({why}): {len(nss)} namespaces")
            else:
                done = self._destroy_stack(stack)
                out.append(f"removed testbed {stack} ({why}): {len(done)} objects")
        return out


def _terminate(pids: list[int], grace: float = 1.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if pid_alive(p) and not _reap(p)]
        if left:
            time.sleep(0.01)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in left:
        _reap(pid)


def _reap(pid: int) -> bool:
    """Collect a child of ours if it exited (so it is not left a zombie)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return not pid_alive(pid) or _is_zombie(pid)
    return done == pid


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_listening(host: HostAccess, proc: subprocess.Popen[bytes], deadline: float, stack: str) -> None:
    assert host.netns is not None
    while True:
        if proc.poll() is not None:
            log = Path(host.workdir).parent / "sshd.log"
            tail = log.read_text()[-500:] if log.exists() else ""
            raise ProvisionError("netns", stack, f"sshd of {host.name} exited ({proc.returncode}): {tail}")
        try:
            connect_in_netns(host.netns, host.address, host.ssh_port, 0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise ProvisionError("netns", stack, f"sshd of {host.name} did not answer in time") from None
            time.sleep(0.005)


def check_prerequisites() -> None:
    """Fail early, with what to do, when the testbed cannot work here."""
    if os.geteuid() != 0:
        raise ProvisionError("netns", "-", "the namespace testbed needs root (run as root or with sudo)")
    for tool in ("ip", SSHD):
        if shutil.which(tool) is None:
            raise ProvisionError(
                "netns", "-", f"{tool} is not installed; install iproute2 and openssh-server "
                "(the README's first command does)"
            )
