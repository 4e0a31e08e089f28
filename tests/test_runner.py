"""The runner's failure paths, root-free, with a fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudbench.errors import ProvisionError, RemoteFailure
from cloudbench.providers.base import Finding
from cloudbench.remote import HostResult
from cloudbench.runner import CampaignRunner, QuietUI
from cloudbench.testing.fakes import FakeProvider
from cloudbench.workloads import parse_spec
from cloudbench.workloads.base import TrialOutcome
from tests.paths import QUICKSTART


def spec(repetitions: int = 2, fresh: str = "repetition"):  # type: ignore[no-untyped-def]
    text = (QUICKSTART.read_text().replace("repetitions: 2", f"repetitions: {repetitions}")
            .replace("fresh_hosts: repetition", f"fresh_hosts: {fresh}").replace("duration: 20s", "duration: 1s"))
    return parse_spec(text, "q.yaml")


def test_unreachable_hosts_fail_each_repetition_and_are_torn_down(tmp_path: Path) -> None:
    fake = FakeProvider()
    run = CampaignRunner(spec(), "q.yaml", tmp_path, provider_factory=lambda _n: fake).execute()
    assert fake.provisioned == ["fake0", "fake1"] and fake.destroyed == ["fake0", "fake1"]
    assert fake.live == set()
    m = run.manifest()
    assert m.status == "failed" and m.error is not None and "deploy" in m.error
    for rep in m.repetitions:
        assert rep.status == "failed"
        assert {f.host for f in rep.failures} == {h.name for h in spec().topology()}
        assert all("cannot connect" in f.reason for f in rep.failures)
    assert m.trials == [] and m.ended_utc


def test_the_manifest_records_what_the_pooling_guard_compares(tmp_path: Path) -> None:
    """Values, not names (manifest schema 2): every host's vm_type definition and every
    workload parameter with its defaults, from the spec the run measured; a window left to
    its default is recorded as the run used it (duration / 10)."""
    fake = FakeProvider()
    s = spec()
    m = CampaignRunner(s, "q.yaml", tmp_path, provider_factory=lambda _n: fake).execute().manifest()
    assert m.schema_version == 2 and m.resolved is not None
    assert set(m.resolved.vm_types) == {h.vm_type for h in s.topology().hosts}
    assert m.resolved.vm_types["local"] is not None and m.resolved.vm_types["local"]["shaping"] == "none"
    assert m.resolved.workloads == [w.resolved() for w in s.workloads]
    (echo,) = m.resolved.workloads
    assert s.workloads[0].model_dump()["window"] is None and echo["window"] == echo["duration"] / 10
    assert m.resolved.wan is None


def test_hosts_per_campaign_are_made_once(tmp_path: Path) -> None:
    fake = FakeProvider()
    CampaignRunner(spec(3, "campaign"), "q.yaml", tmp_path, provider_factory=lambda _n: fake).execute()
    assert fake.provisioned == ["fake0"] and fake.destroyed == ["fake0"]


def test_a_refusing_preflight_stops_the_run_before_anything_exists(tmp_path: Path) -> None:
    refusal = Finding("aws us-east-1 quota", "fail",
                      "VPCs per Region (L-F678F1CE): the stack needs 1, 5 of 5 in use")
    fake = FakeProvider(refuse=[Finding("aws us-east-1 quota", "warn", "cannot read it"), refusal])
    seen: list[str] = []

    class Seen(QuietUI):
        def phase(self, text: str) -> None:
            seen.append(text)

    runner = CampaignRunner(spec(), "q.yaml", tmp_path, provider_factory=lambda _n: fake, ui=Seen())
    with pytest.raises(ProvisionError, match=r"5 of 5 in use") as e:
        runner.execute()
    assert "cannot read it" not in str(e.value)  # warnings are shown, not refused
    assert any("preflight: aws us-east-1 quota: cannot read it" in line for line in seen)
    assert fake.provisioned == [] and not runner.run.path.exists()


def test_failed_provisioning_is_recorded(tmp_path: Path) -> None:
    fake = FakeProvider(fail_provision=True)
    runner = CampaignRunner(spec(), "q.yaml", tmp_path, provider_factory=lambda _n: fake)
    with pytest.raises(ProvisionError):
        runner.execute()
    m = runner.run.manifest()
    assert m.status == "failed" and m.error is not None and "told to fail" in m.error
    assert fake.destroyed == []


def test_ctrl_c_mid_repetition_tears_down_and_says_interrupted(tmp_path: Path) -> None:
    class CtrlC(QuietUI):
        def phase(self, text: str) -> None:
            if "deploying" in text:
                raise KeyboardInterrupt

    fake = FakeProvider()
    runner = CampaignRunner(spec(), "q.yaml", tmp_path, ui=CtrlC(), provider_factory=lambda _n: fake)
    with pytest.raises(KeyboardInterrupt):
        runner.execute()
    assert fake.destroyed == ["fake0"] and fake.live == set()
    assert runner.run.manifest().status == "interrupted"


def test_budget_and_bad_specs_create_nothing(tmp_path: Path) -> None:
    fake = FakeProvider()
    two = spec()
    two_providers = two.model_copy(update={"providers": {**two.providers, "static": two.providers["netns"]}})
    with pytest.raises(Exception, match="one provider"):
        CampaignRunner(two_providers, "q.yaml", tmp_path, provider_factory=lambda _n: fake).execute()
    assert list(tmp_path.iterdir()) == [] and fake.provisioned == []


def test_outcome_keeps_the_hosts_that_succeeded_and_records_the_others() -> None:
    outcome = TrialOutcome()
    boom = RemoteFailure("h2", "python3 echo.py run", 1, "Traceback ...", "worker failed")
    ok = outcome.succeeded([HostResult("h1", 1), HostResult("h2", failure=boom), HostResult("h3", 3)])
    assert [(r.host, r.value) for r in ok] == [("h1", 1), ("h3", 3)]
    assert outcome.failures == [boom]
