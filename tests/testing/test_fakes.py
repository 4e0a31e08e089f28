"""The fakes users test with (cloudbench.testing): FakeRemote on its own and driving real code."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import cloudbench.testing
from cloudbench.core.cluster import Cluster
from cloudbench.core.topology import classify_pair
from cloudbench.errors import GroupRemoteError, RemoteError
from cloudbench.providers import ready
from cloudbench.remote import CommandResult, HostResult, Remote
from cloudbench.runner import CampaignRunner
from cloudbench.spec.model import Spec
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import read_summaries
from cloudbench.testing import fake_results, fakes
from cloudbench.testing import pulumi as fake_pulumi
from cloudbench.testing import remote as fake_remote
from cloudbench.testing.fakes import FakeProvider
from cloudbench.testing.remote import Call, FakeRemote, Invocation, Reply, UnscriptedCommandError
from cloudbench.workers.echo_protocol import FLAG_WARMUP, MAGIC, RECORD
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialContext
from tests.paths import DATA, QUICKSTART


def three_hosts(tmp_path: Path, workloads: str = "[{kind: echo}]") -> tuple[Spec, Cluster]:
    """Hosts s1-1, s2-1, s3-1 with the experiment addresses of the recorded scamper traces."""
    spec = parse_spec(textwrap.dedent(f"""\
        name: fakes
        providers:
          netns:
            regions:
              r1:
                zones:
                  r1-a:
                    subnets: {{s1: {{hosts: 1}}, s2: {{hosts: 1}}, s3: {{hosts: 1}}}}
        workloads: {workloads}
        """), "fakes.yaml")
    cluster = FakeProvider().provision(spec.topology(), tmp_path / "hosts")
    for i, h in enumerate(cluster.hosts, 1):
        h.address = f"198.18.{i}.10"
    return spec, cluster


def arun(coro: Any) -> Any:
    return asyncio.run(coro)


# -- FakeRemote on its own ----------------------------------------------------------------
def test_commands_are_answered_from_the_script(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    a, b, _c = cluster.hosts
    fake = FakeRemote(cluster)
    fake.on(r"^uname -r$", stdout="6.8.0\n")
    fake.on(r"^false", host="s2-*", exit_code=3, stderr="nope\n")
    fake.on(r"^false", stdout="fine")  # other hosts
    fake.on(r"^flaky", exit_code=1, stderr="first try fails", times=1)
    fake.on(r"^flaky", stdout="second try works")
    fake.on(r"^slow", reply=Reply(timed_out=True, stderr="still going"))

    assert arun(fake.run(a, "uname -r")) == CommandResult("s1-1", "uname -r", 0, "6.8.0\n", "")
    assert arun(fake.run(a, "false")).stdout == "fine"
    r = arun(fake.run(b, "false", check=False))
    assert (r.exit_code, r.stderr) == (3, "nope\n")
    with pytest.raises(RemoteError) as info:
        arun(fake.run(b, "false"))
    assert (info.value.host, info.value.command, info.value.exit_code, info.value.stderr_tail) == (
        "s2-1", "false", 3, "nope\n")
    with pytest.raises(RemoteError, match="first try fails"):
        arun(fake.run(a, "flaky"))
    assert arun(fake.run(a, "flaky")).stdout == "second try works"
    with pytest.raises(RemoteError, match=r"timed out after 2\.5s") as info:
        arun(fake.run(a, "slow", timeout=2.5))
    assert info.value.exit_code is None and info.value.stderr_tail == "still going"
    assert [r.used for r in fake.rules] == [1, 2, 1, 1, 1, 1]
    assert fake.unused_rules() == []


def test_a_rule_function_sees_the_command_and_the_host_files(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    a = cluster.hosts[0]
    fake = FakeRemote(cluster)

    def tool(inv: Invocation) -> str:
        cfg = json.loads(inv.read(inv.match["cfg"]))
        inv.write(inv.match["out"], "x" * cfg["n"])
        return f"{inv.host.name} wrote {cfg['n']} within {inv.timeout}"

    fake.on(r"tool (?P<cfg>\S+) (?P<out>\S+)", reply=tool)
    arun(fake.write_text(a, "/w/cfg.json", json.dumps({"n": 5})))
    assert arun(fake.run(a, "tool /w/cfg.json /w/out", timeout=9)).stdout == "s1-1 wrote 5 within 9"
    assert fake.file("s1-1", "/w/./out") == b"xxxxx"
    digest = arun(fake.get(a, "/w/out", tmp_path / "back" / "out"))
    assert (tmp_path / "back" / "out").read_bytes() == b"xxxxx"
    assert digest == hashlib.sha256(b"xxxxx").hexdigest()
    with pytest.raises(KeyError, match=r"s2-1: no file '/w/out'"):
        fake.file("s2-1", "/w/out")  # files are per host


def test_every_call_is_recorded_in_order(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    a, b, _ = cluster.hosts
    local = tmp_path / "worker.py"
    local.write_text("print('hi')\n")
    fake = FakeRemote(cluster)
    fake.on("python3 worker.py", stdout="hi\n")

    async def session() -> None:
        async with fake as remote:
            await remote.put(a, [local], "/w/")
            await remote.run(a, "python3 worker.py", timeout=5)
            await remote.write_text(b, "/w/b.json", "{}")
            await remote.checksums(a, ["/w/worker.py"])
            digest = hashlib.sha256(local.read_bytes()).hexdigest()
            await remote.get(a, "/w/worker.py", tmp_path / "copy.py", sha256=digest)

    arun(session())
    assert fake.calls == [
        Call("s1-1", "connect"), Call("s1-1", "put", "/w/worker.py"),
        Call("s1-1", "run", "python3 worker.py", 5), Call("s2-1", "connect"),
        Call("s2-1", "write_text", "/w/b.json"), Call("s1-1", "checksums", "/w/worker.py"),
        Call("s1-1", "get", "/w/worker.py"),
    ]
    assert fake.commands() == fake.commands("s1-1") == ["python3 worker.py"] and fake.commands("s2-1") == []
    assert fake.closed  # the context manager closed it
    arun(fake.run(a, "python3 worker.py"))
    assert fake.calls[-2] == Call("s1-1", "connect")  # after close, a new connection


def test_missing_files_and_bad_checksums_are_remote_errors(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    a = cluster.hosts[0]
    fake = FakeRemote(cluster)
    fake.add_file("s1-1", "/w/out.bin", b"data")
    with pytest.raises(RemoteError, match="checksum mismatch") as info:
        arun(fake.get(a, "/w/out.bin", tmp_path / "o", sha256="0" * 64))
    assert info.value.host == "s1-1"
    with pytest.raises(RemoteError, match="download failed"):
        arun(fake.get(a, "/w/none.bin", tmp_path / "n"))
    with pytest.raises(RemoteError, match="No such file") as info:
        arun(fake.checksums(a, ["/w/out.bin", "/w/none.bin"]))
    assert info.value.exit_code == 1 and "/w/out.bin:" not in info.value.stderr_tail


def test_an_unscripted_command_fails_loudly_naming_host_and_command(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    fake = FakeRemote(cluster)
    fake.on(r"^once$", times=1)
    fake.on(r"^ls", host="s3-*")
    arun(fake.run(cluster.hosts[0], "once"))
    with pytest.raises(UnscriptedCommandError, match=r"s1-1: unscripted command `once`") as info:
        arun(fake.run(cluster.hosts[0], "once"))
    assert "matched but was used up after 1 answer(s)" in str(info.value)
    with pytest.raises(UnscriptedCommandError, match=r"s1-1: unscripted command `ls /tmp`"):
        arun(fake.run(cluster.hosts[0], "ls /tmp"))  # the only ls rule is for s3-*
    # Not a RemoteError: a fan-out does not turn a forgotten rule into one host's failure.
    with pytest.raises(UnscriptedCommandError, match="rm -rf"):
        arun(fake.fan_out(lambda h: fake.run(h, "rm -rf /w")))


def test_fan_out_gives_a_result_per_host_and_keeps_failures(tmp_path: Path) -> None:
    _, cluster = three_hosts(tmp_path)
    fake = FakeRemote(cluster)
    fake.on(r"facts\.py", host="s2-1", exit_code=2, stderr="Traceback: boom")
    fake.on(r"facts\.py", reply=lambda inv: json.dumps({"host": inv.host.name}))
    fake.fail_connect("s3-*", reason="cannot connect to 127.0.0.1:22")

    async def facts(h: Any) -> dict[str, str]:
        r = await fake.run(h, f"python3 facts.py {h.address}")
        out: dict[str, str] = json.loads(r.stdout)
        return out

    results = arun(fake.fan_out(facts))
    assert [r.host for r in results] == ["s1-1", "s2-1", "s3-1"]
    assert results[0] == HostResult("s1-1", value={"host": "s1-1"})
    f2, f3 = results[1].failure, results[2].failure
    assert f2 is not None and (f2.host, f2.exit_code, f2.stderr_tail) == ("s2-1", 2, "Traceback: boom")
    assert f2.command == "python3 facts.py 198.18.2.10"
    assert f3 is not None and (f3.host, f3.command) == ("s3-1", "ssh connect")
    assert f3.reason == "cannot connect to 127.0.0.1:22"
    assert fake.commands("s3-1") == []  # never got to run anything
    # A subset of hosts, and the real run_all on top of the fake.
    assert [r.host for r in arun(fake.fan_out(facts, cluster.hosts[:1]))] == ["s1-1"]
    assert [r.ok for r in arun(fake.run_all({"s1-1": "python3 facts.py", "s2-1": "python3 facts.py"}))] == [
        True, False]


def test_fake_remote_replaces_every_io_method_of_remote() -> None:
    """A Remote method the fake does not override would open real SSH connections."""
    pure = {"fan_out", "run_all", "connect_all", "__aexit__"}  # built on the others; kept real
    for name, member in vars(Remote).items():
        if inspect.isfunction(member) and name not in pure and name != "__init__":
            assert name in vars(FakeRemote), f"FakeRemote does not override Remote.{name}"


# -- FakeRemote driving real code -------------------------------------------------------------
def test_wait_ready_retries_unreachable_hosts_and_collects_failures(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _, cluster = three_hosts(tmp_path)
    fake = FakeRemote(cluster)
    monkeypatch.setattr(ready, "Remote", fake.factory)
    fake.fail_connect("s2-1", times=2)  # booting: refused twice, then up
    fake.on("cloud-init status", host="s3-1", exit_code=1, stderr="missing: scamper")
    fake.on("cloud-init status", stdout="done")

    with pytest.raises(GroupRemoteError) as info:
        ready.wait_ready(cluster, "cloud-init status --wait", timeout=30, poll=0.01)
    assert [(f.host, f.exit_code, f.stderr_tail) for f in info.value.failures] == [("s3-1", 1, "missing: scamper")]
    assert info.value.succeeded == ["s1-1", "s2-1"]
    assert [c.op for c in fake.calls if c.host == "s2-1"] == ["connect", "connect", "connect", "run"]

    # A host answering with another key fails at once: no retries until the deadline.
    fake = FakeRemote(cluster)
    monkeypatch.setattr(ready, "Remote", fake.factory)
    fake.fail_connect("s1-1", reason=f"{ready.HOST_KEY_MISMATCH} the pinned key; refused")
    fake.on("true")
    with pytest.raises(GroupRemoteError) as info:
        ready.wait_ready(cluster, "true", timeout=30, poll=0.01)
    assert [f.host for f in info.value.failures] == ["s1-1"]
    assert [c.op for c in fake.calls if c.host == "s1-1"] == ["connect"]
    fake = FakeRemote(cluster)
    monkeypatch.setattr(ready, "Remote", fake.factory)
    fake.on("true", stdout="ok")
    assert {h: r.stdout for h, r in ready.wait_ready(cluster, "true", timeout=30).items()} == {
        "s1-1": "ok", "s2-1": "ok", "s3-1": "ok"}


def test_traceroute_trial_with_a_failing_source(tmp_path: Path) -> None:
    """The traceroute controller on a fake cluster: configs written, output pulled, tables made."""
    spec, cluster = three_hosts(tmp_path, "[{kind: traceroute, sources: [s1-1, s2-1]}]")
    recorded = (DATA / "scamper_tracelb_workload_sb.json").read_bytes()  # two traces from 198.18.2.10
    fake = FakeRemote(cluster)
    seen: dict[str, Any] = {}

    def scamper(inv: Invocation) -> Reply:
        seen[inv.host.name] = json.loads(inv.read(inv.match["cfg"]))
        inv.write(inv.match["out"], recorded)
        return Reply(stdout="scamper 2024\n" + json.dumps({"schema": 1, "traces": 2, "exit_code": 0,
                                                          "sha256": hashlib.sha256(recorded).hexdigest()}))

    fake.on(r"traceroute\.py (?P<cfg>\S+) (?P<out>\S+)", host="s1-1", exit_code=1, stderr="scamper: not found")
    fake.on(r"traceroute\.py (?P<cfg>\S+) (?P<out>\S+)", reply=scamper)
    kind = workload_kind("traceroute")
    params = spec.workload("traceroute")
    (hosts, pairs), = kind.expand(params, spec)
    trial = Trial("r000-t000-traceroute", 0, 0, "traceroute", "traceroute", hosts, pairs)
    run = RunDir(tmp_path / "run")
    outcome = arun(kind.run(TrialContext(trial, params, spec, cluster, fake, run, "token")))

    assert seen == {"s2-1": seen["s2-1"]} and seen["s2-1"]["destinations"] == ["198.18.1.10", "198.18.3.10"]
    assert [(f.host, f.exit_code, f.reason) for f in outcome.failures] == [
        ("s1-1", 1, "worker printed no summary line")]
    assert set(outcome.stats) == {"s2-1"}
    traces = read_parquet(run.path / "traceroute/traces/r000-t000-traceroute.parquet", kind="traceroute-traces")
    assert traces.column("dst").cast("string").to_pylist() == ["s1-1", "s3-1"]
    assert set(traces.column("src").cast("string").to_pylist()) == {"s2-1"}
    assert outcome.rows > 0 and set(outcome.files) == {
        "traceroute/raw/r000-t000-traceroute-s2-1.json", "traceroute/links/r000-t000-traceroute.parquet",
        "traceroute/traces/r000-t000-traceroute.parquet"}
    assert fake.commands("s2-1")[0].startswith("cd /nonexistent/") and len(fake.commands()) == 2


# -- a whole campaign, offline: FakeProvider + FakeRemote ------------------------------------------
RTT_US = {"self": 20, "same_subnet": 100, "cross_subnet": 150, "cross_zone": 400, "cross_region": 3000}
T0_NS = 10**12


def echo_worker(spec: Spec) -> Any:
    """The echo worker's reply: a raw file with one known RTT per latency group, and its summary line."""
    topo = spec.topology()

    def reply(inv: Invocation) -> Reply:
        cfg = json.loads(inv.read(inv.match["cfg"]))
        rounds, warm = round(cfg["rate"] * (cfg["warmup_s"] + cfg["duration_s"])), round(cfg["rate"] * cfg["warmup_s"])
        header = {k: cfg[k] for k in ("schema", "host", "host_id", "peers", "rate", "payload", "timeout_s", "warmup_s")}
        header.update(worker_version="fake", clock="CLOCK_MONOTONIC", t0_ns=T0_NS)
        head = json.dumps(header).encode()
        body = bytearray(MAGIC + len(head).to_bytes(4, "big") + head)
        for p in cfg["peers"]:
            rtt = RTT_US[classify_pair(topo.host(cfg["host"]), topo.host(p["name"])).value] * 1000
            for n in range(rounds):
                send = T0_NS + int(n * 1e9 / cfg["rate"])
                body += RECORD.pack(n, p["id"], FLAG_WARMUP if n < warm else 0, send, send + rtt, -1)
        inv.write(inv.match["out"], bytes(body))
        return Reply(stdout=json.dumps({"sha256": hashlib.sha256(body).hexdigest(), "rows": len(body)}))

    return reply


def test_a_campaign_runs_offline_with_fake_provider_and_remote(tmp_path: Path) -> None:
    text = QUICKSTART.read_text().replace("duration: 20s", "duration: 1s").replace("rest: 2s", "rest: 0s")
    spec = parse_spec(text, "q.yaml")
    provider = FakeProvider()
    fake = FakeRemote(Cluster("none", "none", spec.topology(), [], tmp_path / "k"))
    fake.on(r"facts\.py", stdout='{"kernel": "fake"}')
    fake.on(r"echo\.py run (?P<cfg>\S+) (?P<out>\S+)", reply=echo_worker(spec))

    run = CampaignRunner(spec, "q.yaml", tmp_path / "results", provider_factory=lambda _n: provider,
                         remote_factory=fake.factory).execute()

    m = run.manifest()
    assert m.status == "complete" and [r.status for r in m.repetitions] == ["ok", "ok"]
    assert provider.destroyed == provider.provisioned == ["fake0", "fake1"]
    assert all(h.facts["kernel"] == "fake" for r in m.repetitions for h in r.hosts)
    hosts = [h.name for h in spec.topology()]
    put = {(c.host, c.target.rsplit("/", 1)[1]) for c in fake.calls if c.op == "put"}
    assert put == {(h, f) for h in hosts for f in ("echo.py", "echo_connections.py", "echo_protocol.py", "facts.py")}
    assert sorted(c.host for c in fake.calls if c.op == "get") == sorted(hosts * 2)  # one raw file per host and rep
    s = read_summaries(run).to_pydict()
    p50 = {(r, g): v for r, g, v, metric in zip(s["repetition"], s["group"], s["value"], s["metric"], strict=True)
           if metric == "rtt_p50_us"}
    assert p50 == {(r, g): pytest.approx(us) for r in (0, 1) for g, us in RTT_US.items()}


# -- the fakes are documented for users ---------------------------------------------------------
@pytest.mark.parametrize("module", [fakes, fake_results, fake_pulumi, fake_remote], ids=lambda m: m.__name__)
def test_every_public_fake_is_documented(module: Any) -> None:
    assert inspect.getdoc(module)
    assert f":mod:`{module.__name__}`" in (cloudbench.testing.__doc__ or "")  # listed in the package's guide
    public = [(name, obj) for name, obj in vars(module).items()
              if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj))
              and obj.__module__ == module.__name__]
    assert public
    for name, obj in public:
        assert inspect.getdoc(obj), f"{module.__name__}.{name} has no docstring"


def test_fake_cloud_provider_picks_the_spec_cloud(tmp_path: Path) -> None:
    spec, _ = three_hosts(tmp_path)  # a netns spec: no cloud in it
    with pytest.raises(ValueError, match=r"the spec has clouds \[\]"):
        fake_pulumi.fake_cloud_provider(fake_pulumi.FakeAutomation(), spec, tmp_path)
    with pytest.raises(ValueError, match="no 'aws' provider"):
        fake_pulumi.fake_cloud_provider(fake_pulumi.FakeAutomation(), spec, tmp_path, cloud="aws")
