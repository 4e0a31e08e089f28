"""A cloud (``aws``, ``gcp``, ``azure``) as a :class:`~cloudbench.providers.base.Provider`.

:class:`PulumiProvider` checks the account before anything exists, creates one stack per
(campaign run, repetition) through :mod:`~cloudbench.providers.clouds.stack` under a
lease (:mod:`~cloudbench.providers.clouds.leases`), turns the stack's outputs into a
:class:`~cloudbench.core.cluster.Cluster`, waits for its VMs, and destroys it again.
"""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.files import utc_stamp
from cloudbench.core.topology import Topology
from cloudbench.errors import CloudbenchError, GroupRemoteError, ProvisionError
from cloudbench.providers.base import FAIL, OK, Finding
from cloudbench.providers.clouds import accounts, hostkeys
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.accounts import Account
from cloudbench.providers.clouds.hostkeys import Fetcher, wait_for_host_keys
from cloudbench.providers.clouds.leases import CLIENT_KEY, forget_secrets, lease_path, reap, write_lease
from cloudbench.providers.clouds.passphrase import ensure_state_dir
from cloudbench.providers.clouds.stack import (
    STATE_DIR,
    Automation,
    PulumiAutomation,
    StackHandle,
    StackRef,
    log_appender,
    manual_destroy_hint,
    run_program,
)
from cloudbench.providers.ready import wait_ready
from cloudbench.spec.clouds import controller_cidr_error, normalize_controller_cidr
from cloudbench.store import formats

READY_TIMEOUT_S = 900.0  # boot + cloud-init installing four packages, with room to spare


# -- from stack outputs to a Cluster ------------------------------------------------------
def cluster_from_outputs(cloud: str, stack: str, topology: Topology, outputs: Mapping[str, Any],
                         settings: cc.CloudSettings, client_key: Path,
                         published_keys: Mapping[str, str] | None = None) -> Cluster:
    """The Cluster of a stack's outputs; host keys are ours (injected) or ``published_keys`` (generated)."""
    meta = outputs.get(cc.OUTPUT_META) or {}
    if meta.get("schema") not in formats.CLOUD_OUTPUTS.readable:
        raise ProvisionError(cloud, stack, f"stack outputs have schema {meta.get('schema')!r}, "
                             f"expected one of {sorted(formats.CLOUD_OUTPUTS.readable)} "
                             "(program and driver disagree)")
    recs: Mapping[str, Any] = outputs.get(cc.OUTPUT_HOSTS) or {}
    hosts: list[HostAccess] = []
    for h in topology.hosts:
        rec = recs.get(h.name)
        if rec is None:
            raise ProvisionError(cloud, stack, f"the stack made no VM for host {h.name}")
        if not rec.get("private_ip") or not rec.get("public_ip"):
            raise ProvisionError(cloud, stack, f"VM of {h.name} has no private and public address "
                                 f"yet (got {rec.get('private_ip')!r}, {rec.get('public_ip')!r})")
        hosts.append(HostAccess(
            spec=h,
            address=str(rec["private_ip"]),
            ssh_host=str(rec["public_ip"]),
            ssh_port=cc.SSH_PORT,
            user=str(meta.get("user", cc.USER)),
            # ours, or read from the cloud's API; never whatever the stack outputs say
            host_key=(settings.host_keys[h.name].public if settings.host_key_mode == "injected"
                      else (published_keys or {})[h.name]),
            workdir=str(meta.get("workdir", cc.WORKDIR)),
            facts={"cloud": cloud, "instance_id": rec.get("id"), "zone_id": rec.get("zone_id"),
                   "vm_type": h.vm_type},
        ))
    return Cluster(cloud, stack, topology, hosts, client_key,
                   facts={"expiry_utc": settings.expiry_utc, "owner": settings.owner})


def ready_check_command() -> str:
    """Waits for cloud-init, then names any measurement tool it failed to install."""
    tools = " ".join(cc.PACKAGES)
    return ("cloud-init status --wait >/dev/null 2>&1; st=$?; missing=; "
            f"for t in {tools}; do command -v $t >/dev/null 2>&1 || missing=\"$missing $t\"; done; "
            "if [ -n \"$missing\" ]; then echo \"cloud-init status $st; missing:$missing\" >&2; exit 1; fi")


def default_wait_ready(cluster: Cluster) -> None:
    """Wait until every VM finished cloud-init with its tools installed (:func:`ready_check_command`)."""
    try:
        wait_ready(cluster, ready_check_command(), READY_TIMEOUT_S, poll=5.0)
    except GroupRemoteError as e:
        raise ProvisionError(cluster.provider, cluster.stack, f"VMs are not ready: {e}") from e


# -- the provider ------------------------------------------------------------------------------
@dataclass
class _Live:
    ref: StackRef
    handle: StackHandle
    log: Path


@dataclass
class PulumiProvider:
    """A cloud (``aws``, ``gcp``, ``azure``) as a :class:`~cloudbench.providers.base.Provider`.

    ``options`` is the spec's provider entry (controller_cidr, owner, expiry, …).
    """

    name: str
    options: Any
    campaign: str
    automation: Automation = field(default_factory=PulumiAutomation)
    wait_ready: Callable[[Cluster], None] = default_wait_ready
    results_root: Path | None = None
    clock: Callable[[], float] = time.time
    fetch_host_key: Fetcher | None = None  # host_keys: generated (default: the cloud's SDK)
    # The preflight's view of the account: (cloud, GCP project or Azure subscription) -> Account
    # on the cloud's SDK (default), and where the project or subscription is looked up.
    account: Callable[[str, str | None], Account] | None = None
    env: Mapping[str, str] | None = None  # default os.environ
    home: Path | None = None  # default the user's home
    adc_project: Callable[[], str | None] = accounts.adc_project  # last resort: google.auth.default()
    _live: dict[str, _Live] = field(default_factory=dict, init=False)
    _count: int = field(default=0, init=False)
    _target: str | None = field(default=None, init=False)  # the resolved project / subscription
    _preflown: bool = field(default=False, init=False)

    def preflight(self, topology: Topology) -> list[Finding]:
        """Before anything exists: the project or subscription (resolved as the cloud's CLI does),
        the SDK clients the run needs after ``up`` (the host-key fetcher, the account's), live
        credentials, offers of each (zone, vm type), and the vCPU and network quotas."""
        topo = topology.for_provider(self.name)
        env = os.environ if self.env is None else self.env
        home = Path.home() if self.home is None else self.home
        out: list[Finding] = []
        target: str | None = None
        if self.name == "gcp":
            target, source = accounts.gcp_project(getattr(self.options, "project", None), env, home)
            if not target:
                target, source = self.adc_project(), "the application default credentials (google.auth.default)"
            if not target:
                return [Finding("gcp project", FAIL, "none found (spec, environment, gcloud configuration, "
                                "application default credentials)", accounts.GCP_PROJECT_FIX)]
            out.append(Finding("gcp project", OK, f"{target} (from {source})"))
        elif self.name == "azure":
            target, source = accounts.azure_subscription(env, home)
            if not target:
                return [Finding("azure subscription", FAIL, "none found ($ARM_SUBSCRIPTION_ID, "
                                "$AZURE_SUBSCRIPTION_ID, the Azure CLI's default)", accounts.AZURE_SUBSCRIPTION_FIX)]
            out.append(Finding("azure subscription", OK, f"{target} (from {source})"))
        self._target = target
        try:
            if self.options.host_keys == "generated" and self.fetch_host_key is None:
                self.fetch_host_key = self._host_key_fetcher()  # built now: a missing SDK shows before `up`
            account = (self.account or accounts.real_account)(self.name, target)
        except ProvisionError as e:
            why = str(e).removeprefix(f"{e.provider} [{e.stack}]: ")
            return [*out, Finding(f"{self.name} SDK", FAIL, why, f"pip install 'cloudbench[{self.name}]'")]
        except Exception as e:  # the SDK's own errors (e.g. no credentials at all)
            return [*out, Finding(f"{self.name} credentials", FAIL, f"{type(e).__name__}: {e}",
                                  accounts.CREDENTIALS_FIX[self.name])]
        out += accounts.check_account(account, topo)
        self._preflown = not any(f.blocks for f in out)
        return out

    def _check_preflight(self, topology: Topology) -> None:
        """Run the preflight once (the runner may have); refuse with every blocking finding."""
        if self._preflown:
            return
        refused = [f for f in self.preflight(topology) if f.blocks]
        if refused:
            raise ProvisionError(self.name, "-", "the account would refuse this topology (nothing was "
                                 "created):\n  " + "\n  ".join(f.line() for f in refused))

    def provision(self, topology: Topology, workdir: Path) -> Cluster:
        """A new stack of ``topology``'s hosts on this cloud, its VMs ready; whatever a failure
        (or Ctrl-C) leaves is destroyed before the error is raised."""
        topo = topology.for_provider(self.name)
        if not topo.hosts:
            raise ProvisionError(self.name, "-", "the topology has no hosts on this provider")
        controller = self._controller_cidr()
        self.automation.preflight(self.name)  # no or old Pulumi CLI: say so before anything exists
        self._check_preflight(topo)  # the account: credentials, offers, quotas
        stack_dir = self._new_stack_dir(Path(workdir))
        stack = stack_dir.name
        ref = StackRef(self.name, f"cloudbench-{self.name}", stack, Path(workdir).parent / STATE_DIR)
        now = self.clock()
        expiry = now + float(self.options.expiry)
        settings = self._settings(topo, stack_dir, controller, expiry)
        try:
            cc.check_settings(topo, settings)
            cc.plan_addresses(topo)
        except ValueError as e:
            raise ProvisionError(self.name, stack, str(e)) from e
        ensure_state_dir(ref.state_dir)
        lease = write_lease(ref, self.campaign, Path(workdir), now, expiry, settings.owner)
        try:
            return self._bring_up(ref, topo, settings, stack_dir)
        except BaseException as e:
            # Also after a partial `up` or Ctrl-C: whatever exists is destroyed now.
            if stack not in self._live:
                lease.unlink(missing_ok=True)  # no stack was created
                forget_secrets(stack_dir)
            else:
                try:
                    self._destroy_stack(stack)
                except CloudbenchError as de:
                    e.add_note(f"cleanup after the failure also failed: {de}")
            if isinstance(e, CloudbenchError | KeyboardInterrupt) or not isinstance(e, Exception):
                raise
            raise ProvisionError(self.name, stack, f"{type(e).__name__}: {e}") from e

    def _controller_cidr(self) -> str:
        """The controller's address for the SSH rule (the spec's, else the environment's), checked
        here once and normalized (``203.0.113.7`` → ``203.0.113.7/32``)."""
        controller, source = cc.controller_cidr(self.name, self.options.controller_cidr, os.environ)
        if not controller:
            raise ProvisionError(self.name, "-", "SSH is opened only to the controller's address: "
                                 + cc.controller_cidr_fix(self.name))
        problem = controller_cidr_error(controller)
        if problem:  # the spec's value was checked with its line; this may be the environment's
            raise ProvisionError(self.name, "-", f"controller_cidr ({source}): {problem}")
        return normalize_controller_cidr(controller)

    def _new_stack_dir(self, workdir: Path) -> Path:
        """``<run>/stacks/<stack>``, made private; a stack name is never reused, even by another
        provider object."""
        while True:
            self._count += 1
            stack_dir = workdir / "stacks" / f"{workdir.name}-r{self._count:02d}"
            if not stack_dir.exists():
                break
        stack_dir.mkdir(parents=True, mode=0o700)
        return stack_dir

    def _settings(self, topo: Topology, stack_dir: Path, controller: str, expiry: float) -> cc.CloudSettings:
        """The program's inputs; makes the stack's client key (``stack_dir/client_key``)."""
        stack = stack_dir.name
        client = asyncssh.generate_private_key("ssh-ed25519", comment=f"cloudbench-{stack}")
        _write_private(stack_dir / CLIENT_KEY, client.export_private_key())
        return cc.CloudSettings(
            cloud=self.name, campaign=self.campaign, stack=stack,
            owner=self.options.owner or getpass.getuser(), expiry_utc=utc_stamp(expiry),
            controller_cidr=controller,
            client_public_key=client.export_public_key().decode().strip(),
            host_keys=(cc.new_host_keys([h.name for h in topo.hosts], stack)
                       if self.options.host_keys == "injected" else {}),
            host_key_mode=self.options.host_keys,
            placement_group=bool(self.options.placement_group), image=self.options.image,
            project=self._target,  # GCP project / Azure subscription, resolved by the preflight
        )

    def _bring_up(self, ref: StackRef, topo: Topology, settings: cc.CloudSettings, stack_dir: Path) -> Cluster:
        """``pulumi up``, the host keys (generated ones: read from the cloud), the ready VMs."""
        program_file = cc.write_program_file(stack_dir / cc.PROGRAM_FILE, topo, settings)
        handle = self.automation.stack(
            ref, program=lambda: run_program(self.name, topo.to_dict(), settings),
            config=cc.stack_config(topo, settings, program_file))
        log = stack_dir / "pulumi.log"
        self._live[ref.stack] = _Live(ref, handle, log)
        with log_appender(log) as out:
            outputs = handle.up(out)
        published = None
        if settings.host_key_mode == "generated":
            records = dict(outputs.get(cc.OUTPUT_HOSTS) or {})
            published = wait_for_host_keys(self.name, ref.stack, records, self._host_key_fetcher(),
                                           READY_TIMEOUT_S)
        cluster = cluster_from_outputs(self.name, ref.stack, topo, outputs, settings, stack_dir / CLIENT_KEY,
                                       published)
        self.wait_ready(cluster)
        return cluster

    def _host_key_fetcher(self) -> Fetcher:
        if self.fetch_host_key is not None:
            return self.fetch_host_key
        if self.name == "aws":
            return hostkeys.aws_fetcher()
        if self.name == "gcp":
            return hostkeys.gcp_fetcher(self._target or "")
        return hostkeys.azure_fetcher(self._target or "")

    def destroy(self, cluster: Cluster) -> None:
        self._destroy_stack(cluster.stack)

    def _destroy_stack(self, stack: str) -> None:
        live = self._live.get(stack)
        if live is None:
            return  # never made here, or already destroyed
        lease = lease_path(live.ref)
        try:
            with log_appender(live.log) as out:
                live.handle.destroy(out)
            live.handle.remove()
        except Exception as e:  # the adapter's are ProvisionErrors; anything else is reported alike
            raise ProvisionError(
                self.name, stack, f"destroy failed: {e}. The lease {lease} stays: `cloudbench gc "
                f"--results {live.ref.state_dir.parent.parent}` retries; check the {self.name} "
                "console for resources tagged cloudbench-stack=" + stack
                + f", or {manual_destroy_hint(live.ref)}") from e
        finally:  # destroyed, failed or interrupted: the private keys go all the same
            forget_secrets(live.log.parent)
        del self._live[stack]
        lease.unlink(missing_ok=True)

    def gc(self, dry_run: bool = False) -> list[str]:
        if self.results_root is None:
            return []
        return reap(self.results_root, dry_run=dry_run, automation=self.automation)


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start: never readable by others, not even for a moment.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)

