"""Cloud backend: the programs of :mod:`cloudbench.providers.clouds.programs` driven by Pulumi's Automation API.

One stack per (campaign run, repetition), state in a local file backend under
the campaign's result directory (``file://results/<campaign>/.pulumi``), so the
run's records and what it created live side by side. Every stack gets a *lease*
file, written before ``up``: cloud, stack, expiry, and which controller process
owns it. ``destroy`` removes the lease after the stack is gone; a lease left
behind (crash, second Ctrl-C, failed destroy) is what :func:`reap` — ``cloudbench gc``
— finds once the lease expired or its controller died.

The Automation API is reached through :class:`Automation`, a two-method
interface, so tests drive the provider with a fake and no Pulumi CLI.
"""

from __future__ import annotations

import contextlib
import getpass
import importlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

import asyncssh

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.core.topology import Topology
from cloudbench.errors import CloudbenchError, ProvisionError, ReapError
from cloudbench.providers.base import FAIL, OK, Finding
from cloudbench.providers.clouds import accounts
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.accounts import Account
from cloudbench.providers.clouds.cli import PulumiCli, find_cli
from cloudbench.providers.clouds.hostkeys import Fetcher, wait_for_host_keys
from cloudbench.spec.clouds import controller_cidr_error, normalize_controller_cidr
from cloudbench.spec.providers import DESTROY_TIMEOUT_S
from cloudbench.store import formats

STATE_DIR = ".pulumi"  # under results/<campaign>/
LEASES = "cloudbench-leases"
WORKSPACES = "workspaces"
PASSPHRASE = "passphrase"  # where old runs kept it, beside the state; moved to the secrets dir on use
PASSPHRASE_ID = "passphrase-id"  # in the state dir: which passphrase of the secrets dir is this state's
SECRETS_ENV = "CLOUDBENCH_SECRETS_DIR"
DESTROY_RETRY_S = 30.0  # before the one retry of a failed destroy: detachments and deletions settle
READY_TIMEOUT_S = 900.0  # boot + cloud-init installing four packages, with room to spare
ConfigMap = Mapping[str, tuple[str, bool]]  # key -> (value, secret)
Output = Callable[[str], None]


# -- the Automation API, behind a small interface ----------------------------------------
@dataclass(frozen=True)
class StackRef:
    """Where a stack lives: everything needed to select it again, e.g. from the reaper."""

    cloud: str
    project: str
    stack: str
    state_dir: Path  # results/<campaign>/.pulumi, always absolute (see __post_init__)

    def __post_init__(self) -> None:
        # The Pulumi CLI runs in work_dir and resolves relative paths there, so the backend
        # URL and the passphrase file handed to it must not depend on our working directory.
        object.__setattr__(self, "state_dir", Path(self.state_dir).resolve())

    @property
    def backend_url(self) -> str:
        return f"file://{self.state_dir}"

    @property
    def work_dir(self) -> Path:
        return self.state_dir / WORKSPACES / self.project

    @property
    def passphrase_file(self) -> Path:
        """This state's passphrase: in the secrets dir (:func:`secrets_dir`), never under results/."""
        return passphrase_path(self.state_dir)


class StackHandle(Protocol):
    def up(self, on_output: Output) -> dict[str, Any]:
        """Create or update the stack's resources; returns the stack outputs as plain values."""
        ...

    def destroy(self, on_output: Output) -> None: ...

    def remove(self) -> None:
        """Forget the (empty) stack in the backend."""
        ...


class Automation(Protocol):
    def preflight(self, cloud: str) -> None:
        """Raise a :class:`ProvisionError` saying what to do if stacks cannot be driven (no or old CLI)."""
        ...

    def stack(self, ref: StackRef, program: Callable[[], None] | None = None,
              config: ConfigMap | None = None) -> StackHandle:
        """Create or select ``ref``; ``program`` is None when only destroying."""
        ...


def _noop_program() -> None:
    """Destroy needs only the state, but an inline stack needs some program."""


def manual_destroy_hint(ref: StackRef) -> str:
    """What a user types to destroy a stack by hand (the CLI's own words; no secret in it)."""
    return (f"by hand: `cd stacks/{ref.cloud} && PULUMI_BACKEND_URL={ref.backend_url} "
            f"PULUMI_CONFIG_PASSPHRASE_FILE={ref.passphrase_file} pulumi destroy --stack {ref.stack}`")


@dataclass
class PulumiAutomation:
    """The real :class:`Automation`: ``pulumi.automation`` with a local file backend.

    ``cancel_wait_s`` bounds both how long an interrupted ``pulumi`` is given to save
    its state and how long a destroy waits for the stack's lock (the spec's
    ``destroy_timeout``): clouds take minutes to finish what they started.
    """

    cancel_wait_s: float = DESTROY_TIMEOUT_S
    find: Callable[[str], PulumiCli] = find_cli
    destroy_retry_s: float = DESTROY_RETRY_S
    _cli: PulumiCli | None = field(default=None, init=False)

    def preflight(self, cloud: str) -> None:
        try:
            import pulumi.automation  # noqa: F401
        except ImportError as e:
            raise ProvisionError(cloud, "-", "the Pulumi SDK is not installed: "
                                 f"pip install 'cloudbench[{cloud}]'") from e
        if self._cli is None:
            self._cli = self.find(cloud)

    def stack(self, ref: StackRef, program: Callable[[], None] | None = None,
              config: ConfigMap | None = None) -> StackHandle:
        self.preflight(ref.cloud)
        assert self._cli is not None
        from pulumi import automation as auto

        from cloudbench.providers.clouds.command import ForwardingCommand

        passphrase = ensure_passphrase(ref.state_dir)
        ref.work_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        command = ForwardingCommand(self._cli, self.cancel_wait_s)
        try:
            opts = auto.LocalWorkspaceOptions(
                work_dir=str(ref.work_dir),
                project_settings=auto.ProjectSettings(
                    name=ref.project, runtime="python", backend=auto.ProjectBackend(ref.backend_url)),
                secrets_provider="passphrase",
                # Paths only: the passphrase itself is in no process's environment.
                env_vars={
                    "PULUMI_CONFIG_PASSPHRASE_FILE": str(passphrase),
                    "PULUMI_BACKEND_URL": ref.backend_url,
                    "PULUMI_SKIP_UPDATE_CHECK": "true",
                },
                pulumi_command=command,
            )
            st = auto.create_or_select_stack(ref.stack, project_name=ref.project,
                                             program=program or _noop_program, opts=opts)
            if config:
                st.set_all_config({k: auto.ConfigValue(v, secret=s) for k, (v, s) in config.items()})
        except auto.errors.CommandError as e:
            raise ProvisionError(ref.cloud, ref.stack, f"cannot create or select the stack: {_tail(e)}; "
                                 f"the backend is {ref.backend_url}") from e
        except Exception as e:  # anything else of the SDK: a message, not a traceback
            raise ProvisionError(ref.cloud, ref.stack, f"cannot create or select the stack "
                                 f"({type(e).__name__}: {_tail(e)}); the backend is {ref.backend_url}") from e
        return _AutoStack(st, ref, self.cancel_wait_s, self.destroy_retry_s)


class _AutoStack:
    def __init__(self, st: Any, ref: StackRef, lock_wait_s: float = DESTROY_TIMEOUT_S,
                 retry_after_s: float = DESTROY_RETRY_S) -> None:
        self.st = st
        self.ref = ref
        self.lock_wait_s = lock_wait_s
        self.retry_after_s = retry_after_s

    def _error(self, what: str, e: Exception, todo: str) -> ProvisionError:
        from pulumi import automation as auto

        why = _tail(e) if isinstance(e, auto.errors.CommandError) else f"{type(e).__name__}: {_tail(e)}"
        return ProvisionError(self.ref.cloud, self.ref.stack, f"pulumi {what} failed: {why}; {todo}")

    def up(self, on_output: Output) -> dict[str, Any]:
        try:
            res = self.st.up(on_output=on_output, color="never", suppress_progress=True)
            return {k: v.value for k, v in res.outputs.items()}
        except Exception as e:
            raise self._error("up", e, "what it created is destroyed now") from e

    def destroy(self, on_output: Output) -> None:
        from pulumi import automation as auto

        # After Ctrl-C the interrupted `pulumi up` may still hold the stack's lock while it
        # saves its state; wait for it (as long as the cloud may need) rather than leak.
        # continue_on_error: one resource the cloud refuses (a security group still attached)
        # does not keep Pulumi from deleting all the others; what failed is tried once more.
        deadline = time.monotonic() + self.lock_wait_s
        failed = 0
        while True:
            try:
                self.st.destroy(on_output=on_output, color="never", suppress_progress=True,
                                continue_on_error=True)
                return
            except auto.errors.ConcurrentUpdateError as e:
                if time.monotonic() > deadline:
                    raise self._error("destroy", e, f"the stack was still locked after "
                                      f"{self.lock_wait_s:.0f} s (destroy_timeout); if no pulumi "
                                      f"runs any more, `pulumi cancel --stack {self.ref.stack}` "
                                      f"frees it, then {manual_destroy_hint(self.ref)}") from e
                time.sleep(2.0)
            except Exception as e:
                failed += 1
                if failed == 1:
                    on_output(f"cloudbench: destroy failed ({_tail(e, 300)}); trying once more "
                              f"in {self.retry_after_s:.0f} s")
                    time.sleep(self.retry_after_s)
                    continue
                raise self._error("destroy", e, f"tried twice; {self.remaining()}; to finish: "
                                  + manual_destroy_hint(self.ref)) from e

    def remaining(self) -> str:
        """What the stack's state still holds, for the message of a failed destroy."""
        try:
            resources = self.st.export_stack().deployment.get("resources", [])
        except Exception as e:  # the message must not fail for it
            return f"cannot list what is left ({type(e).__name__}: {_tail(e, 200)})"
        left = [f"{r.get('type')} {str(r.get('urn', '')).rsplit('::', 1)[-1]}"
                + (f" ({r['id']})" if r.get("id") else "")
                for r in resources if isinstance(r, dict) and not str(r.get("type", "")).startswith(
                    ("pulumi:pulumi:Stack", "pulumi:providers:"))]
        return ("left in the stack: " + ", ".join(left)) if left else "the state lists nothing left"

    def remove(self) -> None:
        try:
            self.st.workspace.remove_stack(self.ref.stack)
        except Exception as e:
            raise self._error("stack rm", e, "the stack is empty; `pulumi stack rm "
                              f"{self.ref.stack}` forgets it") from e


def _tail(e: BaseException, n: int = 1500) -> str:
    text = str(e).strip()
    return text if len(text) <= n else "…" + text[-n:]


def ensure_state_dir(state_dir: Path) -> Path:
    """The campaign's Pulumi state directory, private to its owner (it maps our whole cloud footprint)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    return state_dir


def secrets_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where state passphrases are kept: ``$CLOUDBENCH_SECRETS_DIR``, else
    ``$XDG_STATE_HOME/cloudbench/secrets``, else ``~/.local/state/cloudbench/secrets`` —
    outside results/, so sharing a results folder never ships them."""
    env = os.environ if env is None else env
    if env.get(SECRETS_ENV):
        return Path(env[SECRETS_ENV]).expanduser()
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "cloudbench" / "secrets"


def _state_id(state_dir: Path, create: bool) -> str | None:
    """The random, non-secret name of a state's passphrase (``.pulumi/passphrase-id``)."""
    path = state_dir / PASSPHRASE_ID
    if not path.exists() and create:
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(f"cloudbench-{secrets.token_hex(16)}\n")
    return path.read_text().strip() if path.exists() else None


def passphrase_path(state_dir: Path) -> Path:
    """Where the passphrase of ``state_dir`` is (or will be): ``secrets_dir()/<its id>``.

    The id lives in the state dir, so results that moved (or a copy for ``run --resume``,
    ``gc`` and the lease reaper) still find it; the passphrase itself does not travel.
    """
    state_id = _state_id(Path(state_dir), create=False)
    return secrets_dir() / (state_id or f"(not made yet: {Path(state_dir) / PASSPHRASE_ID})")


def ensure_passphrase(state_dir: Path) -> Path:
    """The campaign's secrets passphrase (mode 0600): encrypts host keys in the stack state.

    Made on first use in :func:`secrets_dir`; a state whose id is known but whose passphrase
    is not there (results copied from another machine) is refused with what to copy where.
    One an older cloudbench left beside the state is moved there.
    """
    ensure_state_dir(state_dir)
    legacy = state_dir / PASSPHRASE
    fresh = not (state_dir / PASSPHRASE_ID).exists()
    state_id = _state_id(state_dir, create=True)
    assert state_id is not None
    store = secrets_dir()
    store.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = store / state_id
    if legacy.exists() and not path.exists():
        _write_secret(path, legacy.read_text())
        legacy.unlink()
    elif not path.exists():
        if not fresh:
            raise ProvisionError("pulumi", "-", f"the passphrase of the Pulumi state {state_dir} is not in "
                                 f"{store} (file {state_id}): copy it there from the machine that ran the "
                                 f"campaign (or set ${SECRETS_ENV} to the directory holding it)")
        _write_secret(path, secrets.token_urlsafe(32))
    return path


def _write_secret(path: Path, text: str) -> None:
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)


def run_program(cloud: str, topology: dict[str, Any], settings: cc.CloudSettings) -> None:
    """The inline program: import the cloud's module only now (its SDK is an extra)."""
    from cloudbench.providers.clouds.programs import EXTRAS, PROGRAM_MODULES

    try:
        module = importlib.import_module(PROGRAM_MODULES[cloud])
    except ImportError as e:
        raise ProvisionError(cloud, settings.stack, f"{EXTRAS[cloud]} is not installed: "
                             f"pip install 'cloudbench[{cloud}]'") from e
    module.program(topology, settings)


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
    from cloudbench.errors import GroupRemoteError
    from cloudbench.providers.ready import wait_ready

    try:
        wait_ready(cluster, ready_check_command(), READY_TIMEOUT_S, poll=5.0)
    except GroupRemoteError as e:
        raise ProvisionError(cluster.provider, cluster.stack, f"VMs are not ready: {e}") from e


# -- leases ----------------------------------------------------------------------------------
def lease_path(ref: StackRef) -> Path:
    return ref.state_dir / LEASES / f"{ref.project}.{ref.stack}.json"


def _controller() -> dict[str, Any]:
    from cloudbench.core.processes import pid_cmdline

    pid = os.getpid()
    return {"pid": pid, "cmdline": pid_cmdline(pid), "host": socket.gethostname()}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _ref_from_lease(path: Path, lease: Mapping[str, Any]) -> StackRef:
    # Paths come from where the lease is, not from what it says: results may have moved.
    return StackRef(str(lease["cloud"]), str(lease["project"]), str(lease["stack"]), path.parent.parent)


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
            why = str(e).removeprefix(f"{e.backend} [{e.stack}]: ")
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
        topo = topology.for_provider(self.name)
        if not topo.hosts:
            raise ProvisionError(self.name, "-", "the topology has no hosts on this provider")
        controller, source = cc.controller_cidr(self.name, self.options.controller_cidr, os.environ)
        if not controller:
            raise ProvisionError(self.name, "-", "SSH is opened only to the controller's address: "
                                 + cc.controller_cidr_fix(self.name))
        problem = controller_cidr_error(controller)
        if problem:  # the spec's value was checked with its line; this may be the environment's
            raise ProvisionError(self.name, "-", f"controller_cidr ({source}): {problem}")
        controller = normalize_controller_cidr(controller)
        self.automation.preflight(self.name)  # no or old Pulumi CLI: say so before anything exists
        self._check_preflight(topo)  # the account: credentials, offers, quotas
        while True:  # a stack name is never reused, even by another provider object
            self._count += 1
            stack = f"{Path(workdir).name}-r{self._count:02d}"
            stack_dir = Path(workdir) / "stacks" / stack
            if not stack_dir.exists():
                break
        ref = StackRef(self.name, f"cloudbench-{self.name}", stack, Path(workdir).parent / STATE_DIR)
        stack_dir.mkdir(parents=True, mode=0o700)
        client_key = stack_dir / CLIENT_KEY
        client = asyncssh.generate_private_key("ssh-ed25519", comment=f"cloudbench-{stack}")
        _write_private(client_key, client.export_private_key())
        now = self.clock()
        expiry = now + float(self.options.expiry)
        settings = cc.CloudSettings(
            cloud=self.name, campaign=self.campaign, stack=stack,
            owner=self.options.owner or getpass.getuser(), expiry_utc=_utc(expiry),
            controller_cidr=controller,
            client_public_key=client.export_public_key().decode().strip(),
            host_keys=(cc.new_host_keys([h.name for h in topo.hosts], stack)
                       if self.options.host_keys == "injected" else {}),
            host_key_mode=self.options.host_keys,
            placement_group=bool(self.options.placement_group), image=self.options.image,
            project=self._target,  # GCP project / Azure subscription, resolved by the preflight
        )
        try:
            cc.check_settings(topo, settings)
            cc.plan_addresses(topo)
        except ValueError as e:
            raise ProvisionError(self.name, stack, str(e)) from e
        ensure_state_dir(ref.state_dir)
        lease = lease_path(ref)
        _write_json(lease, {
            "cloud": self.name, "project": ref.project, "stack": stack, "campaign": self.campaign,
            "run_dir": str(Path(workdir).resolve()), "created": now, "created_utc": _utc(now),
            "expiry": expiry, "expiry_utc": settings.expiry_utc, "owner": settings.owner,
            "controller": _controller(),
        })
        log = stack_dir / "pulumi.log"
        handle: StackHandle | None = None
        try:
            program_file = cc.write_program_file(stack_dir / cc.PROGRAM_FILE, topo, settings)
            handle = self.automation.stack(
                ref, program=lambda: run_program(self.name, topo.to_dict(), settings),
                config=cc.stack_config(topo, settings, program_file))
            self._live[stack] = _Live(ref, handle, log)
            with _appender(log) as out:
                outputs = handle.up(out)
            published = None
            if settings.host_key_mode == "generated":
                records = dict(outputs.get(cc.OUTPUT_HOSTS) or {})
                published = wait_for_host_keys(self.name, stack, records, self._host_key_fetcher(),
                                               READY_TIMEOUT_S)
            cluster = cluster_from_outputs(self.name, stack, topo, outputs, settings, client_key, published)
            self.wait_ready(cluster)
        except BaseException as e:
            # Also after a partial `up` or Ctrl-C: whatever exists is destroyed now.
            if handle is None:
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
        return cluster

    def _host_key_fetcher(self) -> Fetcher:
        if self.fetch_host_key is not None:
            return self.fetch_host_key
        from cloudbench.providers.clouds import hostkeys

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
            with _appender(live.log) as out:
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


CLIENT_KEY = "client_key"
SECRET_FILES = (cc.PROGRAM_FILE, cc.PROGRAM_FILE + ".tmp", CLIENT_KEY)


def forget_secrets(stack_dir: Path) -> None:
    """Delete the private keys a stack's run directory holds (the program inputs with the
    injected host keys, the client key) once the stack is destroyed or its destroy failed.

    Neither is needed to destroy the stack later (``pulumi destroy`` does not run the
    program; the reaper and ``gc`` need only the state and its passphrase), and a results
    folder is made to be shared.
    """
    for name in SECRET_FILES:
        (Path(stack_dir) / name).unlink(missing_ok=True)


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start: never readable by others, not even for a moment.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def _appender(path: Path) -> Any:
    f: IO[str]
    with path.open("a") as f:
        def write(line: str) -> None:
            f.write(line if line.endswith("\n") else line + "\n")

        yield write


def reap_reason(lease: Mapping[str, Any], now: float) -> str | None:
    """Why a leased stack should go: its expiry passed, or its controller (on this host) died."""
    from cloudbench.core.processes import pid_alive, pid_cmdline

    expiry = float(lease.get("expiry", 0))
    if now >= expiry:
        return f"expired {lease.get('expiry_utc', _utc(expiry))}"
    ctl = lease.get("controller") or {}
    if ctl.get("host") == socket.gethostname():
        pid = int(ctl.get("pid", 0))
        if not (pid_alive(pid) and pid_cmdline(pid) == ctl.get("cmdline")):
            return f"controller {pid} is gone"
    return None


def _forget_leased_secrets(ref: StackRef, lease: Mapping[str, Any]) -> None:
    """The keys of a leased stack's run directory (found beside the state: results may have moved)."""
    run = str(lease.get("run_dir") or "")
    if run:
        forget_secrets(ref.state_dir.parent / Path(run).name / "stacks" / ref.stack)


def reap(results_root: str | Path, dry_run: bool = False, automation: Automation | None = None,
         now: float | None = None) -> list[str]:
    """Destroy cloud stacks whose lease expired or whose controller died (``cloudbench gc``)."""
    now = time.time() if now is None else now
    done: list[str] = []
    failures: list[str] = []
    for path in sorted(Path(results_root).glob(f"*/{STATE_DIR}/{LEASES}/*.json")):
        try:
            lease = json.loads(path.read_text())
            ref = _ref_from_lease(path, lease)
        except (OSError, ValueError, KeyError) as e:
            failures.append(f"unreadable lease {path}: {e}")
            continue
        why = reap_reason(lease, now)
        if why is None:
            continue
        what = f"{ref.cloud} stack {ref.stack} of campaign {lease.get('campaign', '?')} ({why})"
        if dry_run:
            done.append(f"would destroy {what}")
            continue
        automation = automation or PulumiAutomation()
        try:
            automation.preflight(ref.cloud)
            handle = automation.stack(ref)
            with _appender(path.with_suffix(".log")) as out:
                handle.destroy(out)
            handle.remove()
        except Exception as e:  # one stack's failure, whatever it is, does not stop the others
            _forget_leased_secrets(ref, lease)
            msg = str(e) if isinstance(e, CloudbenchError) else f"{type(e).__name__}: {e}"
            failures.append(f"{what}: {msg}; the lease {path} stays, so `cloudbench gc` retries")
            continue
        _forget_leased_secrets(ref, lease)
        path.unlink(missing_ok=True)
        path.with_suffix(".log").unlink(missing_ok=True)
        done.append(f"destroyed {what}")
    if failures:
        raise ReapError(done, failures)
    return done
