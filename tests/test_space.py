"""The disk estimate of a plan and the free-space check (cloudbench.space)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from cloudbench.errors import ExitCode, InsufficientSpaceError
from cloudbench.plan import make_plan
from cloudbench.space import MARGIN_BYTES, check_free_space, estimate_space, needed_bytes
from cloudbench.workloads import load_spec
from cloudbench.workloads.echo.controller import PARQUET_BYTES_PER_ROW, PARQUET_FILE_BYTES, RAW_BYTES_PER_RECORD
from tests.paths import QUICKSTART

QUICKSTART_ROWS = 268_800  # 2 repetitions x 64 pairs x 100/s x 21 s, as the testbed run keeps


def test_the_quickstart_estimate_counts_its_rows_at_the_measured_bytes() -> None:
    spec = load_spec(QUICKSTART)
    est = estimate_space(spec, make_plan(spec))
    assert est.parquet == pytest.approx(QUICKSTART_ROWS * PARQUET_BYTES_PER_ROW + 2 * PARQUET_FILE_BYTES)
    assert est.raw_peak == pytest.approx(QUICKSTART_ROWS / 2 * RAW_BYTES_PER_RECORD)  # one trial's raw files
    # the peak holds one trial's raw files and Parquet on top of the trials before it
    assert est.run_peak >= est.raw_peak + est.parquet
    assert est.parquet + est.report < est.run_final < est.parquet + est.report + 200_000  # manifest, summaries
    assert est.campaign_final == est.run_final and est.campaign_peak == est.run_peak


def test_a_campaign_keeps_every_slot_and_peaks_on_the_last() -> None:
    spec = load_spec(QUICKSTART)
    one = estimate_space(spec, make_plan(spec))
    week = estimate_space(spec, make_plan(spec), slots=168)
    assert week.campaign_final == pytest.approx(168 * one.run_final + week.journal)
    assert week.campaign_peak == pytest.approx(167 * one.run_final + one.run_peak + week.journal)


def test_a_resume_counts_only_what_is_left() -> None:
    spec = load_spec(QUICKSTART)
    plan = make_plan(spec)
    full = estimate_space(spec, plan)
    rest = estimate_space(spec, plan, trials=plan.trials[1:])
    assert rest.parquet == pytest.approx(full.parquet / 2)


def _statvfs(free: int) -> object:
    return SimpleNamespace(f_bavail=free // 4096, f_frsize=4096)


def test_the_check_refuses_with_bytes_needed_free_and_the_directory(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "statvfs", lambda _p: _statvfs(4 << 20))
    with pytest.raises(InsufficientSpaceError) as e:
        check_free_space(tmp_path / "not" / "yet", 10e6, "run of x")
    msg = str(e.value)
    assert e.value.exit_status == ExitCode.DISK_FULL
    assert f"{needed_bytes(10e6):,} bytes" in msg and f"{4 << 20:,} bytes" in msg and str(tmp_path) in msg
    assert "--no-space-check" in msg
    # enough: estimate plus the margin fits
    monkeypatch.setattr(os, "statvfs", lambda _p: _statvfs(needed_bytes(10e6) + 4096))
    assert check_free_space(tmp_path, 10e6, "run of x") >= needed_bytes(10e6)
    assert needed_bytes(0) == MARGIN_BYTES

