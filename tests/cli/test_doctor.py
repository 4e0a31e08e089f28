"""`cloudbench doctor`: findings with fakes, and the command's output and exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cloudbench.cli import app
from cloudbench.providers.clouds.cli import INSTALL_HINT, PulumiCli, find_cli, min_version
from cloudbench.providers.clouds.doctor import FAIL, OK, WARN, Probe, diagnose
from cloudbench.testing.pulumi import PulumiStandin
from cloudbench.workloads import load_spec, parse_spec
from tests.paths import EXPERIMENTS
from tests.providers.clouds.test_clouds import stormcloud_yaml

SECRET = "wJalrXUtnFEMI-not-a-real-secret"


def probe(tmp_path: Path, env: dict[str, str], cli: bool = True, sdk: bool = True,
          version: str = "v3.190.0") -> Probe:
    def find() -> PulumiCli:
        return find_cli(which=lambda name: "/opt/pulumi/bin/pulumi" if cli else None, run=lambda argv: version)

    return Probe(env, tmp_path, lambda m: sdk, find)


def by_check(findings: list) -> dict[str, tuple[str, str, str]]:  # type: ignore[type-arg]
    return {f.check: (f.status, f.detail, f.fix) for f in findings}


def test_doctor_finds_what_would_stop_a_run(tmp_path: Path) -> None:
    spec = parse_spec(stormcloud_yaml("aws").replace("    controller_cidr: 203.0.113.7/32\n", ""), "a.yaml")
    found = by_check(diagnose(spec, probe(tmp_path, {}, cli=False, sdk=False)))
    need = ".".join(map(str, min_version()))
    assert found["pulumi CLI"] == (FAIL, f"the Pulumi CLI (`pulumi`, {need} or newer) is not on PATH", INSTALL_HINT)
    assert found["aws SDK"][0] == FAIL and "cloudbench[aws]" in found["aws SDK"][2]
    assert found["aws credentials"][0] == FAIL and "aws configure" in found["aws credentials"][2]
    assert found["controller CIDR"][0] == FAIL and "checkip" in found["controller CIDR"][2]
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


@pytest.mark.parametrize(("cloud", "files", "env"), [
    ("gcp", [".config/gcloud/application_default_credentials.json"], {}),
    ("azure", [".azure/azureProfile.json"], {}),
    ("azure", [], {"ARM_CLIENT_ID": "x", "ARM_CLIENT_SECRET": SECRET}),
    ("aws", [".aws/credentials"], {}),
])
def test_doctor_finds_each_cloud_s_usual_credentials(tmp_path: Path, cloud: str, files: list[str],
                                                       env: dict[str, str]) -> None:
    spec = parse_spec(stormcloud_yaml(cloud), f"{cloud}.yaml")
    assert by_check(diagnose(spec, probe(tmp_path, {})))[f"{cloud} credentials"][0] == FAIL
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("{}")
    status, detail, _ = by_check(diagnose(spec, probe(tmp_path, env)))[f"{cloud} credentials"]
    assert status == OK and SECRET not in detail


def test_doctor_counts_vcpus_per_region_against_default_quotas(tmp_path: Path) -> None:
    spec = parse_spec(stormcloud_yaml("gcp", vm_type="n2-standard-8"), "g.yaml")
    found = by_check(diagnose(spec, probe(tmp_path, {})))
    status, detail, fix = found["gcp us-east1 quota"]
    assert status == WARN and detail.startswith("6 VMs, 48 vCPUs") and "increase" in fix
    assert found["gcp us-west1 quota"][0] == OK


def test_doctor_command_exit_codes_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    standin = PulumiStandin(tmp_path / "standin")
    monkeypatch.setenv("PATH", standin.path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    spec = tmp_path / "aws.yaml"
    spec.write_text(stormcloud_yaml("aws"))
    res = CliRunner().invoke(app, ["doctor", str(spec)], terminal_width=200)
    assert res.exit_code == 1, res.output
    assert "aws credentials" in res.output and "aws configure" in res.output and "would stop a run" in res.output
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    res = CliRunner().invoke(app, ["doctor", str(spec), "--json"])
    assert res.exit_code == 0, res.output
    found = {f["check"]: f for f in json.loads(res.output)}
    assert found["pulumi CLI"]["status"] == "ok" and "3.190.0" in found["pulumi CLI"]["detail"]
    assert SECRET not in res.output
    # A lease shorter than the campaign would stop the run too.
    spec.write_text(stormcloud_yaml("aws", "expiry: 1h", workloads="  - kind: echo\n    duration: 2h\n"))
    res = CliRunner().invoke(app, ["doctor", str(spec), "--json"])
    assert res.exit_code == 1 and any(f["check"] == "lease" for f in json.loads(res.output))
    standin.configure(version="v3.100.0")
    res = CliRunner().invoke(app, ["doctor", "--json"])
    assert res.exit_code == 1 and "older than" in res.output
