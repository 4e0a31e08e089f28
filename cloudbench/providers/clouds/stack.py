"""Pulumi's Automation API behind a small interface: where a stack lives and how it is driven.

One stack per (campaign run, repetition), state in a local file backend under the
campaign's result directory (``file://results/<campaign>/.pulumi``), so the run's
records and what it created live side by side. :class:`Automation` is a two-method
interface; :class:`PulumiAutomation` is the real one, and tests drive the provider
with a fake (:mod:`cloudbench.testing.pulumi`) and no Pulumi CLI.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from cloudbench.errors import ProvisionError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.cli import PulumiCli, find_cli
from cloudbench.providers.clouds.passphrase import ensure_passphrase, passphrase_path
from cloudbench.providers.clouds.programs import EXTRAS, PROGRAM_MODULES
from cloudbench.spec.providers import DESTROY_TIMEOUT_S

STATE_DIR = ".pulumi"  # under results/<campaign>/
WORKSPACES = "workspaces"
DESTROY_RETRY_S = 30.0  # before the one retry of a failed destroy: detachments and deletions settle
ConfigMap = Mapping[str, tuple[str, bool]]  # key -> (value, secret)
Output = Callable[[str], None]


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
    """One selected stack: bring its resources up, destroy them, forget the stack."""

    def up(self, on_output: Output) -> dict[str, Any]:
        """Create or update the stack's resources; returns the stack outputs as plain values."""
        ...

    def destroy(self, on_output: Output) -> None: ...

    def remove(self) -> None:
        """Forget the (empty) stack in the backend."""
        ...


class Automation(Protocol):
    """What the provider needs of Pulumi's Automation API (the real one or a fake)."""

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
            import pulumi.automation  # noqa: F401  (optional SDK: the cloud extras)
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

        # imports pulumi at its top: optional SDK as well
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
    """A :class:`StackHandle` over a ``pulumi.automation`` stack, with its errors as ProvisionErrors."""

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

@contextlib.contextmanager
def log_appender(path: Path) -> Iterator[Output]:
    """An :data:`Output` that appends each line Pulumi prints to ``path`` (a stack's log)."""
    f: IO[str]
    with path.open("a") as f:
        def write(line: str) -> None:
            f.write(line if line.endswith("\n") else line + "\n")

        yield write


def run_program(cloud: str, topology: dict[str, Any], settings: cc.CloudSettings) -> None:
    """The inline program: import the cloud's module only now (its SDK is an extra)."""
    try:
        module = importlib.import_module(PROGRAM_MODULES[cloud])
    except ImportError as e:
        raise ProvisionError(cloud, settings.stack, f"{EXTRAS[cloud]} is not installed: "
                             f"pip install 'cloudbench[{cloud}]'") from e
    module.program(topology, settings)

