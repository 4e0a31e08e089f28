"""The real Automation API adapter against a recording stand-in ``pulumi`` on PATH.

Not the fake: ``pulumi.automation`` and :class:`PulumiAutomation` run for real, and
every ``pulumi`` they start is :mod:`cloudbench.testing.pulumi_standin`, which logs
its arguments, working directory and environment. The tests check what a user's
real CLI would be given: absolute state paths, the order of the calls, and no
secret in any argument or environment.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import Topology
from cloudbench.errors import ProvisionError, ReapError
from cloudbench.providers.clouds import common as cc
from cloudbench.providers.clouds import leases as cls
from cloudbench.providers.clouds import passphrase as cpw
from cloudbench.providers.clouds import provider as cpv
from cloudbench.providers.clouds import stack as cst
from cloudbench.providers.clouds.cli import find_cli, min_version
from cloudbench.spec.providers import CloudProviderModel
from cloudbench.testing.pulumi import FAKE_ENV, FakeAccount, PulumiStandin, StandinCall
from tests.providers.clouds.test_clouds import settings_for, stormcloud, stormcloud_yaml

CLOUDS = ("aws", "gcp", "azure")


def outputs_for(topo: Topology, cloud: str) -> dict[str, Any]:
    """What the cloud's program exports (as the CLI prints it for `stack output --json`)."""
    settings = settings_for(topo, cloud)
    return {
        cc.OUTPUT_META: cc.meta_output(settings),
        cc.OUTPUT_HOSTS: {h.name: {**cc.host_record(h, h.zone), "id": f"vm-{i}",
                                   "private_ip": f"10.0.0.{10 + i}", "public_ip": f"203.0.113.{10 + i}"}
                          for i, h in enumerate(topo.hosts)},
    }


def no_wait(cluster: Cluster) -> None:
    pass


def make_provider(cloud: str, results: Path, destroy_timeout: float = 60.0) -> cpv.PulumiProvider:
    spec = stormcloud(cloud)
    opts = spec.providers[cloud]
    assert isinstance(opts, CloudProviderModel)
    return cpv.PulumiProvider(cloud, opts, spec.name,
                             automation=cst.PulumiAutomation(destroy_timeout, destroy_retry_s=0.0),
                             wait_ready=no_wait, results_root=results,
                             account=FakeAccount, env=FAKE_ENV, home=results)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work from tmp_path with `--results results` (relative, as the CLI's default)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    return tmp_path


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every secret the runs of a test make, recorded as they are made (they are deleted by the
    time the test looks): host private keys, client private keys and state passphrases."""
    found: list[str] = []
    write_program_file = cc.write_program_file
    write_private = cpv._write_private
    write_secret = cpw._write_secret

    def program_file(path: Path, topology: Topology, settings: cc.CloudSettings) -> Path:
        found.extend(k.private.strip() for k in settings.host_keys.values())
        return write_program_file(path, topology, settings)

    def private(path: Path, data: bytes) -> None:
        found.append(data.decode().strip())
        write_private(path, data)

    def secret(path: Path, text: str) -> None:
        found.append(text.strip())
        write_secret(path, text)

    monkeypatch.setattr(cc, "write_program_file", program_file)
    monkeypatch.setattr(cpv, "_write_private", private)
    monkeypatch.setattr(cpw, "_write_secret", secret)
    return found


def no_secret_under(results: Path, secrets: list[str]) -> None:
    """Nothing under ``results`` holds a private key or one of ``secrets`` (as a user would grep)."""
    assert len(secrets) >= 3
    for f in results.rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert "PRIVATE KEY" not in text, f
            for sec in secrets:
                assert sec not in text, f
                for line in sec.splitlines()[1:2]:
                    assert line not in text, f
    assert not list(results.rglob(cc.PROGRAM_FILE)) and not list(results.rglob(cls.CLIENT_KEY))
    assert not list(results.rglob(cpw.PASSPHRASE))


def check_calls(calls: list[StandinCall], ref_dir: Path, secrets: list[str], passphrase: Path | None = None) -> None:
    state = ref_dir / ".pulumi"
    passphrase = passphrase or cpw.passphrase_path(state)
    assert len(secrets) >= 3
    for c in calls:
        if c.command == "version":
            continue
        assert Path(c.cwd).is_absolute() and Path(c.cwd).is_relative_to(state / cst.WORKSPACES), c
        assert c.env["PULUMI_BACKEND_URL"] == f"file://{state}", c
        assert c.env["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(passphrase), c
        assert not Path(c.env["PULUMI_CONFIG_PASSPHRASE_FILE"]).is_relative_to(ref_dir.parent), c
        assert "PULUMI_CONFIG_PASSPHRASE" not in c.env
        assert c.argv[0] == "--non-interactive" and c.exit_code is not None
        blob = "\0".join(c.argv) + "\0" + "\0".join(f"{k}={v}" for k, v in c.env.items())
        assert "PRIVATE KEY" not in blob, c.argv
        for s in secrets:
            for line in s.splitlines()[1:2]:  # a line of key material is enough to recognise it
                assert line not in blob
            assert s not in blob


def commands(calls: list[StandinCall]) -> list[str]:
    return [c.command for c in calls]


PROVISION = ["version", "stack select", "stack init", "config set-all", "up"]
DESTROY_AFTER_FAILURE = ["destroy", "stack history", "stack rm"]


@pytest.mark.parametrize("cloud", CLOUDS)
def test_real_adapter_provision_failure_then_destroy(cloud: str, in_tmp: Path, made: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    standin = PulumiStandin(in_tmp / "standin", up="fail")
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider(cloud, Path("results"))
    run_dir = Path("results") / f"stormcloud-{cloud}" / "20250101T000000Z-abcd"
    run_dir.mkdir(parents=True)
    with pytest.raises(ProvisionError, match=r"(?s)pulumi up failed: .*InsufficientInstanceCapacity") as ei:
        prov.provision(stormcloud(cloud).topology(), run_dir)
    assert "20250101T000000Z-abcd-r01" in str(ei.value)
    calls = standin.calls()
    assert commands(calls) == PROVISION + DESTROY_AFTER_FAILURE, commands(calls)
    up = calls[4]
    assert up.exit_code == 255 and up.argv[up.argv.index("--exec-kind") + 1] == "auto.inline"
    assert any(a.startswith("--client=127.0.0.1:") for a in up.argv)  # the inline program's server
    assert calls[5].exit_code == 0 and "--skip-preview" in calls[5].argv and "--yes" in calls[5].argv
    assert calls[5].started >= up.ended  # destroy after up ended
    # The config handed to `config set-all`: the provider defaults and the inputs' path only.
    keys = [a.split("=", 1)[0] for a in calls[3].argv if "=" in a]
    assert keys[0] == cc.PROGRAM_FILE_KEY and "--secret" not in calls[3].argv
    program_file = Path(calls[3].argv[calls[3].argv.index("--plaintext") + 1].split("=", 1)[1])
    assert program_file.is_absolute() and not program_file.exists()  # 0600 while it lived; gone now
    check_calls(calls, in_tmp / "results" / f"stormcloud-{cloud}", made)
    no_secret_under(in_tmp / "results", made)  # the run failed mid-way: its keys went with the stack
    # Nothing left: the stack is gone from the backend, and so is the lease.
    assert not list((in_tmp / "results").rglob(f"{cls.LEASES}/*.json"))
    assert not list((in_tmp / "results").rglob(".pulumi/stacks/*/*.json"))


@pytest.mark.parametrize("cloud", CLOUDS)
def test_real_adapter_provision_success_then_destroy(cloud: str, in_tmp: Path, made: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    topo = stormcloud(cloud).topology()
    standin = PulumiStandin(in_tmp / "standin", up="ok", outputs=outputs_for(topo, cloud))
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider(cloud, Path("results"))
    run_dir = Path("results") / f"stormcloud-{cloud}" / "20250101T000000Z-abcd"
    run_dir.mkdir(parents=True)
    cluster = prov.provision(topo, run_dir)
    assert len(cluster.hosts) == len(topo.hosts) and cluster.hosts[0].ssh_host == "203.0.113.10"
    calls = standin.calls()
    # up, then its outputs (masked and plain) and its summary.
    after_up = ["stack output", "stack output", "stack history"]
    assert commands(calls) == PROVISION + after_up, commands(calls)
    leases = list((in_tmp / "results").rglob(f"{cls.LEASES}/*.json"))
    assert len(leases) == 1
    prov.destroy(cluster)
    calls = standin.calls()
    assert commands(calls) == PROVISION + after_up + DESTROY_AFTER_FAILURE, commands(calls)
    check_calls(calls, in_tmp / "results" / f"stormcloud-{cloud}", made)
    no_secret_under(in_tmp / "results", made)
    assert not leases[0].exists()
    assert not list((in_tmp / "results").rglob(".pulumi/stacks/*/*.json"))


def test_old_or_missing_cli_is_refused_before_anything_exists(in_tmp: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    standin = PulumiStandin(in_tmp / "standin", version="v3.170.0")
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider("aws", Path("results"))
    run_dir = Path("results") / "stormcloud-aws" / "r"
    run_dir.mkdir(parents=True)
    with pytest.raises(ProvisionError, match=r"3\.170\.0, older than the 3\.181\.0 .*get\.pulumi\.com"):
        prov.provision(stormcloud("aws").topology(), run_dir)
    assert commands(standin.calls()) == ["version"]
    assert list(run_dir.iterdir()) == [] and not (in_tmp / "results" / "stormcloud-aws" / ".pulumi").exists()
    # Not a 3.x at all
    standin.configure(version="v4.0.1")
    with pytest.raises(ProvisionError, match=r"Pulumi 3\.x"):
        make_provider("aws", Path("results")).provision(stormcloud("aws").topology(), run_dir)
    # No CLI on PATH
    empty = in_tmp / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ProvisionError, match=r"not on PATH.*get\.pulumi\.com"):
        make_provider("aws", Path("results")).provision(stormcloud("aws").topology(), run_dir)
    assert list(run_dir.iterdir()) == []


def test_min_version_is_cloudbench_s_or_the_sdk_s() -> None:
    from pulumi.automation._minimum_version import _MINIMUM_VERSION

    assert min_version() >= (3, 181, 0)
    assert min_version() >= (_MINIMUM_VERSION.major, _MINIMUM_VERSION.minor, _MINIMUM_VERSION.patch)
    cli = find_cli(which=lambda name: "/opt/pulumi/bin/pulumi", run=lambda argv: "v3.200.1\n")
    assert cli.version == (3, 200, 1) and cli.path == "/opt/pulumi/bin/pulumi"
    with pytest.raises(ProvisionError, match="not a version"):
        find_cli(which=lambda name: "/x/pulumi", run=lambda argv: "garbage")


def test_sdk_errors_during_destroy_and_gc_are_cloudbench_errors(in_tmp: Path, made: list[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the SDK raises while destroying becomes a ProvisionError naming the stack and what to do."""
    topo = stormcloud("gcp").topology()
    standin = PulumiStandin(in_tmp / "standin", outputs=outputs_for(topo, "gcp"))
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider("gcp", Path("results"))
    run_dir = Path("results") / "stormcloud-gcp" / "r"
    run_dir.mkdir(parents=True)
    cluster = prov.provision(topo, run_dir)
    live = prov._live[cluster.stack]
    assert isinstance(live.handle, cst._AutoStack)

    def broken(**kwargs: Any) -> None:
        raise ValueError("unexpected field in the CLI's JSON")  # not a CommandError

    monkeypatch.setattr(live.handle.st, "destroy", broken)
    with pytest.raises(ProvisionError) as ei:
        prov.destroy(cluster)
    msg = str(ei.value)
    assert cluster.stack in msg and "ValueError: unexpected field" in msg
    assert "cloudbench gc --results" in msg and f"pulumi destroy --stack {cluster.stack}" in msg
    # gc: the lease stays and its destroy failure is reported, not raised as a traceback.
    lease = next((in_tmp / "results").rglob(f"{cls.LEASES}/*.json"))
    data = json.loads(lease.read_text())
    data["expiry"] = time.time() - 1
    lease.write_text(json.dumps(data))
    no_secret_under(in_tmp / "results", made)  # a failed destroy takes the keys too
    standin.configure(destroy="fail")
    auto = cst.PulumiAutomation(60.0, destroy_retry_s=0.0)
    with pytest.raises(ReapError, match=rf"(?s){cluster.stack}.*DependencyViolation.*cloudbench gc"):
        cls.reap(Path("results"), automation=auto)
    assert lease.exists()
    # The results folder moved (or was copied for a colleague): the state's passphrase is found by
    # the id the state carries, from the secrets dir, not from the folder.
    (in_tmp / "moved").mkdir()
    (in_tmp / "results").rename(in_tmp / "moved" / "results")
    standin.configure(destroy="ok")
    assert cls.reap(Path("moved/results"), automation=auto) == [
        f"destroyed gcp stack {cluster.stack} of campaign stormcloud-gcp (expired {data['expiry_utc']})"]
    assert not list((in_tmp / "moved").rglob(f"{cls.LEASES}/*.json"))
    no_secret_under(in_tmp / "moved", made)
    passphrase = cpw.passphrase_path(in_tmp / "moved" / "results" / "stormcloud-gcp" / ".pulumi")
    assert passphrase.is_file()
    check_calls(standin.calls()[:-4], in_tmp / "results" / "stormcloud-gcp", made, passphrase)
    check_calls(standin.calls()[-4:], in_tmp / "moved" / "results" / "stormcloud-gcp", made, passphrase)


def test_destroy_goes_on_after_an_error_retries_once_and_says_what_is_left(
        in_tmp: Path, made: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    topo = stormcloud("aws").topology()
    left = [{"type": "aws:ec2/securityGroup:SecurityGroup", "name": "secgroup-us-east-1", "id": "sg-0abc"}]
    standin = PulumiStandin(in_tmp / "standin", destroy="fail-once", outputs=outputs_for(topo, "aws"), left=left)
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider("aws", Path("results"))
    run_dir = Path("results") / "stormcloud-aws" / "r"
    run_dir.mkdir(parents=True)
    prov.destroy(prov.provision(topo, run_dir))  # refused once, then done
    calls = standin.calls()
    assert commands(calls)[-4:] == ["destroy", "destroy", "stack history", "stack rm"]
    assert calls[-4].exit_code == 255 and calls[-3].exit_code == 0
    assert all("--continue-on-error" in c.argv for c in calls if c.command == "destroy")
    # Refused twice: the stack's leftovers are named, with the commands that finish the job.
    standin.configure(destroy="fail")
    cluster = prov.provision(topo, run_dir)
    with pytest.raises(ProvisionError) as ei:
        prov.destroy(cluster)
    msg = str(ei.value)
    assert commands(standin.calls())[-3:] == ["destroy", "destroy", "stack export"]
    assert "tried twice; left in the stack: aws:ec2/securityGroup:SecurityGroup secgroup-us-east-1 (sg-0abc)" in msg
    ref = prov._live[cluster.stack].ref
    assert (f"PULUMI_BACKEND_URL={ref.backend_url} PULUMI_CONFIG_PASSPHRASE_FILE={ref.passphrase_file} "
            f"pulumi destroy --stack {cluster.stack}`") in msg and ref.passphrase_file.is_file()
    assert f"`cloudbench gc --results {in_tmp / 'results'}` retries" in msg
    no_secret_under(in_tmp / "results", made)
    check_calls(standin.calls(), in_tmp / "results" / "stormcloud-aws", made)


def test_a_locked_stack_is_destroyed_once_the_lock_is_free(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo = stormcloud("aws").topology()
    standin = PulumiStandin(in_tmp / "standin", destroy="locked", outputs=outputs_for(topo, "aws"))
    monkeypatch.setenv("PATH", standin.path)
    monkeypatch.setattr(cst.time, "sleep", lambda s: None)
    prov = make_provider("aws", Path("results"))
    run_dir = Path("results") / "stormcloud-aws" / "r"
    run_dir.mkdir(parents=True)
    prov.destroy(prov.provision(topo, run_dir))
    assert commands(standin.calls())[-4:] == ["destroy", "destroy", "stack history", "stack rm"]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_an_interrupt_reaches_pulumi_and_destroy_follows_its_exit(how: str, in_tmp: Path, made: list[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM (as the runner delivers it) or Ctrl-C during `up`: pulumi gets one SIGINT, saves its
    state and exits; then the stack is destroyed (its lock is free) and the interrupt propagates."""
    from cloudbench.runner import signals_as_interrupts

    standin = PulumiStandin(in_tmp / "standin", up="wait", cancel_seconds=1.0)
    monkeypatch.setenv("PATH", standin.path)
    prov = make_provider("azure", Path("results"), destroy_timeout=120.0)
    run_dir = Path("results") / "stormcloud-azure" / "r"
    run_dir.mkdir(parents=True)
    me = os.getpid()

    def interrupt_when_up_waits() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(r["event"] == "waiting" for r in standin.records()):
                os.kill(me, signal.Signals[how])
                return
            time.sleep(0.05)

    t = threading.Thread(target=interrupt_when_up_waits, daemon=True)
    t.start()
    with signals_as_interrupts(), pytest.raises(KeyboardInterrupt):
        prov.provision(stormcloud("azure").topology(), run_dir)
    t.join(timeout=5)
    calls = standin.calls()
    assert commands(calls) == PROVISION + DESTROY_AFTER_FAILURE, commands(calls)
    up, destroy = calls[4], calls[5]
    assert up.signal == "SIGINT"  # exactly Pulumi's graceful cancel, whatever we got
    assert up.exit_code == 255 and up.ended is not None
    assert destroy.started >= up.ended and destroy.exit_code == 0  # no lock left to wait for
    assert not list((in_tmp / "results").rglob(f"{cls.LEASES}/*.json"))
    no_secret_under(in_tmp / "results", made)


def test_destroy_timeout_is_a_spec_setting(tmp_path: Path) -> None:
    from cloudbench.providers import get_provider
    from cloudbench.workloads import parse_spec

    spec = parse_spec(stormcloud_yaml("aws", "destroy_timeout: 45m"), "a.yaml")
    prov = get_provider("aws", spec=spec, results_root=tmp_path)
    assert isinstance(prov, cpv.PulumiProvider) and isinstance(prov.automation, cst.PulumiAutomation)
    assert prov.automation.cancel_wait_s == 2700.0
    default = get_provider("aws", spec=stormcloud("aws"), results_root=tmp_path)
    assert isinstance(default, cpv.PulumiProvider) and isinstance(default.automation, cst.PulumiAutomation)
    assert default.automation.cancel_wait_s >= 1200.0  # minutes, as clouds need, not 120 s


def test_any_sdk_exception_in_up_or_remove_is_a_provision_error(tmp_path: Path) -> None:
    from pulumi.automation.errors import InvalidVersionError

    class Broken:
        def up(self, **kwargs: Any) -> Any:
            raise InvalidVersionError("The installed version of the CLI does not support this operation.")

        workspace = type("W", (), {"remove_stack": staticmethod(lambda name: 1 / 0)})()

    ref = cst.StackRef("azure", "cloudbench-azure", "c-r01", tmp_path / ".pulumi")
    handle = cst._AutoStack(Broken(), ref)
    with pytest.raises(ProvisionError, match=r"azure \[c-r01\]: pulumi up failed: InvalidVersionError: .*destroyed"):
        handle.up(print)
    with pytest.raises(ProvisionError, match=r"c-r01.*ZeroDivisionError.*pulumi stack rm c-r01"):
        handle.remove()


def test_the_stand_ins_log_read_while_a_line_is_being_written_gives_the_complete_lines(tmp_path: Path) -> None:
    """A test polls the log while the stand-in appends to it: a poll that caught a 2.5 KB line half
    written raised JSONDecodeError in the interrupt test's thread, which then never sent its signal
    (the stand-in waited 60 s for it: a full-suite failure, 2026-11-26)."""
    standin = PulumiStandin(tmp_path / "standin")
    first = json.dumps({"event": "start", "pid": 1, "t": 0.0, "argv": ["up"] * 400})
    (tmp_path / "standin" / "log.jsonl").write_text(first + "\n" + first[: len(first) // 2])
    assert standin.records() == [json.loads(first)]
    (tmp_path / "standin" / "log.jsonl").write_text(first + "\n" + first + "\n")
    assert standin.records() == [json.loads(first)] * 2
