"""Cost estimates: VM-hours, egress per region pair, price tables, the budget check, the CLI."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cloudbench import cost
from cloudbench.cli import app
from cloudbench.errors import SpecError
from cloudbench.plan import make_plan
from cloudbench.providers import Provider
from cloudbench.workloads import load_spec, parse_spec
from tests.paths import EXPERIMENTS

RATE, PAYLOAD, DURATION, WARMUP = 10, 1000, 5, 1


def spec_text(extra: str = "", vm_type: str = "m5.large", reps: int = 2) -> str:
    return textwrap.dedent(f"""\
        name: costly
        repetitions: {reps}
        rest: 10s
        providers:
          aws:
            controller_cidr: 203.0.113.7/32
            regions:
              us-east-1:
                zones:
                  us-east-1a:
                    subnets:
                      a: {{hosts: 2, vm_type: {vm_type}}}
              eu-west-1:
                zones:
                  eu-west-1a:
                    subnets:
                      b: {{hosts: 1, vm_type: {vm_type}}}
        workloads:
          - kind: echo
            rate: {RATE}
            payload: {PAYLOAD}
            duration: {DURATION}s
            warmup: {WARMUP}s
        """) + extra


def test_echo_egress_per_region_pair() -> None:
    spec = parse_spec(spec_text(), "c.yaml")
    est = cost.estimate_cost(spec)
    each_way = RATE * PAYLOAD * (DURATION + WARMUP)  # per ordered pair and direction
    lines = {(e.region_a, e.region_b): e for e in est.egress}
    # a-1 <-> a-2: 2 ordered pairs, each with a request and an echo, per repetition.
    same = lines[("us-east-1", "us-east-1")]
    assert same.bytes == pytest.approx(2 * 2 * each_way * 2)
    assert same.classes == {"same_zone"} and same.usd == 0.0
    # 4 ordered pairs between the regions (a-1, a-2 with b-1, both ways).
    far = lines[("eu-west-1", "us-east-1")]
    assert far.bytes == pytest.approx(4 * 2 * each_way * 2)
    assert far.classes == {"cross_region"}  # North America to Europe
    assert far.usd == pytest.approx(far.bytes / 1e9 * 0.02)
    # The rule of thumb: rate x payload x 2 x pairs x duration, summed over trials.
    pairs = 6
    assert est.egress_bytes == pytest.approx(RATE * PAYLOAD * 2 * pairs * (DURATION + WARMUP) * 2)


def test_vm_hours_follow_the_plan() -> None:
    spec = parse_spec(spec_text(reps=3), "c.yaml")
    plan = make_plan(spec)
    est = cost.estimate_cost(spec, plan)
    per_rep = [sum(t.est_seconds for t in plan.of_repetition(r)) for r in range(3)]
    expected_h = 3 * sum(s + cost.PROVISION_OVERHEAD_S for s in per_rep) / 3600  # 3 hosts
    assert est.stacks == 3
    assert est.vm_hours == pytest.approx(expected_h)
    vm_usd = est.vms[0].usd
    assert vm_usd is not None and vm_usd == pytest.approx(expected_h * 0.096)
    assert est.public_ip_usd == pytest.approx(expected_h * 0.005)
    assert est.total_usd == pytest.approx(vm_usd + est.public_ip_usd + sum(e.usd for e in est.egress))
    once = parse_spec(spec_text(reps=3).replace("rest: 10s", "rest: 10s\nfresh_hosts: campaign"), "c.yaml")
    assert cost.estimate_cost(once).stacks == 1
    assert cost.estimate_cost(once).vm_hours < est.vm_hours  # one provisioning instead of three


def test_workload_kind_can_estimate_its_own_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    import cloudbench.workloads as workloads

    spec = parse_spec(spec_text(reps=1), "c.yaml")
    real = workloads.workload_kind("echo")
    seen: list[Any] = []

    class Kind:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def estimate_bytes(self, params: Any, trial: Any) -> dict[tuple[str, str], float]:
            seen.append(trial.id)
            return {("a-1", "b-1"): 7e9}

    monkeypatch.setattr(cost, "workload_kind", lambda k: Kind())
    est = cost.estimate_cost(spec)
    assert seen and est.egress_bytes == 7e9
    assert [(e.region_a, e.region_b) for e in est.egress] == [("eu-west-1", "us-east-1")]

    class Total(Kind):
        def estimate_bytes(self, params: Any, trial: Any) -> float:  # type: ignore[override]
            return 6e9  # spread over the 6 ordered pairs

    monkeypatch.setattr(cost, "workload_kind", lambda k: Total())
    assert cost.estimate_cost(spec).egress_bytes == pytest.approx(6e9)


def test_bundled_prices_are_dated_and_sourced() -> None:
    p = cost.load_prices()
    assert p.date[:4].isdigit() and p.currency == "USD"
    assert "prices" in p.source and "override" in p.source
    assert p.vm("aws", "m5.large") and p.vm("gcp", "e2-standard-2") and p.vm("azure", "Standard_D2s_v3")
    assert set(p.egress_per_gb) == {"aws", "gcp", "azure"}


def test_prices_override_from_spec_and_file(tmp_path: Path) -> None:
    extra = "prices:\n  vm_hourly: {aws: {m5.large: 1.0}}\n  egress_per_gb: {aws: {cross_region: 1.0}}\n"
    spec = parse_spec(spec_text(extra), str(tmp_path / "c.yaml"))
    est = cost.estimate_cost(spec, prices=cost.spec_prices(spec, tmp_path / "c.yaml"))
    assert est.vms[0].usd_per_hour == 1.0
    far = next(e for e in est.egress if e.region_a != e.region_b)
    assert far.usd == pytest.approx(far.bytes / 1e9)
    assert est.prices.vm("aws", "c5.large") == 0.085  # the rest of the bundled table stays

    table = tmp_path / "p.json"
    table.write_text(json.dumps({"date": "2031-02-03", "vm_hourly": {"aws": {"m5.large": 2.0}}}))
    spec = parse_spec(spec_text("prices: p.json\n"), str(tmp_path / "c.yaml"))
    assert cost.spec_prices(spec, tmp_path / "c.yaml").vm("aws", "m5.large") == 2.0
    assert cost.spec_prices(spec, tmp_path / "c.yaml", override=None).date == "2031-02-03"
    other = tmp_path / "q.json"
    other.write_text(json.dumps({"vm_hourly": {"aws": {"m5.large": 3.0}}}))
    assert cost.spec_prices(spec, tmp_path / "c.yaml", override=other).vm("aws", "m5.large") == 3.0


def test_bad_prices_are_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_text("prices: missing.json\n"), str(tmp_path / "c.yaml"))
    assert info.value.field == "prices" and "does not exist" in info.value.message
    assert info.value.line == len(spec_text().splitlines()) + 1
    with pytest.raises(SpecError, match="must be a number"):
        parse_spec(spec_text("prices: {vm_hourly: {aws: {m5.large: cheap}}}\n"), "c.yaml")


def test_budget_stops_the_campaign_before_anything_exists(tmp_path: Path) -> None:
    from cloudbench.runner import CampaignRunner

    spec_file = tmp_path / "c.yaml"
    spec_file.write_text(spec_text("budget: 0.01\n"))
    spec = parse_spec(spec_file.read_text(), str(spec_file))
    made: list[str] = []

    def factory(name: str) -> Provider:
        made.append(name)
        raise AssertionError("no provider may be made above the budget")

    runner = CampaignRunner(spec, str(spec_file), tmp_path / "results", provider_factory=factory)
    with pytest.raises(cost.BudgetError, match=r"above its budget of 0\.01"):
        runner.execute()
    assert made == [] and not (tmp_path / "results").exists()

    assert cost.check_budget(parse_spec(spec_text("budget: 100\n"), "c.yaml")) is not None
    assert cost.check_budget(parse_spec(spec_text(), "c.yaml")) is None  # no budget, no check
    unknown = parse_spec(spec_text("budget: 100\n", vm_type="m9.giant"), "c.yaml")
    with pytest.raises(cost.BudgetError, match=r"no price for: aws vm_type m9\.giant"):
        cost.check_budget(unknown)


def test_cli_plan_shows_cost_and_gc_lists_expired_stacks(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.yaml"
    spec_file.write_text(spec_text("budget: 10\n"))
    runner = CliRunner()
    res = runner.invoke(app, ["plan", str(spec_file)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "VM-hours" in res.output and "estimated total" in res.output
    assert "us-east-1" in res.output and "eu-west-1" in res.output and "within" in res.output
    res = runner.invoke(app, ["plan", str(spec_file), "--json"])
    doc = json.loads(res.output)
    assert doc["cost"]["vm_hours"] > 0 and doc["cost"]["egress"]
    table = tmp_path / "p.json"
    table.write_text(json.dumps({"vm_hourly": {"aws": {"m5.large": 100.0}}}))
    res = runner.invoke(app, ["plan", str(spec_file), "--prices", str(table)], terminal_width=200)
    assert "above" in res.output

    lease = tmp_path / "results" / "costly" / ".pulumi" / "cloudbench-leases" / "cloudbench-aws.s-r01.json"
    lease.parent.mkdir(parents=True)
    lease.write_text(json.dumps({"cloud": "aws", "project": "cloudbench-aws", "stack": "s-r01",
                                 "campaign": "costly", "expiry": time.time() - 5, "expiry_utc": "then",
                                 "controller": {"pid": 1, "cmdline": "x", "host": "elsewhere"}}))
    res = runner.invoke(app, ["gc", "--dry-run", "--results", str(tmp_path / "results")], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "would destroy aws stack s-r01 of campaign costly (expired then)" in res.output
    assert lease.exists()


def test_warnings_are_printed_by_validate(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.yaml"
    spec_file.write_text(spec_text(vm_type="m5.larg"))
    res = CliRunner().invoke(app, ["validate", str(spec_file)], terminal_width=200)
    assert res.exit_code == 0
    assert "warning" in res.output and "closest: m5.large" in res.output


def test_a_lease_shorter_than_the_campaign_is_a_spec_error(tmp_path: Path) -> None:
    """`gc` from cron trusts the lease: expiry must outlive a stack's estimated life plus a margin."""
    from cloudbench.cost import check_leases, lease_needed
    from cloudbench.errors import SpecError
    from tests.providers.clouds.test_clouds import stormcloud_yaml

    long = "  - kind: echo\n    duration: 3h\n"
    path = tmp_path / "s.yaml"
    path.write_text(stormcloud_yaml("aws", "expiry: 2h", workloads=long))
    spec = load_spec(path)
    with pytest.raises(SpecError, match=r"expiry 2\.0 h is shorter .*at least") as ei:
        check_leases(spec, path)
    assert ei.value.line == 5 and ei.value.field.endswith("expiry")
    path.write_text(stormcloud_yaml("aws", "expiry: 5h", workloads=long))
    check_leases(load_spec(path), path)  # 3 h + provisioning + margin fits in 5 h
    path.write_text(stormcloud_yaml("aws", workloads="  - kind: echo\n    duration: 8h\n"))
    with pytest.raises(SpecError, match=r"6\.0 h is shorter"):  # the default expiry is checked too
        check_leases(load_spec(path), path)
    assert lease_needed(3600.0) == 3600.0 + 1800.0 and lease_needed(10 * 3600.0) == 15 * 3600.0
    for example in EXPERIMENTS.glob("stormcloud-*.yaml"):
        check_leases(load_spec(example), example)


def _two_region_spec(cloud: str, ra: str, za: str, rb: str, zb: str, vm: str) -> Any:
    return parse_spec(textwrap.dedent(f"""\
        name: x
        providers:
          {cloud}:
            controller_cidr: 203.0.113.7/32
            regions:
              {ra}: {{zones: {{{za}: {{subnets: {{s: {{hosts: [a-1], vm_type: {vm}}}}}}}}}}}
              {rb}: {{zones: {{{zb}: {{subnets: {{t: {{hosts: [b-1], vm_type: {vm}}}}}}}}}}}
        workloads:
          - {{kind: echo, duration: 10s}}
        """), "x.yaml")


@pytest.mark.parametrize(("cloud", "ra", "za", "rb", "zb", "vm", "a_to_b", "b_to_a"), [
    # Azure's global VNet peering bills the bytes when they leave AND when they arrive.
    ("azure", "eastus", "eastus-1", "westus2", "westus2-1", "Standard_D2s_v3", 0.07, 0.07),
    # AWS prices inter-region transfer by the source region, with cheaper pairs.
    ("aws", "us-east-1", "us-east-1a", "us-east-2", "us-east-2a", "m5.large", 0.01, 0.01),
    ("aws", "sa-east-1", "sa-east-1a", "us-east-1", "us-east-1a", "m5.large", 0.138, 0.02),
])
def test_egress_is_priced_by_source_region_and_on_both_sides_of_azure_peering(
        monkeypatch: pytest.MonkeyPatch, cloud: str, ra: str, za: str, rb: str, zb: str, vm: str,
        a_to_b: float, b_to_a: float) -> None:
    import cloudbench.workloads as workloads

    spec = _two_region_spec(cloud, ra, za, rb, zb, vm)
    real = workloads.workload_kind("echo")

    def kind_sending(flows: dict[tuple[str, str], float]) -> Any:
        class Kind:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def estimate_bytes(self, params: Any, trial: Any) -> dict[tuple[str, str], float]:
                return flows

        return Kind()

    for flows, per_gb in ((({("a-1", "b-1"): 1e9}), a_to_b), (({("b-1", "a-1"): 1e9}), b_to_a)):
        monkeypatch.setattr(cost, "workload_kind", lambda k, f=flows: kind_sending(f))
        est = cost.estimate_cost(spec)
        assert sum(e.usd for e in est.egress) == pytest.approx(per_gb), (flows, per_gb)
    p = cost.load_prices()
    assert p.sources[cloud].startswith("https://") and "2025" in p.sources[cloud]
