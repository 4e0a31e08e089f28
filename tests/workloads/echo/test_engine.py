"""The streaming engine against the numpy implementation it replaced, on synthetic runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cloudbench.analysis import orderstats as ost
from cloudbench.analysis.latency import PERCENTILES
from cloudbench.testing.fake_results import write_echo_run
from cloudbench.workloads.echo import matrices, report, scan, trial_files
from cloudbench.workloads.echo.aggregates import aggregate_echo
from cloudbench.workloads.echo.matrices import RoundMatrices
from cloudbench.workloads.echo.params import window_of
from cloudbench.workloads.echo.summaries import echo_summaries, spec_quorums
from tests.workloads.echo import numpy_reference as ref


def _close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return
        assert a == pytest.approx(b, rel=1e-12, abs=1e-9), where
    else:
        assert a == b, where


def _same_rows(new: list[dict[str, Any]], old: list[dict[str, Any]], what: str,
               time_tolerance_s: float = 0.0) -> None:
    assert len(new) == len(old), f"{what}: {len(new)} rows, numpy {len(old)}"
    for i, (a, b) in enumerate(zip(new, old, strict=True)):
        for k, v in b.items():
            if time_tolerance_s and k == "time_s":
                assert abs(a[k] - v) <= time_tolerance_s, f"{what}[{i}].{k}: {a[k]} vs {v}"
            else:
                _close(a[k], v, f"{what}[{i}].{k}")


@pytest.fixture(scope="module", params=[0, 1])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    # 0.5 s windows: 30-40 per trial, enough for the step test (it needs 14 at 1e-3)
    return write_echo_run(tmp_path_factory.mktemp("echo"), seed=request.param, window=0.5,
                          repetitions=1 + request.param, rounds=1500 + 500 * request.param)


def test_engine_equals_numpy_on_every_table(run: Any) -> None:
    manifest = run.manifest()
    params = manifest.workloads()[0]
    window = window_of(params)
    quorums = spec_quorums(manifest, params)
    d = ref.load_echo(run, manifest, "echo")
    interval = 1.0 / float(params["rate"])
    agg = aggregate_echo(run, manifest, "echo", window, quorums, round_interval_s=interval)
    assert agg.rows == len(d)
    _same_rows(agg.groups, ref.group_table(d), "groups")
    _same_rows(agg.pairs, ref.pair_table(d), "pairs")
    _same_rows(agg.quorums, ref.quorum_table(d, quorums), "quorums")
    old_windows = ref.windowed_means(d, window)
    _same_rows(agg.windows, old_windows, "windows")
    _same_rows(agg.boxes, ref.group_boxes(d), "boxes")
    _same_rows(agg.tails, ref.group_tails(d), "tails")
    old_pw = sorted(ref.pair_windowed_means(d, window), key=lambda r: (r["trial"], r["src"], r["dst"], r["window"]))
    new_pw = sorted(agg.pair_windows, key=lambda r: (r["trial"], r["src"], r["dst"], r["window"]))
    _same_rows(new_pw, old_pw, "pair_windows")
    section = report.section_of(agg, manifest, params, run)
    _same_rows(section["level_shifts"], ref.echo_level_shifts(d, window, interval), "level_shifts",
               time_tolerance_s=1e-4)
    # the engine times an echo by its round's send (a round's sends leave µs apart)
    _same_rows(section["events"], ref.pair_events(d, window, interval), "events", time_tolerance_s=1e-4)
    new_s = echo_summaries(run, agg, "echo")
    old_s = ref.echo_summaries(run, d, "echo", quorums)
    _same_rows([s._asdict() if hasattr(s, "_asdict") else vars(s) for s in new_s],
               [s._asdict() if hasattr(s, "_asdict") else vars(s) for s in old_s], "summaries")


def test_the_fixture_has_what_the_comparison_needs(run: Any) -> None:
    """Timeouts, warm-up, a slow tail and a level shift: a comparison on easy data proves little."""
    d = ref.load_echo(run, run.manifest(), "echo")
    assert d.timeout.sum() > 10 and d.warmup.sum() > 100
    assert len({g for g in d.group.tolist()}) >= 5
    shifts = ref.pair_events(d, 0.5, 0.01)
    assert any(s["series"] == "a-1>c-1" and s["kind"] == "step" for s in shifts)


@pytest.mark.parametrize("offset", [0, 65_534])  # keys radix-sorted (16 bits), and keys straddling 2**16
@pytest.mark.parametrize("seed", range(5))
def test_two_pass_selection_equals_numpy_percentiles(seed: int, offset: int) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 4, 20_000)
    values = rng.lognormal(11, 1.5, 20_000).astype(np.int64) * (1 + (keys == 2) * 50)
    values[:7] = [0, 1, 1, 2, 10**10, 10**11, 3]
    bins = ost.value_bins(values)
    hist = np.zeros((5, ost.NBINS), dtype=np.int64)
    np.add.at(hist, (keys, bins), 1)
    targets = ost.plan_selection(hist, PERCENTILES)
    keep = targets.need[keys, bins]
    assert keep.mean() < 0.5  # pass 2 keeps a small part of the data
    shifted = ost.Targets(targets.need, {k + offset: rows for k, rows in targets.wanted.items()})
    got = {k - offset: v for k, v in ost.select(shifted, keys[keep] + offset, bins[keep], values[keep]).items()}
    for k in range(4):
        xs = values[keys == k]
        srt = np.sort(xs)
        assert all(v == srt[i] for i, v in got[k].items())
        want = np.percentile(xs / 1000.0, PERCENTILES)
        np.testing.assert_allclose(ost.percentiles_from(got[k], len(xs), PERCENTILES, 1000.0), want, rtol=1e-13)
        assert got[k][len(xs) - 1] == xs.max()
    assert 4 not in got  # an empty key has no order statistics


def test_window_medians_equal_numpy() -> None:
    rng = np.random.default_rng(3)
    w = np.sort(rng.integers(0, 40, 5000))
    v = rng.normal(100, 10, 5000)
    valid = rng.random(5000) > 0.1
    ids, med = ost.window_medians(v, valid, w)
    for i, m in zip(ids, med, strict=True):
        assert m == np.median(v[valid & (w == i)])
    assert set(ids) == set(w[valid])


@pytest.mark.parametrize("spread", [40, 10**12])  # ids close together (binary search), far apart (a diff)
@pytest.mark.parametrize("ordered", [True, False])
def test_window_stats_equal_numpy(spread: int, ordered: bool) -> None:
    """Counts, exact integer sums and medians (odd and even windows, one-value windows) per
    window id, ids ascending, on 4-byte RTTs as the round matrices hold them."""
    rng = np.random.default_rng(spread + ordered)
    w = np.concatenate([rng.choice(rng.integers(0, spread, 60), 3000), [spread + 1, spread + 2, spread + 2]])
    w = np.sort(w) if ordered else w
    v = rng.integers(20_000, 4_000_000_000, len(w), dtype=np.uint32)
    ids, counts, sums, med = ost.window_stats(v, w)
    assert list(ids) == sorted(set(w.tolist()))
    assert {int(n) % 2 for n in counts} == {0, 1} and {1, 2} <= set(counts.tolist())  # one- and two-value windows
    for i, n, sm, m in zip(ids, counts, sums, med, strict=True):
        xs = v[w == i]
        assert n == len(xs) and sm == int(xs.astype(np.int64).sum())
        assert m == np.median(xs.astype(np.float64))


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 16, 17])
def test_column_order_stats_equal_partition(m: int) -> None:
    """The k-th smallest of every column, for every k: the sorting network (up to 16 rows) and the
    partition beyond it, with ties and the two sentinels at the top of the type."""
    rng = np.random.default_rng(m)
    top = np.iinfo(np.uint32).max
    rows = rng.choice(np.array([5, 7, 7, 9, 1_000, top - 1, top], dtype=np.uint32), size=(m, 4000))
    rows[:, :50] = rng.integers(0, top, size=(m, 50), dtype=np.uint32)
    before = rows.copy()
    got = ost.column_order_stats(rows, range(1, m + 1))
    want = np.sort(rows, axis=0)
    for k in range(1, m + 1):
        assert got[k].dtype == rows.dtype and np.array_equal(got[k], want[k - 1])
    assert np.array_equal(rows, before)  # the input is left as it was
    with pytest.raises(ValueError, match="k must lie"):
        ost.column_order_stats(rows, [m + 1])


@pytest.mark.parametrize("m", [1, 5, 17])
def test_column_order_stats_of_row_views_with_an_offset(m: int) -> None:
    """Rows given as views (as the scan gives a quorum's rows of a matrix) with an offset taken off
    in the rows' type: stored cells 0 and 1 wrap to the two sentinels at the top, above every RTT,
    as the scan's decoding does; the matrix is left as it was."""
    rng = np.random.default_rng(100 + m)
    matrix = rng.choice(np.array([0, 1, 2, 7, 9, 1_002], dtype=np.uint32), size=(m + 2, 3000))
    members = list(range(1, m + 1))
    before = matrix.copy()
    got = ost.column_order_stats([matrix[d] for d in members], range(1, m + 1), offset=2)
    decoded = matrix[members] - np.uint32(2)
    assert decoded.max() == np.iinfo(np.uint32).max  # the sentinels are there
    want = np.sort(decoded, axis=0)
    for k in range(1, m + 1):
        assert got[k].dtype == np.uint32 and np.array_equal(got[k], want[k - 1])
    assert np.array_equal(matrix, before)


@pytest.mark.parametrize("kind", ["lognormal µs", "ties", "one value", "below one and negative", "ns integers"])
def test_order_statistics_equal_a_sort(kind: str) -> None:
    """Positions of the sorted array, through the histogram (large arrays) and by partition
    (small ones): the same values a sort gives, whatever the values' spread."""
    rng = np.random.default_rng(len(kind))
    n = ost.HISTOGRAM_FROM + 12_345
    xs: np.ndarray = {
        "lognormal µs": lambda: rng.lognormal(6, 1.5, n),
        "ties": lambda: rng.choice([40.0, 41.5, 1e6, np.inf], n),
        "one value": lambda: np.full(n, 123.456),
        "below one and negative": lambda: rng.normal(0.2, 1.0, n),
        "ns integers": lambda: rng.integers(10_000, 2**40, n),
    }[kind]()
    want = np.sort(xs)
    for values in (xs, xs[:1000]):
        m = len(values)
        srt = want if m == n else np.sort(values)
        pos = [0, 1, m // 2, m - 2, m - 1, int(m * 0.99999), *rng.integers(0, m, 20).tolist()]
        got = ost.order_statistics(values, pos)
        assert set(got) == set(pos)
        for i in pos:
            assert got[i] == srt[i], (kind, m, i)
    with pytest.raises(ValueError, match="positions must lie"):
        ost.order_statistics(xs, [n])


def test_pass_2_reading_the_files_again_equals_numpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pass 2 from the files (a run too big to keep its round matrices), on files whose footers
    have no statistics (pass 1 finds each trial's last round by reading it): the same tables."""
    import pyarrow.parquet as pq

    run = write_echo_run(tmp_path / "c", seed=5, repetitions=2, rounds=900)
    for path in (run.path / "echo").glob("*.parquet"):
        t = pq.read_table(path)
        pq.write_table(t, path, write_statistics=False, row_group_size=700)
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).statistics is None
    manifest = run.manifest()
    params = manifest.workloads()[0]
    window = window_of(params)
    quorums = spec_quorums(manifest, params)
    d = ref.load_echo(run, manifest, "echo")
    from_files = []
    original = scan.EchoScan._values_in_row_group

    def spy(self: Any, *args: Any) -> Any:
        from_files.append(args[1])
        return original(self, *args)

    monkeypatch.setattr(scan, "KEEP_BYTES", 0)
    monkeypatch.setattr(scan.EchoScan, "_values_in_row_group", spy)
    agg = aggregate_echo(run, manifest, "echo", window, quorums)
    assert len(from_files) > 2  # every row group of every trial file, read a second time
    assert agg.rows == len(d)
    _same_rows(agg.groups, ref.group_table(d), "groups")
    _same_rows(agg.pairs, ref.pair_table(d), "pairs")
    _same_rows(agg.quorums, ref.quorum_table(d, quorums), "quorums")
    _same_rows(agg.windows, ref.windowed_means(d, window), "windows")
    _same_rows(agg.boxes, ref.group_boxes(d), "boxes")
    _same_rows(agg.tails, ref.group_tails(d), "tails")


def test_report_of_schema_1_files_equals_schema_2(tmp_path: Path) -> None:
    """A run written before the group/run/trial columns reads the same (labels from the manifest)."""
    import pyarrow.parquet as pq

    from cloudbench.store.parquet import KIND_KEY, SCHEMA_KEY

    run = write_echo_run(tmp_path / "c", seed=4, repetitions=1, rounds=800)
    manifest = run.manifest()
    params = manifest.workloads()[0]
    new = aggregate_echo(run, manifest, "echo", 2.0, spec_quorums(manifest, params))
    for path in (run.path / "echo").glob("*.parquet"):
        t = pq.read_table(path).drop_columns(["run_id", "trial", "group"])
        t = t.replace_schema_metadata({SCHEMA_KEY: b"1", KIND_KEY: b"echo"})
        pq.write_table(t, path)
    old = aggregate_echo(run, manifest, "echo", 2.0, spec_quorums(manifest, params))
    _same_rows(old.groups, new.groups, "groups")
    _same_rows(old.pairs, new.pairs, "pairs")
    _same_rows(old.quorums, new.quorums, "quorums")


def test_events_on_raw_rtts_equal_numpy_and_find_the_step(tmp_path: Path) -> None:
    run = write_echo_run(tmp_path / "c", seed=7, repetitions=1, rounds=5000, step=("a-1", "c-1", 2500, 800.0))
    manifest = run.manifest()
    d = ref.load_echo(run, manifest, "echo")
    agg = aggregate_echo(run, manifest, "echo", 2.0, round_interval_s=0.01)
    old = ref.pair_events(d, 2.0, 0.01)
    assert any(e["series"] == "a-1>c-1" and e["kind"] == "step" for e in agg.events), agg.events
    _same_rows(agg.events, old, "events", time_tolerance_s=1e-4)
    assert all(e["time_utc"] for e in agg.events)  # placed in the day, from the workers' clocks


def test_the_level_shifts_found_beside_the_second_pass_are_those_of_the_pairs_and_groups(tmp_path: Path) -> None:
    """``level_shifts=True``: the rows ``level_shift_rows`` gives for the aggregates' series and events
    (the pair's step among them), which the section uses as they are; without it, none."""
    from cloudbench.analysis.levelshift import level_shift_rows

    run = write_echo_run(tmp_path / "c", seed=7, repetitions=1, rounds=5000, step=("a-1", "c-1", 2500, 800.0))
    manifest = run.manifest()
    agg = aggregate_echo(run, manifest, "echo", 2.0, round_interval_s=0.01, level_shifts=True)
    assert agg.shift_rows == level_shift_rows(agg.pair_series, agg.events)
    assert any(r["series"] == "a-1>c-1" and r["kind"] == "step" for r in agg.shift_rows)
    assert aggregate_echo(run, manifest, "echo", 2.0, round_interval_s=0.01).shift_rows is None
    section = report.section(run, manifest, manifest.workloads()[0])
    assert [(r["series"], r["kind"], r["time_s"]) for r in section["level_shifts"]] == [
        (r["series"], r["kind"], r["time_s"]) for r in agg.shift_rows]


def test_windows_shifts_and_events_carry_utc_times(tmp_path: Path) -> None:
    """A window, a level shift or an event can be placed in the day (UTC times)."""
    from datetime import datetime

    run = write_echo_run(tmp_path / "c", seed=3, repetitions=1, rounds=5000, step=("a-1", "c-1", 2500, 800.0))
    manifest = run.manifest()
    params = manifest.workloads()[0]
    section = report.section(run, manifest, params)
    t0 = run.manifest().trials[0]
    assert section["windows"] and all(w["start_utc"] for w in section["windows"])
    shifts = [s for s in section["level_shifts"] if s["series"] == "a-1>c-1"]
    assert shifts and all(s["time_utc"] for s in shifts)
    # the fixture's hosts started round 0 at 1_795_000_000 s UTC: the step at round 2500 is 25 s later
    when = datetime.fromisoformat(shifts[0]["time_utc"].replace("Z", "+00:00")).timestamp()
    assert abs(when - (1_795_000_000 + 25.0)) <= window_of(params), (when, t0)


def _rewrite(run: Any, edit: Any, **write: Any) -> None:
    """Each echo file of ``run`` read, changed by ``edit`` (a pyarrow Table -> Table) and written again."""
    import pyarrow.parquet as pq

    for path in (run.path / "echo").glob("*.parquet"):
        t = pq.read_table(path)
        pq.write_table(edit(t).replace_schema_metadata(t.schema.metadata), path, **write)


@pytest.mark.parametrize(("big", "cell"), [(7_000_000_123, np.uint64), (0xFFFFFFFD, np.uint32)])
def test_rtts_beyond_four_seconds_and_mixed_row_groups_equal_numpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    big: int, cell: Any) -> None:
    """RTTs too large for a 4-byte cell take 8-byte matrices (the largest that fits keeps 4);
    row groups holding several senders, warm-up and measured rows (nothing constant to skip)
    read the same."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = write_echo_run(tmp_path / "c", seed=6, repetitions=1, rounds=900)

    def slow(t: Any) -> Any:
        rtt = t.column("rtt_ns").to_numpy(zero_copy_only=False)
        pick = np.zeros(len(rtt), dtype=bool)
        pick[[4000, 9000, 12000]] = True  # measured rows (past the warm-up) of three pairs
        ok = ~np.isnan(rtt) & pick
        new = pc.if_else(pa.array(ok), pa.scalar(big, pa.int64()), t.column("rtt_ns"))
        return t.set_column(t.schema.get_field_index("rtt_ns"), "rtt_ns", new)

    _rewrite(run, slow, row_group_size=12_000)  # about 4,600 rows per sender: 2-3 senders a row group
    manifest = run.manifest()
    quorums = spec_quorums(manifest, manifest.workloads()[0])
    d = ref.load_echo(run, manifest, "echo")
    assert (d.rtt_us >= big / 1000.0).sum() >= 2
    dtypes = []
    original = RoundMatrices.for_file

    def spy(f: Any, n_hosts: int) -> Any:
        assert f.row_groups > 1 and not any("src" in c or "warmup" in c for c in f.constant)
        m = original(f, n_hosts)
        dtypes.append(m.rtts.dtype)
        return m

    monkeypatch.setattr(RoundMatrices, "for_file", staticmethod(spy))
    agg = aggregate_echo(run, manifest, "echo", 2.0, quorums)
    assert dtypes == [np.dtype(cell)]
    _same_rows(agg.groups, ref.group_table(d), "groups")
    _same_rows(agg.pairs, ref.pair_table(d), "pairs")
    _same_rows(agg.quorums, ref.quorum_table(d, quorums), "quorums")
    _same_rows(agg.windows, ref.windowed_means(d, 2.0), "windows")
    _same_rows(agg.tails, ref.group_tails(d), "tails")
    assert max(g["max"] for g in agg.groups) == big / 1000.0


@pytest.mark.parametrize("slices", [False, True])
def test_a_round_recorded_twice_is_an_error_naming_the_file(tmp_path: Path, slices: bool) -> None:
    """Also when the rows are in the ingest's order and the repeated row lands in the same run
    of one peer as the original (written as a slice)."""
    import pyarrow as pa

    from cloudbench.errors import ResultError

    run = write_echo_run(tmp_path / "c", seed=2, repetitions=1, rounds=300)
    if slices:
        def twice(t: Any) -> Any:
            order = np.lexsort((t.column("round").to_numpy(), np.array(t.column("dst").to_pylist()),
                                np.array(t.column("src").to_pylist())))
            return t.take(pa.array(np.insert(order, len(order) - 5, order[-6])))  # round r, then r again

        _rewrite(run, twice, row_group_size=230)
    else:
        _rewrite(run, lambda t: pa.concat_tables([t, t.slice(len(t) - 1, 1)]))
    manifest = run.manifest()
    with pytest.raises(ResultError, match="already has one") as e:
        aggregate_echo(run, manifest, "echo", 2.0)
    assert "r000-t00-echo.parquet" in str(e.value)


def test_a_round_straddling_a_window_boundary_stays_in_its_first_sends_window(tmp_path: Path) -> None:
    """The rows of one round share a window (the round's first send's), for means as for medians:
    a send 1 µs past the boundary does not move its row out of its round's window."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = write_echo_run(tmp_path / "c", seed=8, repetitions=1, rounds=400, warmup_rounds=0, step=None)
    manifest = run.manifest()
    before = aggregate_echo(run, manifest, "echo", 2.0)

    def late(t: Any) -> Any:  # a-1's echo to c-1 in round 199 (sent about 1.99 s in) sent at 2.000001 s
        hit = pc.and_(pc.and_(pc.equal(t.column("src").cast(pa.string()), "a-1"),
                              pc.equal(t.column("dst").cast(pa.string()), "c-1")), pc.equal(t.column("round"), 199))
        assert pc.sum(hit).as_py() == 1
        new = pc.if_else(hit, pa.scalar(2_000_001, pa.int64()), t.column("send_us"))
        return t.set_column(t.schema.get_field_index("send_us"), "send_us", new)

    _rewrite(run, late)
    after = aggregate_echo(run, manifest, "echo", 2.0)

    def counts(agg: Any) -> dict[int, int]:
        return {w["window"]: w["count"] for w in agg.pair_windows if (w["src"], w["dst"]) == ("a-1", "c-1")}

    assert counts(after) == counts(before) and counts(before)[0] > 0
    _same_rows(after.windows, before.windows, "windows")
    for a, b in zip(after.pair_series, before.pair_series, strict=True):
        assert a[:4] == b[:4] and np.array_equal(a[4], b[4]) and np.array_equal(a[5], b[5])
    # by each row's own send time the row would have moved to window 1
    d = ref.load_echo(run, manifest, "echo")
    by_row = {w["window"]: w["count"] for w in ref.pair_windowed_means(d, 2.0)
              if (w["src"], w["dst"]) == ("a-1", "c-1")}
    assert by_row[0] == counts(after)[0] - 1


def test_warm_up_only_row_groups_read_the_same_and_name_only_known_hosts(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from cloudbench.errors import ResultError

    run = write_echo_run(tmp_path / "c", seed=9, repetitions=2, rounds=600)
    path = next((run.path / "echo").glob("r001-*.parquet"))
    t = pq.read_table(path)
    t = t.take(pc.sort_indices(t, [("warmup", "descending")]))
    warm = pc.sum(t.column("warmup")).as_py()
    pq.write_table(t, path, row_group_size=warm)
    manifest = run.manifest()
    quorums = spec_quorums(manifest, manifest.workloads()[0])
    seen = []
    original = RoundMatrices.for_file

    def spy(f: Any, n_hosts: int) -> Any:
        seen.append(f.constant[0].get("warmup"))
        return original(f, n_hosts)

    monkeypatch.setattr(RoundMatrices, "for_file", staticmethod(spy))
    agg = aggregate_echo(run, manifest, "echo", 2.0, quorums)
    assert seen == [None, True]  # rep 0's first row group mixes warm-up and measured rows, rep 1's is warm-up
    d = ref.load_echo(run, manifest, "echo")
    assert agg.rows == len(d)
    _same_rows(agg.groups, ref.group_table(d), "groups")
    for r in (0, 1):
        _same_rows(agg.groups_by_rep[r], ref.group_table(d, d.repetition == r), f"groups of repetition {r}")
    _same_rows(agg.quorums, ref.quorum_table(d, quorums), "quorums")
    # a host the manifest does not list is refused in warm-up rows too
    dst = t.column("dst").combine_chunks()
    names = dst.dictionary.to_pylist()
    idx = dst.indices.to_numpy().copy()
    idx[:warm][idx[:warm] == idx[0]] = len(names)  # the warm-up rows' first peer renamed
    bad = t.set_column(t.schema.get_field_index("dst"), "dst",
                       pa.DictionaryArray.from_arrays(pa.array(idx), pa.array([*names, "zz-9"], pa.string())))
    assert "zz-9" not in bad.slice(warm).column("dst").cast(pa.string()).to_pylist()
    pq.write_table(bad, path, row_group_size=warm)
    with pytest.raises(ResultError, match="does not list"):
        aggregate_echo(run, manifest, "echo", 2.0, quorums)


def test_a_timeout_that_carries_an_rtt_is_an_error_naming_the_file(tmp_path: Path) -> None:
    """cloudbench writes a timeout's RTT as null; a file that says both would be read as a reply
    by the quorums and as a timeout by the counts, so it is refused."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from cloudbench.errors import ResultError

    run = write_echo_run(tmp_path / "c", seed=2, repetitions=1, rounds=300)

    def flagged(t: Any) -> Any:
        hit = np.zeros(len(t), dtype=bool)
        hit[len(t) // 2] = True
        assert t.column("rtt_ns")[len(t) // 2].is_valid
        new = pc.or_(t.column("timeout"), pa.array(hit))
        return t.set_column(t.schema.get_field_index("timeout"), "timeout", new)

    _rewrite(run, flagged)
    with pytest.raises(ResultError, match="flagged timeout that carry an RTT") as e:
        aggregate_echo(run, run.manifest(), "echo", 2.0)
    assert "r000-t00-echo.parquet" in str(e.value)


def test_a_round_without_a_reply_from_any_quorum_member_is_a_quorum_timeout(tmp_path: Path) -> None:
    """A sender's round in which every quorum member's reply timed out has rows but no RTT: it
    counts as a timeout of each of that sender's quorum latencies, as numpy counts it, also
    when some members' rows of that round are missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    run = write_echo_run(tmp_path / "c", seed=4, repetitions=1, rounds=400)
    manifest = run.manifest()
    quorums = spec_quorums(manifest, manifest.workloads()[0])
    _, members, _ = quorums[0]

    def all_lost(t: Any) -> Any:
        src = np.array(t.column("src").to_pylist())
        dst = np.array(t.column("dst").to_pylist())
        rnd = t.column("round").to_numpy()
        hit = (src == members[0]) & np.isin(dst, members) & np.isin(rnd, [300, 301])
        assert hit.sum() == 2 * len(members)
        t = t.set_column(t.schema.get_field_index("timeout"), "timeout", pc.or_(t.column("timeout"), pa.array(hit)))
        rtt = pc.if_else(pa.array(hit), pa.scalar(None, pa.int64()), t.column("rtt_ns"))
        t = t.set_column(t.schema.get_field_index("rtt_ns"), "rtt_ns", rtt)
        gone = (src == members[0]) & np.isin(dst, members[:2]) & (rnd == 301)
        return t.filter(pa.array(~gone))

    _rewrite(run, all_lost)
    d = ref.load_echo(run, manifest, "echo")
    want = ref.quorum_table(d, quorums)
    assert all(r["timeouts"] >= 2 for r in want)
    _same_rows(aggregate_echo(run, manifest, "echo", 2.0, quorums).quorums, want, "quorums")


@pytest.mark.parametrize("group_rows", [230, 2_000])
def test_row_groups_in_runs_of_one_peer_are_written_by_slices_and_read_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group_rows: int) -> None:
    """Rows in the ingest's order (sender, peer, round) in row groups of one pair or of several
    peers: each run of one peer and consecutive rounds is written as a slice; the tables equal
    numpy's, also where a lost row leaves a gap in a run's rounds. A peer the manifest does not
    list is still an error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cloudbench.errors import ResultError

    run = write_echo_run(tmp_path / "c", seed=12, repetitions=1, rounds=500)

    lost: list[int] = []

    def by_pair(t: Any) -> Any:  # and one measured row lost mid-run: a gap in a run's rounds
        hosts = [np.array(t.column(c).to_pylist()) for c in ("src", "dst")]
        order = np.lexsort((t.column("round").to_numpy(), hosts[1], hosts[0]))
        measured = np.flatnonzero(~t.column("warmup").to_numpy(zero_copy_only=False)[order])
        at = int(measured[len(measured) // 3])
        rnd = t.column("round").to_numpy()[order]
        assert rnd[at + 1] == rnd[at] + 1 == rnd[at - 1] + 2  # inside a run of consecutive rounds
        lost.append(int(rnd[at]))
        return t.take(pa.array(np.delete(order, at)))

    _rewrite(run, by_pair, row_group_size=group_rows)
    manifest = run.manifest()
    quorums = spec_quorums(manifest, manifest.workloads()[0])
    found: list[int] = []
    original = matrices.peer_runs

    def spy(dst: Any, rnd: Any) -> Any:
        out = original(dst, rnd)
        found.append(-1 if out is None else len(out) - 1)
        return out

    monkeypatch.setattr(matrices, "peer_runs", spy)
    agg = aggregate_echo(run, manifest, "echo", 2.0, quorums)
    assert -1 not in found and max(found) >= (3 if group_rows > 1000 else 2)
    assert lost
    d = ref.load_echo(run, manifest, "echo")
    _same_rows(agg.groups, ref.group_table(d), "groups")
    _same_rows(agg.pairs, ref.pair_table(d), "pairs")
    _same_rows(agg.quorums, ref.quorum_table(d, quorums), "quorums")
    _same_rows(agg.windows, ref.windowed_means(d, 2.0), "windows")
    _same_rows(agg.pair_windows, ref.pair_windowed_means(d, 2.0), "pair windows", time_tolerance_s=0.0)

    path = next((run.path / "echo").glob("*.parquet"))
    t = pq.read_table(path)
    dst = np.array(t.column("dst").to_pylist())
    tail = np.arange(len(t)) >= len(t) - 100  # part of the last run
    renamed = pa.array(np.where(tail, "zz-9", dst)).dictionary_encode()
    pq.write_table(t.set_column(t.schema.get_field_index("dst"), "dst", renamed), path, row_group_size=group_rows)
    with pytest.raises(ResultError, match="names hosts that the manifest does not list") as e:
        aggregate_echo(run, manifest, "echo", 2.0, quorums)
    assert path.name in str(e.value)


def test_host_codes_of_a_column_in_chunks_with_their_own_dictionaries() -> None:
    """Each chunk's codes are offset past the earlier chunks' dictionaries, so one lookup maps
    every row; a name the manifest does not list maps to -1 and is an error naming the file."""
    import pyarrow as pa

    from cloudbench.errors import ResultError

    index = {"a-1": 0, "b-1": 1, "c-1": 2}
    col = pa.chunked_array([pa.array(["a-1", "b-1", "a-1"]).dictionary_encode(),
                            pa.array(["c-1", "zz-9", "b-1"]).dictionary_encode(),
                            pa.array(["b-1"]).dictionary_encode()])
    codes, lut = trial_files.host_codes(col, index)
    assert lut[codes].tolist() == [0, 1, 0, 2, -1, 1, 1]
    with pytest.raises(ResultError, match="does not list") as e:
        trial_files.host_index(col, index, Path("r000-t00-echo.parquet"))
    assert "r000-t00-echo.parquet" in str(e.value)
    known = pa.chunked_array([col.chunk(0), col.chunk(2)])
    assert trial_files.host_index(known, index, Path("x")).tolist() == [0, 1, 0, 1]
