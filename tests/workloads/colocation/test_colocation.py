"""The colocation workload without a testbed: its spec checks, probe rings, nominal rates, rates
of a probe, and the report of a recorded testbed run (tests/data/colocation: 8 hosts, a1-a3 on
one 100 Mbit/s NIC and b1-b2 on another, 80 Mbit/s caps, default threshold)."""

from __future__ import annotations

import asyncio
import io
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from rich.console import Console

from cloudbench.core.cluster import Cluster, HostAccess
from cloudbench.errors import SpecError
from cloudbench.report.figures import Plot, section_figures
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.store.rundir import RunDir
from cloudbench.testing.remote import FakeRemote
from cloudbench.workloads import parse_spec, workload_kind
from cloudbench.workloads.base import Trial, TrialContext, TrialOutcome
from cloudbench.workloads.colocation.controller import ring
from cloudbench.workloads.colocation.data import nominal_rate, probe_rates, with_probe_columns
from cloudbench.workloads.throughput.controller import THROUGHPUT_SCHEMA

from ...paths import DATA, EXPERIMENTS

RECORDED = DATA / "colocation" / "20261124T150209Z-4a49"
TCP = goodput_fraction("tcp")


def test_ring_gives_every_sender_a_distinct_peer() -> None:
    hosts = ["a", "b", "c", "d"]
    assert ring(["a", "b", "c"], hosts) == [("a", "b"), ("b", "c"), ("c", "a")]
    assert ring(["c"], hosts) == [("c", "a")]
    flows = ring(hosts, hosts)
    assert sorted(d for _, d in flows) == hosts and all(s != d for s, d in flows)


def test_expand_is_one_trial_on_every_host() -> None:
    spec = parse_spec((EXPERIMENTS / "colocation.yaml").read_text())
    w = spec.workloads[0]
    ((hosts, pairs),) = workload_kind("colocation").expand(w, spec)
    assert hosts == ("a1", "a2", "a3", "b1", "b2", "c1", "c2", "c3") and len(pairs) == 8
    assert workload_kind("colocation").estimate_seconds(w) > w.duration + 29 * w.probe


def test_a_single_host_is_refused_where_it_is_written() -> None:
    text = (EXPERIMENTS / "colocation.yaml").read_text().replace(
        "  - kind: colocation\n", "  - kind: colocation\n    hosts: [a1]\n")
    with pytest.raises(SpecError) as info:
        parse_spec(text, "c.yaml")
    assert info.value.field == "workloads[0].hosts" and "at least two hosts" in info.value.message
    assert info.value.line == next(i for i, x in enumerate(text.splitlines(), 1) if "[a1]" in x)


def test_nominal_rate_sources() -> None:
    cap = {"profile": {"shaping": "cap", "rate": 80e6}}
    tb = {"profile": {"shaping": "token_bucket", "high_rate": 200e6, "low_rate": 50e6,
                      "budget": 2**20}}
    assert nominal_rate("c80", "netns", cap, {}) == pytest.approx(80e6 * TCP)
    assert nominal_rate("tb", "netns", tb, {}) == pytest.approx(200e6 * TCP)
    assert nominal_rate("c80", "netns", cap, {"c80": 1e9}) == pytest.approx(1e9 * TCP)
    assert nominal_rate("local", "netns", {"profile": {"shaping": "none"}}, {}) is None
    assert nominal_rate("m5.large", "aws", None, {}) is None  # the catalogue has no rates yet


def _intervals(src: str, dst: str, rates: list[float], derived_tail: float) -> dict[str, list]:
    rows: dict[str, list] = {f.name: [] for f in THROUGHPUT_SCHEMA}
    t = 0
    for i, r in enumerate([*rates, derived_tail]):
        step = 500_000
        for k, v in (("repetition", 0), ("trial", "t"), ("src", src), ("dst", dst),
                     ("direction", "forward"), ("tool", "nuttcp"), ("protocol", "tcp"),
                     ("side", "receiver"), ("burst", 0), ("t_start_us", t),
                     ("t_end_us", t + step), ("bytes", int(r * 0.5 / 8)), ("rate_bps", r),
                     ("retrans", 0), ("lost", None), ("packets", None), ("loss_pct", None),
                     ("derived", i == len(rates))):
            rows[k].append(v)
        t += step
    return rows


def test_probe_rate_is_the_mean_after_the_first_interval() -> None:
    a = _intervals("a", "b", [10e6, 40e6, 60e6, 50e6], derived_tail=1e6)
    b = _intervals("b", "a", [90e6, 30e6, 30e6, 30e6], derived_tail=500e6)
    cols = {k: a[k] + b[k] for k in a}
    arrays = []
    for f in THROUGHPUT_SCHEMA:
        arr = pa.array(cols[f.name], f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
        arrays.append(arr.dictionary_encode().cast(f.type) if pa.types.is_dictionary(f.type) else arr)
    table = with_probe_columns(pa.Table.from_arrays(arrays, schema=THROUGHPUT_SCHEMA), 3, "split", 2)
    assert table.column("probe").to_pylist() == [3] * table.num_rows
    assert table.column("phase").to_pylist() == ["split"] * table.num_rows
    rates = probe_rates(table)
    assert rates["a"] == pytest.approx(50e6) and rates["b"] == pytest.approx(30e6)


@pytest.fixture
def recorded(tmp_path: Path) -> RunDir:
    dest = tmp_path / "colocation" / RECORDED.name
    shutil.copytree(RECORDED, dest)
    return RunDir(dest)


def test_report_of_a_recorded_run(recorded: RunDir) -> None:
    manifest = recorded.manifest()
    (w,) = manifest.workloads()
    kind = workload_kind("colocation")
    sec = kind.report_section(recorded, manifest, w)
    (audit,) = sec["audits"]
    assert audit["matches_truth"] is True and audit["probes"] == 12
    assert sorted(map(tuple, audit["groups"])) == [("a1", "a2", "a3"), ("b1", "b2")]
    hosts = {r["host"]: r for r in sec["hosts"]}
    assert {h for h, r in hosts.items() if r["group"] != "-"} == {"a1", "a2", "a3", "b1", "b2"}
    assert hosts["c1"]["nominal_mbps"] == pytest.approx(80 * TCP)
    # ingress of each host is the egress of the host that sent to it in the full-load ring
    assert hosts["a2"]["ingress_mbps"] == pytest.approx(hosts["a1"]["egress_mbps"])
    assert all(0 <= g["confidence"] <= 1 for g in sec["groups"])
    loss = {x["size"]: x["loss"] for x in sec["loss"]}
    assert loss[3] > loss[2] > 0.2 > loss[1]
    out = io.StringIO()
    kind.render_section("colocation", sec, Console(file=out, width=100), {})
    text = out.getvalue()
    assert "a1 a2 a3" in text and "testbed truth matched" in text and "█" in text
    # the figure is the page's (report/figures/colocation-egress.*), in the house style
    assert kind.write_figures(recorded, "colocation", sec, recorded.path / "report") == []
    (fig,) = section_figures("colocation", sec)
    assert isinstance(fig, Plot) and fig.name == "colocation-egress"
    (ax,) = [a for a in fig.figure.axes if a.get_visible()]
    assert ax.get_ylim()[1] > max(r["egress_mbps"] for r in sec["hosts"])  # the bars clear of the border
    assert "a1 (G" in fig.alt and "c1 (-" in fig.alt
    rows = {(r.metric, r.group): r.value for r in kind.summarize(recorded, manifest, w)}
    assert rows[("colocated_hosts", "all")] == 5
    assert math.isclose(rows[("egress_mbps", "c1")], hosts["c1"]["egress_mbps"])


def test_the_cloud_firewalls_open_the_colocation_tool_ports() -> None:
    """The colocation tool's ports from the spec: the audit's servers listen on `port`..`port + streams` (nuttcp)."""
    from cloudbench.workloads.colocation.params import ColocationWorkload

    (nuttcp,) = ColocationWorkload(kind="colocation", port=6100, streams=3).listen_ports()
    assert (nuttcp.first, nuttcp.last, nuttcp.protocols) == (6100, 6103, ("tcp",))
    (iperf,) = ColocationWorkload(kind="colocation", tool="iperf3", port=6200).listen_ports()
    assert (iperf.first, iperf.last) == (6200, 6200)


def _trial_on_fakes(tmp_path: Path, fake_rules: list[tuple[str, str, int, str]]) -> tuple[TrialOutcome, FakeRemote]:
    """Run the audit's trial on the recorded spec's hosts with a scripted remote."""
    spec = parse_spec((EXPERIMENTS / "colocation.yaml").read_text())
    w = spec.workloads[0]
    kind = workload_kind("colocation")
    ((hosts, pairs),) = kind.expand(w, spec)
    topo = spec.topology()
    cluster = Cluster("netns", "t", topo, [HostAccess(h, f"198.18.0.{i + 1}", "127.0.0.1")
                                           for i, h in enumerate(topo.hosts)], tmp_path / "k")
    fake = FakeRemote(cluster)
    for command, host, code, out in fake_rules:
        fake.on(command, stdout=out, exit_code=code, host=host)
    trial = Trial("r000-t000-colocation", 0, 0, w.name, "colocation", hosts, pairs)
    ctx = TrialContext(trial, w, spec, cluster, fake, RunDir(tmp_path), "token")
    return asyncio.run(kind.run(ctx)), fake


def test_a_server_that_does_not_start_is_a_failure_and_the_others_are_stopped(tmp_path: Path) -> None:
    outcome, fake = _trial_on_fakes(tmp_path, [
        (r"throughput\.py serve", "b2", 1, ""),
        (r"throughput\.py serve", "*", 0, '{"pid": 4242}'),
        (r"throughput\.py stop 4242", "*", 0, "{}"),
    ])
    assert [f.host for f in outcome.failures] == ["b2"]
    stopped = sorted(c.host for c in fake.calls if c.op == "run" and "throughput.py stop" in c.target)
    assert stopped == ["a1", "a2", "a3", "b1", "c1", "c2", "c3"]
    assert not [c for c in fake.commands() if "throughput.py client" in c]  # no probe on a partial ring
    assert outcome.stats["probes"] == 0 and outcome.files == {}


def test_a_probe_whose_senders_fail_stops_the_audit_and_every_server(tmp_path: Path) -> None:
    outcome, fake = _trial_on_fakes(tmp_path, [
        (r"throughput\.py serve", "*", 0, '{"pid": 7}'),
        (r"throughput\.py client", "*", 1, ""),
        (r"throughput\.py stop 7", "*", 0, "{}"),
    ])
    hosts = ["a1", "a2", "a3", "b1", "b2", "c1", "c2", "c3"]
    assert sorted(f.host for f in outcome.failures) == hosts  # one per sender of the full probe
    assert outcome.stats["stopped"] == "probe 1: a sender failed" and outcome.stats["probes"] == 0
    assert sorted(c.host for c in fake.calls if c.op == "run" and "throughput.py stop" in c.target) == hosts
