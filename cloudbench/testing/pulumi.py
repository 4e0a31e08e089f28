"""A fake of Pulumi's Automation API for tests of the cloud provider: no Pulumi CLI, no cloud.

:class:`~cloudbench.providers.clouds.provider.PulumiProvider` reaches Pulumi only
through the two-method :class:`~cloudbench.providers.clouds.stack.Automation`
interface. :class:`FakeAutomation` implements it: it records every call, keeps the
stack config the driver wrote, and answers ``up`` with stack outputs shaped like
the real programs' (one VM per host of the topology in that config), so the
driver builds a real :class:`~cloudbench.core.cluster.Cluster` from them::

    from cloudbench.testing.pulumi import FakeAutomation, fake_cloud_provider

    auto = FakeAutomation()
    prov = fake_cloud_provider(auto, spec, results_root=tmp_path)
    cluster = prov.provision(spec.topology(), tmp_path / spec.name / "run-1")
    prov.destroy(cluster)
    assert auto.events[-2:] == [("destroy", cluster.stack), ("remove", cluster.stack)]
    assert auto.created == set()  # nothing left behind

Failures are scripted: ``on_up`` runs inside ``up`` (raise a
:class:`~cloudbench.errors.ProvisionError`, or send yourself SIGINT, to test the
clean-up paths) and ``fail_destroy`` makes every ``destroy`` fail. The programs
themselves are not run here: test them under ``pulumi.runtime.set_mocks``.
This module does not import the Pulumi SDK.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudbench.core.catalog import CLOUDS
from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError
from cloudbench.providers.base import Finding
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds.accounts import Demand
from cloudbench.providers.clouds.provider import PulumiProvider
from cloudbench.providers.clouds.stack import ConfigMap, Output, StackRef
from cloudbench.spec.model import Spec
from cloudbench.testing import pulumi_standin

Event = tuple[str, str]
"""``(operation, stack name)``; operation is ``stack``, ``up``, ``destroy`` or ``remove``."""


class FakeStack:
    """One selected stack of a :class:`FakeAutomation` (a :class:`~cloudbench.providers.clouds.stack.StackHandle`).

    ``program`` is the inline program the driver passed (None when only
    destroying); it is kept for inspection, never run.
    """

    def __init__(self, auto: FakeAutomation, ref: StackRef, program: Callable[[], None] | None) -> None:
        self.auto, self.ref, self.program = auto, ref, program

    def up(self, on_output: Output) -> dict[str, Any]:
        """Record ``up``, mark the stack created, run ``on_up``, return :meth:`FakeAutomation.outputs_for`."""
        self.auto.events.append(("up", self.ref.stack))
        on_output("Updating (fake)")
        self.auto.created.add(self.ref.stack)
        if self.auto.on_up is not None:
            self.auto.on_up(self.ref)
        return self.auto.outputs_for(self.ref)

    def destroy(self, on_output: Output) -> None:
        """Record ``destroy``; forget the stack's resources, or fail if ``fail_destroy`` is set."""
        self.auto.events.append(("destroy", self.ref.stack))
        if self.auto.fail_destroy:
            raise ProvisionError(self.ref.cloud, self.ref.stack, "fake destroy failure")
        self.auto.created.discard(self.ref.stack)

    def remove(self) -> None:
        """Record ``remove`` (forgetting the empty stack in the backend)."""
        self.auto.events.append(("remove", self.ref.stack))


class FakeAutomation:
    """Stands in for ``pulumi.automation``: records calls, returns outputs shaped like the programs'.

    Attributes a test reads or sets:

    ``events``
        every call in order, as :data:`Event` tuples.
    ``created``
        stacks whose ``up`` ran and which were not destroyed since: empty after
        a correct clean-up.
    ``config``
        per stack name, the config the driver set (key -> (value, secret)).
    ``preflight_error``
        when set, :meth:`preflight` raises it as a :class:`~cloudbench.errors.ProvisionError`
        (a missing or too old Pulumi CLI).
    ``on_up``
        called with the stack's :class:`StackRef` inside ``up``, after the stack
        counts as created (a failure there is a partially created stack).
    ``fail_destroy``
        every ``destroy`` raises :class:`~cloudbench.errors.ProvisionError`.
    """

    def __init__(self, on_up: Callable[[StackRef], None] | None = None, fail_destroy: bool = False,
                 preflight_error: str | None = None) -> None:
        self.preflight_error = preflight_error
        self.events: list[Event] = []
        self.created: set[str] = set()
        self.on_up = on_up
        self.fail_destroy = fail_destroy
        self.config: dict[str, dict[str, tuple[str, bool]]] = {}

    def preflight(self, cloud: str) -> None:
        """Raise ``preflight_error`` (as a missing or old Pulumi CLI would), else nothing."""
        if self.preflight_error is not None:
            raise ProvisionError(cloud, "-", self.preflight_error)

    def stack(self, ref: StackRef, program: Callable[[], None] | None = None,
              config: ConfigMap | None = None) -> FakeStack:
        """Select (or create) ``ref``; records ``("stack", name)`` and keeps ``config``."""
        self.events.append(("stack", ref.stack))
        if config is not None:
            self.config[ref.stack] = dict(config)
        return FakeStack(self, ref, program)

    def outputs_for(self, ref: StackRef) -> dict[str, Any]:
        """Stack outputs as the programs export them: VM ``i`` gets 10.0.0.(10+i) and 203.0.113.(10+i)."""
        return program_outputs(self.config[ref.stack][cc.PROGRAM_FILE_KEY][0])


def program_outputs(program_file: str | Path) -> dict[str, Any]:
    """Outputs the program would export for the inputs in ``program_file`` (see ``FakeAutomation.outputs_for``)."""
    topo_dict, settings = cc.read_program_file(program_file)
    topo = Topology.from_dict(topo_dict)
    return {
        cc.OUTPUT_META: cc.meta_output(settings),
        cc.OUTPUT_HOSTS: {h.name: {**cc.host_record(h, h.zone), "id": f"i-{i}",
                                   "private_ip": f"10.0.0.{10 + i}", "public_ip": f"203.0.113.{10 + i}"}
                          for i, h in enumerate(topo.hosts)},
    }


@dataclass
class FakeAccount:
    """An account that refuses nothing (``refuse``: findings it reports for every region)."""

    cloud: str
    target: str | None = None
    refuse: list[Finding] = field(default_factory=list)

    def identity(self) -> str:
        return f"fake {self.cloud} account {self.target or ''}".strip()

    def check(self, demand: Demand) -> list[Finding]:
        return list(self.refuse)

    def check_global(self, demands: list[Demand]) -> list[Finding]:
        return []


# Where the fake clouds' project and subscription come from (no gcloud or az on the test machine).
FAKE_ENV = {"GOOGLE_CLOUD_PROJECT": "cloudbench-test", "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000001"}


def _no_wait(cluster: Cluster) -> None:
    """The fake VMs are never reachable: skip waiting for them."""


def fake_cloud_provider(auto: FakeAutomation, spec: Spec, results_root: Path, cloud: str | None = None,
                        wait_ready: Callable[[Cluster], None] | None = None) -> PulumiProvider:
    """A :class:`PulumiProvider` for ``spec``'s ``cloud`` entry driven by ``auto``.

    ``cloud`` defaults to the spec's only cloud provider; ``wait_ready`` defaults
    to not waiting (pass one that raises to test the not-ready path).
    """
    entries: dict[str, Any] = {name: opts for name, opts in spec.providers.items() if name in CLOUDS}
    if cloud is None:
        if len(entries) != 1:
            raise ValueError(f"the spec has clouds {sorted(entries)}: say which one with cloud=")
        cloud = next(iter(entries))
    if cloud not in entries:
        raise ValueError(f"the spec has no {cloud!r} provider (it has {sorted(spec.providers)})")
    return PulumiProvider(cloud, entries[cloud], spec.name, automation=auto,
                          wait_ready=wait_ready or _no_wait, results_root=results_root,
                          account=FakeAccount, env=FAKE_ENV, home=results_root)


# -- a stand-in `pulumi` executable, for tests of the real Automation API adapter ----------------
class PulumiStandin:
    """Puts a recording stand-in ``pulumi`` (:mod:`cloudbench.testing.pulumi_standin`) in ``base/bin``.

    Prepend :attr:`bin_dir` to ``PATH`` (``monkeypatch.setenv("PATH", standin.path)``) and
    drive :class:`~cloudbench.providers.clouds.stack.PulumiAutomation` as usual::

        standin = PulumiStandin(tmp_path / "pulumi", up="fail")
        monkeypatch.setenv("PATH", standin.path)
        ...
        assert [c.command for c in standin.calls()][:2] == ["version", "stack select"]

    ``version`` is what ``pulumi version`` prints; ``up`` is ``ok``, ``fail`` or ``wait``
    (until a signal, then cancel); ``destroy`` is ``ok``, ``fail``, ``fail-once`` or ``locked``
    (once); ``outputs`` are the stack outputs after a successful ``up``; ``left`` the resources
    ``stack export`` lists while the stack is not destroyed (``{"type", "name", "id"}``).
    """

    def __init__(self, base: Path, version: str = "v3.190.0", up: str = "ok", destroy: str = "ok",
                 outputs: dict[str, Any] | None = None, cancel_seconds: float = 0.5,
                 left: list[dict[str, str]] | None = None) -> None:
        self.base = Path(base).resolve()
        self.bin_dir = self.base / "bin"
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.configure(version=version, up=up, destroy=destroy, outputs=outputs or {},
                       cancel_seconds=cancel_seconds, left=left or [])
        exe = self.bin_dir / "pulumi"
        exe.write_text("#!/bin/sh\n"
                       f"{pulumi_standin.DIR_VAR}={shlex.quote(str(self.base))} "
                       f"exec {shlex.quote(sys.executable)} {shlex.quote(pulumi_standin.__file__)} \"$@\"\n")
        exe.chmod(0o755)

    def configure(self, **script: Any) -> None:
        """Change the stand-in's behaviour (keys of ``script.json``) for the next invocations."""
        path = self.base / "script.json"
        current = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps({**current, **script}))

    @property
    def path(self) -> str:
        """``PATH`` with the stand-in first."""
        return os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", "")])

    def records(self) -> list[dict[str, Any]]:
        """The stand-in's log so far. Its invocations append to it while a test polls it: a line
        without its newline yet is still being written and is left for the next read."""
        log = self.base / "log.jsonl"
        if not log.exists():
            return []
        complete, _, _partial = log.read_text().rpartition("\n")
        return [json.loads(line) for line in complete.splitlines()]

    def calls(self) -> list[StandinCall]:
        """Every invocation, in order, with how it ended."""
        recs = self.records()
        ends = {r["pid"]: r for r in recs if r["event"] == "exit"}
        signals = {r["pid"]: r["signal"] for r in recs if r["event"] == "signal"}
        return [StandinCall(r["argv"], r["cwd"], r["env"], r["t"], ends.get(r["pid"], {}).get("code"),
                            ends.get(r["pid"], {}).get("t"), signals.get(r["pid"]))
                for r in recs if r["event"] == "start"]


@dataclass(frozen=True)
class StandinCall:
    """One run of the stand-in ``pulumi``."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    started: float
    exit_code: int | None
    ended: float | None
    signal: str | None  # the signal it got while waiting (``up`` in ``wait`` mode)

    @property
    def command(self) -> str:
        """``"stack select"``, ``"config set-all"``, ``"up"``, … (the subcommand words)."""
        words = [a for a in self.argv if not a.startswith("-")]
        two = {"stack", "config"}
        return " ".join(words[:2]) if words and words[0] in two else (words[0] if words else "")
