from __future__ import annotations

import numpy as np
import pytest
from rich.console import Console

from cloudbench.analysis.latency import (
    PERCENTILES,
    distribution_row,
    min_n_for_quantile,
    needs_note,
    quantile_estimable,
    quantiles_sorted,
)
from cloudbench.core.topology import GROUP_ORDER, HostSpec, PairGroup, classify_pair
from cloudbench.report.render import render_report as render
from cloudbench.store.manifest import Manifest
from cloudbench.workloads.echo.report import echo_worker_health

# The row-level implementation the engine is compared with (tests/workloads/echo/test_engine.py):
# these tests pin its semantics against brute force.
from tests.workloads.echo.numpy_reference import EchoData, group_table, pair_table, quorum_latencies, windowed_means


def h(name: str, region: str = "r1", zone: str = "r1-a", subnet: str = "s1", provider: str = "p") -> HostSpec:
    return HostSpec(name, provider, region, zone, subnet, "local")


def test_classification() -> None:
    a = h("a")
    assert classify_pair(a, a) is PairGroup.SELF
    assert classify_pair(a, h("b")) is PairGroup.SAME_SUBNET
    assert classify_pair(a, h("b", subnet="s2")) is PairGroup.CROSS_SUBNET
    assert classify_pair(a, h("b", zone="r1-b", subnet="s3")) is PairGroup.CROSS_ZONE
    assert classify_pair(a, h("b", region="r2", zone="r2-a", subnet="s9")) is PairGroup.CROSS_REGION
    assert classify_pair(a, h("b", provider="q")) is PairGroup.CROSS_PROVIDER


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000, 12345])
def test_quantiles_match_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    xs = np.sort(rng.lognormal(4, 1, n))
    ps = [0, *PERCENTILES, 100]
    np.testing.assert_allclose(quantiles_sorted(xs, ps), np.percentile(xs, ps), rtol=1e-12)


def make_data(rtt: np.ndarray, timeout: np.ndarray, hosts: list[str]) -> EchoData:
    """rtt[src, dst, round] in µs; nan where timeout."""
    ns, nd, nr = rtt.shape
    s, d, r = np.meshgrid(np.arange(ns), np.arange(nd), np.arange(nr), indexing="ij")
    n = rtt.size
    return EchoData(
        repetition=np.zeros(n, dtype=np.int64), trial=np.zeros(n, dtype=np.int64),
        round=r.ravel(), src=s.ravel(), dst=d.ravel(), send_us=(r.ravel() * 10_000),
        rtt_us=np.where(timeout, np.nan, rtt).ravel(), timeout=timeout.ravel(),
        warmup=(r.ravel() < 2),
        group=np.where(s.ravel() == d.ravel(), 0, 1), hosts=hosts, trials=["t"],
    )


def test_quorum_is_kth_fastest_with_timeouts_as_infinite() -> None:
    rng = np.random.default_rng(1)
    rtt = rng.uniform(10, 100, (3, 3, 50))
    timeout = rng.random((3, 3, 50)) < 0.1
    d = make_data(rtt, timeout, ["a", "b", "c"])
    for k in (1, 2, 3):
        q = quorum_latencies(d, ["a", "b", "c"], k)
        # brute force over (src, round) for non-warm-up rounds
        want = []
        for src in range(3):
            for r in range(2, 50):
                vals = sorted(np.inf if timeout[src, j, r] else rtt[src, j, r] for j in range(3))
                want.append(vals[k - 1])
        np.testing.assert_allclose(np.sort(q), np.sort(want))


def test_quorum_subset_ignores_other_hosts() -> None:
    rtt = np.ones((3, 3, 5))
    rtt[:, 2, :] = 0.5  # c is fastest, but not a member
    d = make_data(rtt, np.zeros((3, 3, 5), dtype=bool), ["a", "b", "c"])
    q = quorum_latencies(d, ["a", "b"], 1)
    assert len(q) == 2 * 3 and np.all(q == 1.0)


def test_group_table_excludes_warmup_and_counts_timeouts() -> None:
    rtt = np.full((2, 2, 10), 50.0)
    rtt[0, 0, :] = 10.0
    timeout = np.zeros((2, 2, 10), dtype=bool)
    timeout[0, 1, 5] = True
    d = make_data(rtt, timeout, ["a", "b"])
    rows = {r["group"]: r for r in group_table(d)}
    assert rows["self"]["count"] == 16 and rows["self"]["timeouts"] == 0
    assert rows["same_subnet"]["count"] == 16 and rows["same_subnet"]["timeouts"] == 1
    assert rows["same_subnet"]["p50"] == 50.0 and rows["self"]["max"] == 50.0
    assert GROUP_ORDER[0] is PairGroup.SELF


def test_distribution_row_against_numpy() -> None:
    xs = np.random.default_rng(3).exponential(100, 5000)
    row = distribution_row(xs, 7)
    assert row["count"] == 5007 and row["timeouts"] == 7
    assert row["p99.9"] == pytest.approx(np.percentile(xs, 99.9))
    assert row["mean"] == pytest.approx(xs.mean())
    assert row["max"] == xs.max()


def test_windows_and_pairs() -> None:
    rtt = np.random.default_rng(5).uniform(10, 20, (2, 2, 300))
    rtt[:, :, 150:] += 100  # a step at 1.5 s
    d = make_data(rtt, np.zeros((2, 2, 300), dtype=bool), ["a", "b"])
    w = windowed_means(d, 1.0)
    by = {(r["window"], r["group"]): r["mean"] for r in w}
    assert by[(0, "self")] < 20 and by[(2, "self")] > 110
    assert len(w) == 3 * 2
    pairs = pair_table(d)
    assert len(pairs) == 4
    ab = next(p for p in pairs if p["src"] == "a" and p["dst"] == "b")
    sel = rtt[0, 1, 2:]
    assert ab["count"] == 298 and ab["p50"] == pytest.approx(np.percentile(sel, 50))


def test_echo_worker_health_from_the_trials_stats() -> None:
    def stats(cpu_s: float, late: int, lag_us: int, user: int = 0) -> dict[str, float | int]:
        return {"cpu_s": cpu_s, "wall_s": 20.0, "rounds": 2000, "late_sends": late,
                "max_send_lag_us": lag_us, "kernel_stamps": 2000 - user, "user_stamps": user}

    manifest = Manifest.model_validate({"campaign": "c", "run_id": "x", "trials": [
        {"id": "r000-t000-echo", "repetition": 0, "workload": "echo", "kind": "echo",
         "stats": {"a": stats(1.0, 3, 1500, user=5), "b": stats(1.6, 0, 200)}},
        {"id": "r001-t000-echo", "repetition": 1, "workload": "echo", "kind": "echo",
         "stats": {"a": stats(0.4, 1, 4200)}},
        # another workload's trial and a trial whose hosts all failed do not count
        {"id": "r000-t001-other", "repetition": 0, "workload": "other", "kind": "echo",
         "stats": {"a": stats(19.0, 500, 90000)}},
        {"id": "r001-t001-echo", "repetition": 1, "workload": "echo", "kind": "echo", "stats": {}},
    ]})
    h = echo_worker_health(manifest, "echo")
    assert h == {"cpu_pct_max": 8.0, "cpu_pct_max_host": "b", "cpu_pct_max_trial": "r000-t000-echo",
                 "rounds": 6000, "late_sends": 4, "max_send_lag_us": 4200,
                 "kernel_stamps": 5995, "user_stamps": 5}
    assert echo_worker_health(manifest, "missing") is None

    console = Console(record=True, width=200)
    render({"campaign": "c", "run_id": "x", "status": "complete", "repetitions": 2, "seed": 1,
            "damaged": [], "failures": [],
            "workloads": {"echo": {"kind": "echo", "groups": [], "quorums": [], "windows": [],
                                   "pairs": [], "workers": h}}}, console)
    assert ("echo: workers used at most 8.0 % of a core (b, r000-t000-echo); "
            "4 of 6,000 rounds (0.07%) left late, by at most 4.2 ms; 5 of 6,000 echoes (0.08%) "
            "stamped on read, not by the kernel") in console.export_text()

    # Worker 1 did not count its stamps: the line says nothing about them.
    old = {k: v for k, v in h.items() if k not in ("kernel_stamps", "user_stamps")}
    console = Console(record=True, width=200)
    render({"campaign": "c", "run_id": "x", "status": "complete", "repetitions": 2, "seed": 1,
            "damaged": [], "failures": [],
            "workloads": {"echo": {"kind": "echo", "groups": [], "quorums": [], "windows": [],
                                   "pairs": [], "workers": old}}}, console)
    text = console.export_text()
    assert "left late, by at most 4.2 ms\n" in text and "stamp" not in text

    # counts with thousands separators, as every other count of the report (the quickstart printed
    # "1207 of 33600 rounds" and "268800 echoes" beside "20,000 of 32,000 values")
    kernel_only = {**h, "rounds": 33600, "late_sends": 1207, "kernel_stamps": 268800, "user_stamps": 0}
    console = Console(record=True, width=200)
    render({"campaign": "c", "run_id": "x", "status": "complete", "repetitions": 2, "seed": 1,
            "damaged": [], "failures": [],
            "workloads": {"echo": {"kind": "echo", "groups": [], "quorums": [], "windows": [],
                                   "pairs": [], "workers": kernel_only}}}, console)
    text = console.export_text()
    assert "1,207 of 33,600 rounds (3.59%) left late" in text and "all 268,800 echoes stamped by the kernel" in text


def test_quantiles_are_printed_only_where_the_sample_reaches() -> None:
    """One rule (TAIL_K = 1): the p-th percentile needs 1 / min(p, 1 − p) values."""
    assert [min_n_for_quantile(p) for p in (5, 50, 90, 99, 99.9, 99.99, 99.999)] == [
        20, 2, 10, 100, 1000, 10_000, 100_000]
    assert quantile_estimable(100, 99) and not quantile_estimable(99, 99)
    rng = np.random.default_rng(0)
    small = distribution_row(rng.exponential(100.0, 80), timeouts=3)
    assert small["count"] == 83 and np.isfinite(small["p95"])
    assert all(np.isnan(small[k]) for k in ("p99", "p99.9", "p99.99", "p99.999"))
    big = distribution_row(rng.exponential(100.0, 1000), timeouts=0)
    assert np.isfinite(big["p99.9"]) and np.isnan(big["p99.99"])
    assert needs_note([80, 1000]) == ("— : too few values to estimate; p99 needs 100, p99.9 needs 1,000, "
                                      "p99.99 needs 10,000, p99.999 needs 100,000")
    assert needs_note([100_000]) == ""
