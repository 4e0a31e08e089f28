"""`cloudbench doctor`: findings with fakes, and the command's output and exit code."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.providers.clouds.cli import INSTALL_HINT, PulumiCli, find_cli, min_version
from cloudbench.providers.clouds.doctor import FAIL, OK, WARN, Probe, diagnose
from cloudbench.testing.pulumi import FakeAccount, PulumiStandin
from cloudbench.workloads import load_spec, parse_spec
from tests.paths import EXPERIMENTS
from tests.providers.clouds.test_clouds import stormcloud_yaml

SECRET = "wJalrXUtnFEMI-not-a-real-secret"


def probe(tmp_path: Path, env: dict[str, str], cli: bool = True, sdk: bool = True,
          version: str = "v3.190.0", account: Any = FakeAccount) -> Probe:
    def find() -> PulumiCli:
        return find_cli(which=lambda name: "/opt/pulumi/bin/pulumi" if cli else None, run=lambda argv: version)

    return Probe(env, tmp_path, lambda m: sdk, find, account)


class RefusedAccount(FakeAccount):
    def identity(self) -> str:
        raise RuntimeError("Unable to locate credentials")


def by_check(findings: list) -> dict[str, tuple[str, str, str]]:  # type: ignore[type-arg]
    return {f.check: (f.status, f.detail, f.fix) for f in findings}


def test_doctor_finds_what_would_stop_a_run(tmp_path: Path) -> None:
    spec = parse_spec(stormcloud_yaml("aws").replace("    controller_cidr: 203.0.113.7/32\n", ""), "a.yaml")
    found = by_check(diagnose(spec, probe(tmp_path, {}, cli=False, sdk=False)))
    need = ".".join(map(str, min_version()))
    assert found["pulumi CLI"] == (FAIL, f"the Pulumi CLI (`pulumi`, {need} or newer) is not on PATH", INSTALL_HINT)
    assert found["aws SDK"][0] == FAIL and "cloudbench[aws]" in found["aws SDK"][2]
    assert found["controller CIDR"][0] == FAIL and "checkip" in found["controller CIDR"][2]
    refused = by_check(diagnose(spec, probe(tmp_path, {}, account=RefusedAccount)))["aws credentials"]
    assert refused[0] == FAIL and "Unable to locate" in refused[1] and "aws configure" in refused[2]
    env = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": SECRET,
           "CLOUDBENCH_CONTROLLER_CIDR": "198.51.100.4/32"}
    findings = diagnose(spec, probe(tmp_path, env))
    assert [f for f in findings if f.blocks] == []
    assert SECRET not in json.dumps([f.to_dict() for f in findings])
    assert "AKIAEXAMPLE" not in json.dumps([f.to_dict() for f in findings])
    assert by_check(findings)["controller CIDR"] == (OK, "198.51.100.4/32 (from $CLOUDBENCH_CONTROLLER_CIDR)", "")
    bad = diagnose(spec, probe(tmp_path, {**env, "CLOUDBENCH_CONTROLLER_CIDR": "0.0.0.0/0"}))
    assert by_check(bad)["controller CIDR"][0] == FAIL
    assert [f.check for f in bad if f.blocks] == ["controller CIDR"]


def test_doctor_checks_nothing_for_a_spec_without_a_cloud(tmp_path: Path) -> None:
    spec = load_spec(EXPERIMENTS / "quickstart.yaml")
    found = diagnose(spec, probe(tmp_path, {}, cli=False, sdk=False))  # neither is needed off the clouds
    assert [(f.check, f.status) for f in found] == [("clouds", OK)] and "netns" in found[0].detail
    without_spec = diagnose(None, probe(tmp_path, {}, sdk=False))
    assert [(f.check, f.status) for f in without_spec] == [("pulumi CLI", OK), ("aws SDK", WARN),
                                                           ("gcp SDK", WARN), ("azure SDK", WARN)]


@pytest.mark.parametrize(("version", "reason"), [("v4.0.1", "cloudbench drives Pulumi 3.x"),
                                                 ("v3.100.0", "older than the")])
def test_doctor_says_why_the_cli_is_refused_and_gives_the_hint_once(tmp_path: Path, version: str,
                                                                     reason: str) -> None:
    status, detail, fix = by_check(diagnose(None, probe(tmp_path, {}, version=version)))["pulumi CLI"]
    assert status == FAIL and reason in detail and detail.startswith("the Pulumi CLI at /opt/pulumi/bin/pulumi")
    assert "get.pulumi.com" not in detail and fix == INSTALL_HINT


def test_doctor_accepts_credentials_only_the_sdk_finds_and_refuses_a_config_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ECS task / container role: no key in the environment, no ~/.aws file, yet boto3 signs
    with it (its endpoint here on loopback). A ~/.aws/config with a region and no key: refused."""
    pytest.importorskip("moto")
    import boto3
    import moto

    from tests.providers.clouds.test_accounts import no_aws_credentials

    no_aws_credentials(monkeypatch, tmp_path)
    (tmp_path / "no-aws-config").write_text("[default]\nregion = us-east-1\n")
    spec = parse_spec(stormcloud_yaml("aws"), "a.yaml")
    real = probe(tmp_path, {}, account=None)
    with moto.mock_aws(config={"core": {"mock_credentials": False}}):
        found = by_check(diagnose(spec, real))["aws credentials"]
    assert found[0] == FAIL and "NoCredentials" in found[1]

    served: list[str] = []

    class Creds(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.append(self.path)
            body = json.dumps({"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": SECRET, "Token": "t",
                               "Expiration": "2099-01-01T00:00:00Z"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Creds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", f"http://127.0.0.1:{server.server_port}/role")
        with moto.mock_aws(config={"core": {"mock_credentials": False}}):
            assert boto3.session.Session().get_credentials() is not None
            found = by_check(diagnose(spec, real))["aws credentials"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert found[0] == OK and "123456789012" in found[1] and SECRET not in found[1]
    assert served and served[0] == "/role"


def test_doctor_names_each_missing_quota_and_unavailable_type_on_moto(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cloudbench doctor SPEC` against an AWS stand-in (moto), as a user runs it."""
    pytest.importorskip("moto")
    import boto3
    import moto

    from tests.providers.clouds.test_accounts import AWS_SPEC, no_aws_credentials, set_quotas

    standin = PulumiStandin(tmp_path / "standin")
    monkeypatch.setenv("PATH", standin.path)
    no_aws_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    set_quotas(monkeypatch, {("ec2", "L-1216C47A"): 6.0})
    spec = tmp_path / "q.yaml"
    spec.write_text(AWS_SPEC)
    with moto.mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        for i in range(4):
            ec2.create_vpc(CidrBlock=f"10.{i}.0.0/16")
        res = CliRunner().invoke(app, ["doctor", str(spec), "--json"])
    assert res.exit_code == 1, res.output
    failed = [f for f in json.loads(res.output) if f["status"] == "fail"]
    lines = sorted(f"{f['check']}: {f['detail']}" for f in failed)
    assert lines == [
        "aws us-east-1 quota: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances vCPUs "
        "(L-1216C47A): the stack needs 8 vCPUs, 0 of 6 vCPUs in use",
        "aws us-east-1e offer: m5.large is not offered in us-east-1e to this account "
        "(DescribeInstanceTypeOfferings; 1 VM(s) asked)",
        "aws us-west-2 quota: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances vCPUs "
        "(L-1216C47A): the stack needs 8 vCPUs, 0 of 6 vCPUs in use",
        "aws us-west-2 quota: VPCs per Region (L-F678F1CE): the stack needs 1, 5 of 5 in use",
    ]
    assert SECRET not in res.output


def test_doctor_command_exit_codes_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("moto")
    import moto

    from tests.providers.clouds.test_accounts import no_aws_credentials

    standin = PulumiStandin(tmp_path / "standin")
    monkeypatch.setenv("PATH", standin.path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    no_aws_credentials(monkeypatch, tmp_path)
    spec = tmp_path / "aws.yaml"
    spec.write_text(stormcloud_yaml("aws"))
    with moto.mock_aws(config={"core": {"mock_credentials": False}}):  # the account: moto
        res = CliRunner().invoke(app, ["doctor", str(spec)], terminal_width=200)
        assert res.exit_code == 1, res.output
        assert "aws credentials" in res.output and "aws configure" in res.output and "would stop a run" in res.output
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        res = CliRunner().invoke(app, ["doctor", str(spec), "--json"])
        assert res.exit_code == 0, res.output
        found = {f["check"]: f for f in json.loads(res.output)}
        assert found["pulumi CLI"]["status"] == "ok" and "3.190.0" in found["pulumi CLI"]["detail"]
        assert found["aws credentials"]["status"] == "ok"
        assert SECRET not in res.output
        # A lease shorter than the campaign would stop the run too.
        spec.write_text(stormcloud_yaml("aws", "expiry: 1h", workloads="  - kind: echo\n    duration: 2h\n"))
        res = CliRunner().invoke(app, ["doctor", str(spec), "--json"])
        assert res.exit_code == 1 and any(f["check"] == "lease" for f in json.loads(res.output))
    standin.configure(version="v3.100.0")
    res = CliRunner().invoke(app, ["doctor", "--json"])
    assert res.exit_code == 1 and "older than" in res.output
