"""A recording stand-in for the ``pulumi`` executable (stdlib only; run as a script).

Installed on ``PATH`` by :class:`cloudbench.testing.pulumi.PulumiStandin`, it lets a
test drive the *real* Automation API adapter (``pulumi.automation`` and
:mod:`cloudbench.providers.clouds.stack`) without the Pulumi CLI or a cloud.
Every invocation appends a JSON line to ``<dir>/log.jsonl``: its arguments, working
directory and environment (``event: "start"``), and later what happened
(``"signal"``, ``"exit"``). It answers the commands the Automation API issues
with outputs shaped like the CLI's:

``version``, ``stack select|init|rm|ls|output|history|export``, ``config set-all``,
``up`` (``ok``, ``fail`` or ``wait``: wait for a signal, then cancel like the CLI),
``destroy`` (``ok``, ``fail``, ``fail-once``, or ``locked`` once) and ``cancel``; ``stack export``
lists the resources a failed destroy left (``left``, a list of ``{"type", "name", "id"}``).

Like the real CLI it resolves ``PULUMI_BACKEND_URL`` and
``PULUMI_CONFIG_PASSPHRASE_FILE`` from its working directory and refuses a backend
or passphrase file that is not there; stack state lives under the backend directory.
The behaviour is read from ``<dir>/script.json`` (``version``, ``up``, ``destroy``,
``outputs``, ``cancel_seconds``); the directory comes from ``$CB_PULUMI_STANDIN``,
set by the wrapper script only (it is not logged).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

DIR_VAR = "CB_PULUMI_STANDIN"


class Standin:
    """The fake ``pulumi`` command: it follows a scripted behaviour and logs every call."""
    def __init__(self, base: Path, argv: list[str]) -> None:
        self.base = base
        self.argv = argv
        self.script: dict[str, Any] = json.loads((base / "script.json").read_text())

    # -- bookkeeping ------------------------------------------------------------------
    def log(self, event: str, **extra: Any) -> None:
        rec = {"event": event, "pid": os.getpid(), "t": time.time(), **extra}
        with (self.base / "log.jsonl").open("a") as f:
            f.write(json.dumps(rec) + "\n")

    def fail(self, message: str, code: int = 255, stdout: str = "") -> int:
        if stdout:
            print(stdout, flush=True)
        print(f"error: {message}", file=sys.stderr, flush=True)
        self.log("exit", code=code)
        return code

    def ok(self, stdout: str = "") -> int:
        if stdout:
            print(stdout, flush=True)
        self.log("exit", code=0)
        return 0

    def backend(self) -> Path | None:
        url = os.environ.get("PULUMI_BACKEND_URL", "")
        if not url.startswith("file://"):
            return None
        return Path(os.getcwd(), url.removeprefix("file://"))  # relative: from the working directory

    def stack_file(self, stack: str) -> Path:
        backend = self.backend()
        assert backend is not None
        return backend / ".pulumi" / "stacks" / self.project() / f"{stack}.json"

    def project(self) -> str:
        text = (Path.cwd() / "Pulumi.yaml").read_text() if (Path.cwd() / "Pulumi.yaml").exists() else ""
        for line in text.splitlines():
            if line.startswith("name:"):
                return line.split(":", 1)[1].strip()
        return "unknown"

    def load(self, stack: str) -> dict[str, Any] | None:
        p = self.stack_file(stack)
        return json.loads(p.read_text()) if p.exists() else None

    def save(self, stack: str, state: dict[str, Any]) -> None:
        p = self.stack_file(stack)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(state))

    def history(self, state: dict[str, Any], kind: str, result: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        state.setdefault("history", []).insert(0, {
            "kind": kind, "startTime": stamp, "endTime": stamp, "message": "", "environment": {},
            "config": {}, "result": result, "version": len(state.get("history", [])) + 1,
            "resourceChanges": {}})

    # -- the commands ---------------------------------------------------------------------
    def run(self) -> int:
        self.log("start", argv=self.argv, cwd=os.getcwd(),
                 env={k: v for k, v in os.environ.items() if k != DIR_VAR})
        args = [a for a in self.argv if a != "--non-interactive"]
        if args[:1] == ["version"]:
            return self.ok(str(self.script.get("version", "v3.190.0")))
        stack = _option(args, "--stack")
        words = [a for a in args if not a.startswith("-")]
        backend = self.backend()
        if backend is None or not backend.is_dir():
            return self.fail(f"could not create backend: the directory {backend} does not exist "
                             "(PULUMI_BACKEND_URL is resolved from the working directory)")
        if words[:2] == ["stack", "ls"]:
            names = sorted(p.stem for p in self.stack_file("x").parent.glob("*.json"))
            return self.ok(json.dumps([{"name": n, "current": False} for n in names]))
        passphrase = Path(os.getcwd(), os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE", ""))
        if "PULUMI_CONFIG_PASSPHRASE_FILE" in os.environ and not passphrase.is_file():
            return self.fail(f"unable to read the passphrase file {passphrase}: no such file")
        if words[:2] == ["stack", "init"]:
            name = words[2] if len(words) > 2 else stack
            assert name
            if self.load(name) is not None:
                return self.fail(f"stack '{name}' already exists")
            self.save(name, {"config": {}, "resources": 0, "history": []})
            return self.ok(f"Created stack '{name}'")
        if words[:2] == ["stack", "rm"]:
            name = words[2] if len(words) > 2 else stack
            assert name
            state = self.load(name)
            if state is None:
                return self.fail(f"no stack named '{name}' found")
            if state["resources"]:
                return self.fail(f"'{name}' still has resources; removal rejected")
            self.stack_file(name).unlink()
            return self.ok(f"Stack '{name}' has been removed!")
        if stack is None:
            return self.fail("no stack selected", code=2)
        state = self.load(stack)
        if state is None:
            return self.fail(f"no stack named '{stack}' found")
        if words[:2] == ["stack", "select"]:
            return self.ok()
        if words[:2] == ["config", "set-all"]:
            pairs = [(self.argv[i], self.argv[i + 1]) for i in range(len(self.argv) - 1)
                     if self.argv[i] in ("--plaintext", "--secret")]
            for kind, pair in pairs:
                key, _, value = pair.partition("=")
                state["config"][key] = {"value": value, "secret": kind == "--secret"}
            self.save(stack, state)
            return self.ok()
        if words[:1] == ["up"]:
            return self.up(stack, state)
        if words[:1] == ["destroy"]:
            return self.destroy(stack, state)
        if words[:2] == ["stack", "output"]:
            outputs = self.script.get("outputs", {}) if state["resources"] else {}
            return self.ok(json.dumps(outputs))
        if words[:2] == ["stack", "history"]:
            return self.ok(json.dumps(state.get("history", [])[:1]))
        if words[:2] == ["stack", "export"]:
            project = self.project()
            left = self.script.get("left", []) if state["resources"] else []
            resources = [{"urn": f"urn:pulumi:{stack}::{project}::pulumi:pulumi:Stack::{project}-{stack}",
                          "type": "pulumi:pulumi:Stack"}] + [
                {"urn": f"urn:pulumi:{stack}::{project}::{r['type']}::{r['name']}", "type": r["type"],
                 "id": r.get("id", "")} for r in left]
            return self.ok(json.dumps({"version": 3, "deployment": {"resources": resources}}))
        if words[:1] == ["cancel"]:
            return self.ok("The currently running update has been canceled!")
        return self.fail(f"stand-in: unsupported command {args}", code=2)

    def up(self, stack: str, state: dict[str, Any]) -> int:
        mode = self.script.get("up", "ok")
        print(f"Updating ({stack})", flush=True)
        state["resources"] = 3  # a partial update leaves resources behind too
        self.history(state, "update", "in-progress")
        self.save(stack, state)
        if mode == "wait":
            return self.wait_for_signal(stack, state)
        if mode == "fail":
            self.history(state, "update", "failed")
            self.save(stack, state)
            return self.fail("update failed", stdout="error: creating EC2 Instance: "
                             "InsufficientInstanceCapacity (scripted)")
        state["resources"] = 10
        self.history(state, "update", "succeeded")
        self.save(stack, state)
        return self.ok("Resources:\n    + 10 created")

    def wait_for_signal(self, stack: str, state: dict[str, Any]) -> int:
        got: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda s, f: got.append(s))
        self.log("waiting")
        deadline = time.monotonic() + float(self.script.get("wait_limit", 60.0))
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        if not got:
            return self.fail("stand-in: no signal came", code=3)
        self.log("signal", signal=signal.Signals(got[0]).name)
        time.sleep(float(self.script.get("cancel_seconds", 0.5)))  # saving the state
        self.history(state, "update", "failed")
        self.save(stack, state)
        return self.fail("update canceled")

    def destroy(self, stack: str, state: dict[str, Any]) -> int:
        mode = self.script.get("destroy", "ok")
        if mode == "locked" and not state.get("was_locked"):
            state["was_locked"] = True
            self.save(stack, state)
            return self.fail(f"the stack is currently locked by 1 lock(s): {stack}")
        if mode == "fail" or (mode == "fail-once" and not state.get("destroy_failed")):
            state["destroy_failed"] = True
            self.save(stack, state)
            return self.fail("deleting Subnet: DependencyViolation (scripted)")
        print(f"Destroying ({stack})", flush=True)
        state["resources"] = 0
        self.history(state, "destroy", "succeeded")
        self.save(stack, state)
        return self.ok("Resources:\n    - 10 deleted")


def _option(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def main() -> int:
    """Run the stand-in on the command line it was given (its script is in ``$DIR_VAR``)."""
    return Standin(Path(os.environ[DIR_VAR]), sys.argv[1:]).run()


if __name__ == "__main__":
    sys.exit(main())
