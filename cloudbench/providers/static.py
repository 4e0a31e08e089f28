"""Bring your own hosts: run campaigns on machines that already exist.

Nothing is created but one work directory per host and campaign run
(``~/.cloudbench/<campaign>-<id>`` unless a host sets ``workdir``); ``destroy``
removes exactly that directory. Host keys are pinned from the spec — there is
no trust on first use — so a host that presents another key is refused.
"""

from __future__ import annotations

import os
import secrets
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.topology import Topology
from cloudbench.errors import GroupRemoteError, ProvisionError
from cloudbench.providers.base import Finding
from cloudbench.providers.clouds.common import cloud_slug
from cloudbench.providers.ready import wait_ready
from cloudbench.spec.providers import StaticHostModel, StaticProviderModel

DEFAULT_BASE = "$HOME/.cloudbench"  # expanded by the host's shell, not here


@dataclass
class StaticProvider:
    """The provider of ``providers.static``: hosts that already exist, reached with the spec's
    key and pinned host keys; it creates and destroys only one work directory per host."""

    options: StaticProviderModel
    campaign: str
    spec_dir: Path | None = None
    ready_timeout: float = 30.0
    name: str = "static"
    _dirs: dict[str, dict[str, str]] = field(default_factory=dict, init=False)

    def key_path(self) -> Path:
        p = Path(self.options.key).expanduser()
        if not p.is_absolute() and self.spec_dir is not None:
            p = self.spec_dir / p
        return p

    def _check_key(self, stack: str) -> Path:
        p = self.key_path()
        try:
            mode = p.stat().st_mode
        except FileNotFoundError:
            raise ProvisionError("static", stack, f"SSH key {p} does not exist "
                                 "(providers.static.key)") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ProvisionError("static", stack, f"SSH key {p} is readable by others "
                                 f"(mode {stat.S_IMODE(mode):o}); run `chmod 600 {p}`")
        try:
            asyncssh.read_private_key(str(p))
        except (asyncssh.KeyImportError, OSError) as e:
            raise ProvisionError("static", stack, f"cannot use SSH key {p}: {e} (an unencrypted "
                                 "OpenSSH private key is needed)") from e
        return p

    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        topo = topology.for_provider(self.name)
        stack = f"{cloud_slug(self.campaign, 24)}-{secrets.token_hex(3)}"
        key = self._check_key(stack)
        models = {h.name: h for h in self.options.hosts}
        hosts: list[HostAccess] = []
        for h in topo.hosts:
            m = models[h.name]
            user = m.user or self.options.user
            if user is None or m.host_key is None:  # the spec checks refuse this already
                raise ProvisionError("static", stack, f"host {h.name} needs `user` and `host_key`")
            hosts.append(HostAccess(
                spec=h, address=m.address, ssh_host=m.ssh_host or m.address, ssh_port=m.port,
                user=user, host_key=m.host_key.strip(), workdir="", python=m.python, netns=m.netns,
                facts={"static": True}))
        cluster = Cluster("static", stack, topo, hosts, key, facts={"hosts": "existing"})

        def prepare(h: HostAccess) -> str:
            d = _workdir(models[h.name], stack)
            py = shlex.quote(h.python)
            return (f"umask 077 && mkdir -p {d} && cd {d} && pwd && "
                    f"{{ command -v {py} >/dev/null || {{ echo 'no {h.python} on this host' >&2; exit 3; }}; }}")

        try:
            results = wait_ready(cluster, prepare, self.ready_timeout, poll=1.0,
                                 connect_timeout=min(10.0, self.ready_timeout))
        except GroupRemoteError as e:
            self._dirs[stack] = {r: _workdir(models[r], stack) for r in e.succeeded}
            try:
                self.destroy(cluster)
            except ProvisionError as de:
                e.add_note(str(de))
            raise ProvisionError("static", stack, f"hosts are not usable: {e}") from e
        for ha in hosts:
            ha.workdir = results[ha.name].stdout.strip().splitlines()[-1]
        self._dirs[stack] = {ha.name: ha.workdir for ha in hosts}
        return cluster

    def preflight(self, topology: Topology) -> list[Finding]:
        """Existing hosts: no account to refuse anything (unreachable hosts show at provision)."""
        return []

    def destroy(self, cluster: Cluster) -> None:
        dirs = self._dirs.pop(cluster.stack, None)
        if not dirs:
            return
        hosts = [h for h in cluster.hosts if h.name in dirs]
        for h in hosts:
            if h.workdir:
                dirs[h.name] = shlex.quote(h.workdir)
        from cloudbench.core.interrupts import run_async
        from cloudbench.remote import Remote

        async def remove() -> list[str]:
            async with Remote(cluster) as remote:
                results = await remote.fan_out(
                    lambda h: remote.run(h, f"rm -rf -- {dirs[h.name]}", timeout=60), hosts)
            return [r.failure.describe() for r in results if r.failure is not None]

        failed = run_async(remove())
        if failed:
            raise ProvisionError("static", cluster.stack, "could not remove the work directory on: "
                                 + "; ".join(failed) + " (remove it by hand)")

    def gc(self, dry_run: bool = False) -> list[str]:
        return []  # existing hosts keep nothing of ours outside the work directory


def _workdir(m: StaticHostModel, stack: str) -> str:
    """Shell text of a host's work directory (``$HOME`` expands on the host)."""
    if m.workdir:
        return shlex.quote(os.path.join(m.workdir, stack))
    return f'"{DEFAULT_BASE}/{stack}"'
