"""Every exit code of the ``cloudbench`` command (:class:`cloudbench.errors.ExitCode`), through the CLI.

Codes 0, 1, 2 and SIGTERM's 130 run ``python -m cloudbench`` in a real process and check its exit
status; 3, 4 and Ctrl-C's 130 use Typer's runner in this process, where the runner's provider can
be replaced by a fake (:class:`cloudbench.testing.fakes.FakeProvider`, whose hosts are unreachable)
or by a tripwire that fails the test if any provider is made. No test needs root or a cloud.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import cloudbench
from cloudbench.cli import app
from cloudbench.core.cluster import Cluster
from cloudbench.errors import ExitCode
from cloudbench.providers.base import Provider
from cloudbench.remote import Remote
from cloudbench.runner import CampaignRunner
from cloudbench.store.manifest import Manifest, RepetitionRecord
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
from cloudbench.testing.fakes import FakeProvider
from tests.paths import EXPERIMENTS, QUICKSTART, ROOT

CLOUD_SPEC = EXPERIMENTS / "stormcloud-aws.yaml"
INTERRUPTED = "interrupted: everything created was torn down; data measured so far is kept"


def python_m(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m MODULE ARGS`` in ``cwd``, this checkout first on the path; plain text, a message a line."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env.update(PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def tree(path: Path) -> list[Path]:
    """Everything under ``path``, to show that a command created nothing."""
    return sorted(path.rglob("*"))


def cloud_spec(tmp_path: Path, budget: float | None) -> Path:
    """The AWS example in ``tmp_path``: with ``budget`` (or none), two repetitions, short trials."""
    text = CLOUD_SPEC.read_text()
    for old, new in (("budget: 5 ", "# no budget" if budget is None else f"budget: {budget} "),
                     ("repetitions: 3", "repetitions: 2"), ("duration: 10m", "duration: 2s"),
                     ("warmup: 5s", "warmup: 1s")):
        assert text.count(old) == 1, f"the example changed: no {old!r}"
        text = text.replace(old, new)
    path = tmp_path / "cloud.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def fake_provider(monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    """The runner's provider, whatever the spec names: a fake whose hosts cannot be reached."""
    fake = FakeProvider()

    def provider(self: CampaignRunner, name: str) -> Provider:
        return fake

    monkeypatch.setattr(CampaignRunner, "_default_provider", provider)
    return fake


@pytest.fixture
def no_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails the test if the runner makes a provider or anything imports Pulumi."""
    made: list[str] = []

    def provider(self: CampaignRunner, name: str) -> Provider:
        made.append(name)
        raise AssertionError(f"provider {name!r} made")

    monkeypatch.setattr(CampaignRunner, "_default_provider", provider)
    for module in ("pulumi", "pulumi.automation", "pulumi_aws"):
        monkeypatch.setitem(sys.modules, module, None)  # `import pulumi` raises ImportError
    yield
    assert made == []


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), terminal_width=200)


def only_run(results: Path) -> tuple[cloudbench.RunDir, Manifest]:
    (campaign,) = results.iterdir()
    (run_path,) = campaign.iterdir()
    run = cloudbench.open_results(run_path)
    return run, run.manifest()


def test_help_documents_every_exit_code() -> None:
    """The numbers `cloudbench --help` promises are the ones the tests below check."""
    r = invoke("--help")
    assert r.exit_code == ExitCode.OK, r.output
    text = " ".join(r.output.replace("│", " ").split())
    documented = re.search(r"Exit codes: (.*? interrupted)\.", text)
    assert documented is not None, text
    assert [int(n) for n in re.findall(r"\b(\d+) [a-z]", documented.group(1))] == [int(c) for c in ExitCode]


# -- 0 ----------------------------------------------------------------------------------------


def test_ok_0_validate_a_good_spec(tmp_path: Path) -> None:
    r = python_m("cloudbench", "validate", str(QUICKSTART), cwd=tmp_path)
    assert r.returncode == ExitCode.OK, r.stderr
    assert f"ok: {QUICKSTART}: campaign 'quickstart', 8 hosts, 2 trials" in r.stdout
    assert "error" not in r.stderr
    assert tree(tmp_path) == []


# -- 1 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["no runs", "truncated manifest"])
def test_error_1_report_of_missing_or_damaged_results(tmp_path: Path, damage: str) -> None:
    campaign = make_campaign(tmp_path, "demo", [FakeRun({("rtt_p50_us", "same_zone"): [100.0, 101.0]})])
    (manifest,) = campaign.glob("*/manifest.json")
    if damage == "no runs":
        manifest.unlink()
        expected = f"error: {campaign}: holds no cloudbench run (no */manifest.json)"
    else:
        manifest.write_text(manifest.read_text()[:40])
        expected = f"error: {manifest}: manifest is not valid JSON (truncated?)"
    r = python_m("cloudbench", "report", str(campaign), cwd=tmp_path)
    assert r.returncode == ExitCode.ERROR, r.stderr
    assert expected in r.stderr
    assert "Traceback" not in r.stderr


# -- 2 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_usage_2_bad_spec_names_file_line_and_field(tmp_path: Path, command: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(QUICKSTART.read_text().replace("rate: 100", "rate: 0"))
    before = tree(tmp_path)
    args = ["--results", str(tmp_path / "res")] if command == "run" else []
    r = python_m("cloudbench", command, str(bad), *args, cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE, r.stderr
    line = line_of(bad.read_text(), "rate: 0")
    assert f"error: {bad}:{line}: [workloads[0].rate] Input should be greater than 0" in r.stderr
    assert "Traceback" not in r.stderr
    assert tree(tmp_path) == before  # no results directory, no run


@pytest.mark.parametrize(("bad", "message"), [
    (["--error", "5"], "error: --error '5': must be between 0 and 100% exclusive (a bare number is a fraction"),
    (["--level", "95"], "error: --level '95': must be between 0 and 100% exclusive"),
    (["--subsets", "many"], "Invalid value for '--subsets'"),  # refused by Typer itself
    (["--trials", "many"], "Invalid value for '--subsets'"),  # the old spelling of --subsets
])
def test_usage_2_bad_option_value_writes_nothing(tmp_path: Path, bad: list[str], message: str) -> None:
    campaign = confirm_campaign(tmp_path)
    before = tree(tmp_path)
    r = python_m("cloudbench", "confirm", str(campaign), *bad, cwd=tmp_path)
    assert r.returncode == ExitCode.USAGE, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert tree(tmp_path) == before


def confirm_campaign(where: Path) -> Path:
    """The campaign of the bad-option tests (the same for each)."""
    return make_campaign(where, "demo", [FakeRun({("rtt_p50_us", "same_zone"): normal_values(20, 100, 0.05)})])


def test_the_same_confirm_with_good_values_writes_confirm_json(tmp_path: Path) -> None:
    """"Nothing written" above means something: on the same campaign, the same command with good
    values writes confirm.json. (Once, not once per bad value: the campaign is the same.)"""
    campaign = confirm_campaign(tmp_path)
    good = python_m("cloudbench", "confirm", str(campaign), "--error", "5%", "--subsets", "20", cwd=tmp_path)
    assert good.returncode == ExitCode.OK, good.stderr
    assert (campaign / "confirm" / "confirm.json").exists()


# -- 3 ----------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_provider")
@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_over_budget_3_run_creates_nothing(tmp_path: Path, quiet: list[str]) -> None:
    spec = cloud_spec(tmp_path, budget=0.01)
    loaded = cloudbench.load_spec(spec)
    estimate = cloudbench.estimate_cost(loaded, cloudbench.make_plan(loaded), cloudbench.spec_prices(loaded, spec))
    assert estimate.complete and estimate.total_usd > 0.01  # what makes the run over budget
    results = tmp_path / "res"
    r = invoke("run", str(spec), "--results", str(results), *quiet)
    assert r.exit_code == ExitCode.OVER_BUDGET, r.output
    assert (f"error: campaign 'stormcloud-aws' is estimated at {estimate.total_usd:.2f} USD" in r.stderr
            and "above its budget of 0.01; nothing was created" in r.stderr), r.stderr
    assert not results.exists() and tree(tmp_path) == [spec]


# -- 4 ----------------------------------------------------------------------------------------


def test_incomplete_4_run_whose_repetitions_failed_keeps_and_reports_its_data(
        tmp_path: Path, fake_provider: FakeProvider) -> None:
    spec = cloud_spec(tmp_path, budget=None)
    results = tmp_path / "res"
    r = invoke("run", str(spec), "--results", str(results))
    assert r.exit_code == ExitCode.INCOMPLETE, r.output
    run, manifest = only_run(results)
    assert manifest.status == "failed" and len(manifest.repetitions) == 2
    hosts = sum(len(rep.failures) for rep in manifest.repetitions)
    assert hosts == 2 * len(cloudbench.load_spec(spec).topology())
    message = (f"error: run {run.run_id} is failed: 2 of 2 repetition(s) lost, {hosts} host failure(s) "
               "(trials and deployments); the data measured is kept")
    assert message in r.stderr
    # the report was printed and written before the error
    assert r.output.index(f"results: {run.path}") < r.output.index(message)
    assert (run.path / "report" / "report.json").exists()
    assert fake_provider.provisioned == fake_provider.destroyed == ["fake0", "fake1"]


# -- 130 --------------------------------------------------------------------------------------


def test_interrupted_130_ctrl_c_tears_down_and_keeps_the_run(
        tmp_path: Path, fake_provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    async def ctrl_c(self: CampaignRunner, remote: Remote, cluster: Cluster, rec: RepetitionRecord) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(CampaignRunner, "_deploy", ctrl_c)
    results = tmp_path / "res"
    r = invoke("run", str(cloud_spec(tmp_path, budget=None)), "--results", str(results))
    assert r.exit_code == ExitCode.INTERRUPTED, r.output
    assert INTERRUPTED in r.stderr
    assert "Traceback" not in r.output
    assert fake_provider.provisioned == fake_provider.destroyed == ["fake0"] and fake_provider.live == set()
    _, manifest = only_run(results)
    assert manifest.status == "interrupted" and manifest.ended_utc


def test_interrupted_130_sigterm_in_a_real_process(tmp_path: Path) -> None:
    spec = cloud_spec(tmp_path, budget=None)
    state, results = tmp_path / "fake.json", tmp_path / "res"
    r = python_m("tests.cli.sigterm_run", str(state), "run", str(spec), "--results", str(results), "--quiet",
                 cwd=tmp_path)
    assert r.returncode == ExitCode.INTERRUPTED, r.stderr
    assert INTERRUPTED in r.stderr
    assert "Traceback" not in r.stderr
    assert json.loads(state.read_text()) == {"provisioned": ["fake0"], "destroyed": ["fake0"]}
    _, manifest = only_run(results)
    assert manifest.status == "interrupted" and manifest.error == "signal SIGTERM"
