"""The echo report's further views on synthetic runs with known truth: sweeps, modes, connection modes.

A run directory is written here as the runner writes it (manifest with hosts,
trials and their swept values; one echo Parquet file per trial, made by the
controller's own table builder), with RTTs drawn from distributions whose
medians, modes and handshake times are set by the test.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from cloudbench.report.confirm import confirm
from cloudbench.report.figures.echo import figures
from cloudbench.report.figures.style import Plot
from cloudbench.store.manifest import Manifest, RepetitionRecord, TrialRecord, save_manifest
from cloudbench.store.parquet import write_parquet
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import write_summaries
from cloudbench.workloads.echo.controller import EchoKind, echo_table
from cloudbench.workloads.echo.params import EchoWorkload
from cloudbench.workloads.echo.reader import ECHO_DTYPE

HOSTS = ("a-1", "a-2")  # one zone, one subnet: pairs a-1>a-2 are same_subnet, a-1>a-1 self
T0 = 1_000_000_000
Rtts = Callable[[np.random.Generator, int, dict[str, Any]], np.ndarray]


def params(**kw: Any) -> dict[str, Any]:
    return EchoWorkload.model_validate({"kind": "echo", **kw}).model_dump(mode="json")


def write_echo_run(
    tmp: Path,
    workloads: list[dict[str, Any]],
    repetitions: int,
    rounds: int,
    rtts: dict[str, Rtts],
    connect_us: dict[str, float] | None = None,
    sweeps: dict[str, list[dict[str, Any]]] | None = None,
) -> tuple[RunDir, Manifest]:
    """A run of ``workloads``; trial rows are ``rounds`` per ordered pair (self-loops included),
    RTTs in µs from ``rtts[workload](rng, n, sweep)``; handshakes of ``connect_us[workload]``."""
    run = RunDir(tmp / "run")
    run.path.mkdir(parents=True)
    rng = np.random.default_rng(7)
    labels = {"provider": "netns", "region": "r1", "zone": "r1-a", "subnet": "s1", "vm_type": "local"}
    reps = [
        RepetitionRecord.model_validate(
            {
                "index": r,
                "status": "ok",
                "hosts": [{"name": h, "labels": labels, "address": f"198.18.1.{10 + i}"} for i, h in enumerate(HOSTS)],
            }
        )
        for r in range(repetitions)
    ]
    trials: list[TrialRecord] = []
    names = dict(enumerate(HOSTS))
    for rep in range(repetitions):
        for w in workloads:
            for sweep in (sweeps or {}).get(w["name"], [{}]):
                tid = f"r{rep:03d}-t{len(trials):03d}-{w['name']}"
                parts = []
                for src in HOSTS:
                    rec = np.zeros(rounds * len(HOSTS), dtype=ECHO_DTYPE)
                    rec["round"] = np.repeat(np.arange(rounds), len(HOSTS))
                    rec["peer"] = np.tile(np.arange(len(HOSTS)), rounds)
                    rec["send_ns"] = T0 + rec["round"].astype(np.int64) * 10_000_000
                    rtt_ns = (rtts[w["name"]](rng, len(rec), sweep) * 1000).astype(np.int64)
                    rec["recv_ns"] = rec["send_ns"] + rtt_ns
                    c = (connect_us or {}).get(w["name"])
                    rec["connect_ns"] = -1 if c is None else (rng.normal(c, c / 10, len(rec)) * 1000).astype(int)
                    parts.append((src, {"t0_ns": T0}, rec))
                rel = f"{w['name']}/{tid}.parquet"
                (run.path / w["name"]).mkdir(exist_ok=True)
                table = echo_table(parts, names, rep)
                sha = write_parquet(run.path / rel, table, kind="echo")
                trials.append(
                    TrialRecord(
                        id=tid,
                        repetition=rep,
                        workload=w["name"],
                        kind="echo",
                        status="ok",
                        rows=table.num_rows,
                        files={rel: sha},
                        sweep=sweep,
                    )
                )
    manifest = Manifest(
        campaign="c",
        run_id="run",
        status="complete",
        spec={"name": "c", "workloads": workloads},
        seed=1,
        repetitions=reps,
        trials=trials,
    )
    save_manifest(run.manifest_path, manifest)
    return run, manifest


def payload_rtts(rng: np.random.Generator, n: int, sweep: dict[str, Any]) -> np.ndarray:
    # the truth: the median RTT is 100 µs + 1 µs per 64 bytes
    return 100.0 + sweep["payload"] / 64.0 + rng.exponential(5.0, n)


def blog_rtts(rng: np.random.Generator, n: int, sweep: dict[str, Any]) -> np.ndarray:
    k = rng.multinomial(n, (0.85, 0.07, 0.08))
    return rng.permutation(
        np.concatenate(
            [
                rng.lognormal(np.log(450.0), 0.15, k[0]),
                rng.normal(10_000.0, 600.0, k[1]),
                rng.normal(20_000.0, 900.0, k[2]),
            ]
        )
    )


def lognormal_rtts(median: float) -> Rtts:
    return lambda rng, n, sweep: rng.lognormal(np.log(median), 0.2, n)


def rendered(kind: EchoKind, name: str, section: dict[str, Any]) -> str:
    buf = io.StringIO()
    kind.render_section(name, section, Console(file=buf, width=250, color_system=None), {})
    return buf.getvalue()


PAYLOADS = [64, 1024, 16384, 65536]


def test_a_payload_sweep_gives_summaries_per_value_a_table_with_cis_and_a_figure(tmp_path: Path) -> None:
    w = params(name="sweep", payload=PAYLOADS)
    run, manifest = write_echo_run(
        tmp_path,
        [w],
        repetitions=6,
        rounds=200,
        rtts={"sweep": payload_rtts},
        sweeps={"sweep": [{"payload": p} for p in PAYLOADS]},
    )
    kind = EchoKind()
    rows = kind.summarize(run, manifest, w)
    p50 = {r.group: r.value for r in rows if r.metric == "rtt_p50_us" and r.repetition == 0}
    assert set(p50) == {f"{g}@payload={p}" for g in ("self", "same_subnet") for p in PAYLOADS}
    for p in PAYLOADS:  # each value's own rows: its median is the truth's
        assert p50[f"same_subnet@payload={p}"] == pytest.approx(100 + p / 64 + 5 * np.log(2), rel=0.05)

    # confirm reads one series per value: each gets its own CI over the 6 repetitions
    write_summaries(run, rows)
    result = confirm(run.path, metrics=["rtt_p50_us"])
    by_group = {r.series.key.group: r for r in result.series}
    assert set(by_group) == set(p50) and {r.series.n for r in result.series} == {6}
    assert all(r.ci.exists for r in result.series)
    cis = [by_group[f"same_subnet@payload={p}"].ci for p in PAYLOADS]
    assert all(
        a.upper is not None and b.lower is not None and a.upper < b.lower for a, b in itertools.pairwise(cis)
    )  # the per-value CIs separate the payloads

    section = kind.report_section(run, manifest, w)
    table = [r for r in section["sweep"] if r["group"] == "same_subnet"]
    assert [r["payload"] for r in table] == PAYLOADS and all(r["repetitions"] == 6 for r in table)
    for r in table:
        truth = 100 + r["payload"] / 64 + 5 * np.log(2)
        assert r["rep_p50_lower"] <= r["rep_p50_median"] <= r["rep_p50_upper"]  # 6 repetitions: a 95 % CI
        assert r["rep_p50_lower"] <= truth * 1.02 and r["rep_p50_upper"] >= truth * 0.98
    assert [r["p50"] for r in table] == sorted(r["p50"] for r in table)  # latency grows with payload
    text = rendered(kind, "sweep", section)
    assert "sweep: RTT per payload" in text and "65536" in text

    # the figure is the page's (report/figures/), drawn from the table: nothing beside report.json
    assert kind.write_figures(run, "sweep", section, tmp_path) == []
    sweep = figures("sweep", section)[0]
    assert isinstance(sweep, Plot) and sweep.name == "sweep-sweep-payload"
    (line,) = [c.lines[0] for c in sweep.figure.axes[0].containers if c.get_label() == "same_subnet"]
    assert list(line.get_ydata()) == [r["rep_p50_median"] for r in table]


def test_a_workload_without_a_sweep_keeps_its_group_names_and_draws_nothing(tmp_path: Path) -> None:
    w = params(name="echo")
    run, manifest = write_echo_run(tmp_path, [w], repetitions=1, rounds=100, rtts={"echo": lognormal_rtts(80)})
    kind = EchoKind()
    assert {r.group for r in kind.summarize(run, manifest, w)} == {"self", "same_subnet"}
    section = kind.report_section(run, manifest, w)
    assert section["sweep"] == [] and section["connect"] == [] and section["connection_modes"] == []
    assert kind.write_figures(run, "echo", section, tmp_path) == []


def test_a_multimodal_distribution_is_reported_with_its_modes_and_a_warning(tmp_path: Path) -> None:
    w = params(name="blog")
    run, manifest = write_echo_run(tmp_path, [w], repetitions=1, rounds=20_000, rtts={"blog": blog_rtts})
    kind = EchoKind()
    section = kind.report_section(run, manifest, w)
    modes = [r for r in section["modes"] if r["distribution"] == "same_subnet"]
    assert [r["multimodal"] for r in modes] == [True] * 3
    assert [round(r["location"], -3) for r in modes[1:]] == [10_000, 20_000]
    assert [r["share"] for r in modes] == pytest.approx([0.85, 0.07, 0.08], abs=0.01)
    assert modes[0]["unstable"] == "p90 p95"
    text = rendered(kind, "blog", section)
    assert "blog: same_subnet RTT has 3 modes" in text
    assert "Percentiles between modes are unstable (p90 p95)" in text
    assert "(85.0%)" in text or "(85.1%)" in text or "(84.9%)" in text


def test_a_unimodal_distribution_gets_no_warning(tmp_path: Path) -> None:
    w = params(name="echo")
    run, manifest = write_echo_run(tmp_path, [w], repetitions=1, rounds=20_000, rtts={"echo": lognormal_rtts(450)})
    kind = EchoKind()
    section = kind.report_section(run, manifest, w)
    assert all(not r["multimodal"] for r in section["modes"]) and len(section["modes"]) == 2
    assert "modes" not in rendered(kind, "echo", section).split("RTT by latency group")[1].split("\n\n")[0]
    assert "unstable" not in rendered(kind, "echo", section)


def test_connection_modes_are_compared_side_by_side_in_the_first_workloads_section(tmp_path: Path) -> None:
    hot = params(name="hot", rate=100)
    warm = params(name="warm", idle="10s")
    cold = params(name="cold", connection="per_round", rate=5, timeout="100ms")
    run, manifest = write_echo_run(
        tmp_path,
        [hot, warm, cold],
        repetitions=1,
        rounds=300,
        rtts={"hot": lognormal_rtts(80), "warm": lognormal_rtts(150), "cold": lognormal_rtts(200)},
        connect_us={"cold": 120.0},
    )
    kind = EchoKind()
    first = kind.report_section(run, manifest, hot)
    rows = [r for r in first["connection_modes"] if r["group"] == "same_subnet"]
    assert [(r["workload"], r["mode"]) for r in rows] == [
        ("hot", "persistent, every 10ms"),
        ("warm", "persistent, idle 10s"),
        ("cold", "per_round, every 200ms"),
    ]
    assert [r["p50"] for r in rows] == pytest.approx([80, 150, 200], rel=0.05)
    assert rows[0]["connect_p50"] is None and rows[2]["connect_p50"] == pytest.approx(120, rel=0.05)
    assert kind.report_section(run, manifest, warm)["connection_modes"] == []  # printed once
    cold_section = kind.report_section(run, manifest, cold)
    assert [r["p50"] for r in cold_section["connect"]] == pytest.approx([120, 120], rel=0.05)
    text = rendered(kind, "hot", first)
    assert "echo connection modes side by side, same_subnet" in text and "per_round, every 200ms" in text
    assert "connect p50" in text
    # hot and warm have no handshake per round: their "-" is said in the title, apart from "—"
    assert "connect = TCP handshake (-: none, the connection persists)" in " ".join(text.split())
    # 2 × 300 RTTs per group and mode: p99.9 needs 1,000 (analysis.latency.TAIL_K)
    assert "p99.9 needs 1,000" in " ".join(text.split()) and "—" in text
    assert "TCP handshake of the per-round" in " ".join(rendered(kind, "cold", cold_section).split())


def test_swept_values_are_never_pooled_into_one_distribution(tmp_path: Path) -> None:
    """Payload-sweep's main group table held one distribution of 64 B to
    64 KiB. Now the groups, pairs, box and tail rows are per swept value, each with the
    truth's median, and the text table and the figures show each value apart."""
    w = params(name="sweep", payload=PAYLOADS)
    run, manifest = write_echo_run(tmp_path, [w], repetitions=2, rounds=200,
                                   rtts={"sweep": payload_rtts},
                                   sweeps={"sweep": [{"payload": p} for p in PAYLOADS]})
    kind = EchoKind()
    section = kind.report_section(run, manifest, w)
    groups = [r for r in section["groups"] if r["group"] == "same_subnet"]
    assert [r["sweep"] for r in groups] == [f"payload={p}" for p in PAYLOADS]
    for r, p in zip(groups, PAYLOADS, strict=True):
        # 2 repetitions × 2 ordered pairs × 200 rounds of this value alone (pooled: 4 × more)
        assert r["count"] == 2 * 2 * 200 and r["p50"] == pytest.approx(100 + p / 64 + 5 * np.log(2), rel=0.05)
    for key in ("pairs", "boxes", "quorums", "tails"):
        assert all("sweep" in r for r in section[key]), key
    assert {r["sweep"] for r in section["boxes"]} == {f"payload={p}" for p in PAYLOADS}
    text = rendered(kind, "sweep", section)
    group_table = text[text.index("RTT by latency group"):]
    assert all(f"payload={p}" in group_table for p in PAYLOADS)
    plots = figures("sweep", section)
    titles = [p.title for p in plots]
    print(titles)
    for p in PAYLOADS:  # a box plot and a tail per value; one time figure
        assert f"sweep (payload={p}): RTT per latency group" in titles
        assert f"sweep (payload={p}): RTT tail (CCDF)" in titles
    assert sum("windowed" in t or "time" in t for t in titles) <= 1


def test_no_quantile_beyond_what_the_sample_can_estimate(tmp_path: Path) -> None:
    """The warm workload's groups hold 80 RTTs, yet the report printed
    p99.99 and p99.999 and drew the CCDF's axis to 1e-5. Now those cells print "—" with
    the n each needs, the values are NaN (so no summary carries them) and the tail figure
    stops at 1/n."""
    w = params(name="warm")
    run, manifest = write_echo_run(tmp_path, [w], repetitions=1, rounds=40, rtts={"warm": lognormal_rtts(300)})
    kind = EchoKind()
    section = kind.report_section(run, manifest, w)
    g = next(r for r in section["groups"] if r["group"] == "same_subnet")
    assert g["count"] == 80 and np.isfinite(g["p90"]) and np.isfinite(g["p95"])
    for key in ("p99", "p99.9", "p99.99", "p99.999"):
        assert np.isnan(g[key]), key
    text = rendered(kind, "warm", section)
    assert "—" in text and "p99.999 needs 100,000" in text and "p99 needs 100" in text
    assert not any(r.metric == "rtt_p99_us" for r in kind.summarize(run, manifest, w))
    tail = next(p for p in figures("warm", section) if "CCDF" in p.title)
    ax = tail.figure.axes[0]
    assert ax.get_ylim()[0] == pytest.approx(1 / 80 / 2)
    marks = {t.get_text() for t in ax.texts}
    assert "p99" not in marks and "p99.999" not in marks  # 1/80 is above the 1e-2 level


@pytest.mark.parametrize(("medians", "said"), [((70.0, 150.0, 35.0), True), ((900.0, 1500.0, 350.0), False)])
def test_connection_modes_at_tens_of_microseconds_say_the_rtt_is_the_wake_up(
        tmp_path: Path, medians: tuple[float, float, float], said: bool) -> None:
    """A new connection's echo faster than a persistent one's (35 against 70 µs, as a user saw on
    the testbed) gets the reason once, after the tables; at hundreds of µs the note is not printed."""
    hot, warm = params(name="hot", rate=100), params(name="warm", idle="10s")
    cold = params(name="cold", connection="per_round", rate=5, timeout="100ms")
    run, manifest = write_echo_run(
        tmp_path, [hot, warm, cold], repetitions=1, rounds=300,
        rtts={name: lognormal_rtts(m) for name, m in zip(("hot", "warm", "cold"), medians, strict=True)},
        connect_us={"cold": 120.0})
    text = " ".join(rendered(EchoKind(), "hot", EchoKind().report_section(run, manifest, hot)).split())
    assert ("wake-up" in text and "can be faster than a persistent connection's" in text) is said
    assert text.count("receiving process's wake-up") == int(said)
