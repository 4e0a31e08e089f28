"""A full disk at each write site, on the real testbed: a results directory on a small tmpfs.

Each site is filled in turn, just before its write (a ballast file takes every free
byte, so the write itself meets a real ENOSPC from the kernel): the echo Parquet
stream, the manifest, summaries.parquet, the report, the campaign journal. Each
must end with exit 5 and one error line (no traceback), the hosts torn down, the
manifest `failed` with `error_kind: disk_full`, raw files not yet ingested kept and
listed with their checksums, no `*.tmp` left; and after space is freed (ballast
removed, the tmpfs grown), `run --resume` (or `campaign run` again) ends complete with
the rows of a run without the fault.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import cloudbench
from cloudbench.campaign.journal import Journal
from cloudbench.cli.app import app
from cloudbench.core.files import sha256_file
from cloudbench.errors import ExitCode
from cloudbench.plan import make_plan
from cloudbench.space import estimate_space
from cloudbench.store import parquet as parquet_mod
from cloudbench.store.manifest import Manifest, load_manifest, save_manifest
from cloudbench.store.rundir import find_runs
from cloudbench.store.summaries import write_summaries
from cloudbench.workloads import load_spec
from cloudbench.workloads.echo.controller import PARQUET_BYTES_PER_ROW, PARQUET_FILE_BYTES

from .conftest import ours

pytestmark = pytest.mark.integration

SPEC = """\
name: diskfull
seed: 5
repetitions: 2
fresh_hosts: repetition
rest: 0s
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: 3}
workloads:
  - {kind: echo, name: echo, rate: 200, payload: 64, duration: 2s, warmup: 0.2s, timeout: 0.5s}
"""
SCHEDULE = """\
schedule:
  every: 1s
  count: 1
  slip: 1h
"""
SMALL = "32m"  # passes the space check (the estimate is ~2 MB plus an 8 MiB margin)
LARGE = "96m"


@contextlib.contextmanager
def tmpfs(size: str) -> Iterator[Path]:
    mnt = Path(tempfile.mkdtemp(prefix="cb-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        mnt.rmdir()


def fill(mnt: Path) -> None:
    """Take every free byte of the tmpfs (a ballast file written until ENOSPC)."""
    with contextlib.suppress(OSError), (mnt / "ballast").open("wb") as f:
        while True:
            f.write(bytes(1 << 16))
            f.flush()
    with contextlib.suppress(OSError), (mnt / "ballast2").open("wb") as f:
        while True:  # the last partial block
            f.write(b"\0" * 512)
            f.flush()


def free(mnt: Path) -> None:
    for name in ("ballast", "ballast2"):
        (mnt / name).unlink(missing_ok=True)
    subprocess.run(["mount", "-o", f"remount,size={LARGE}", str(mnt)], check=True)


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=True)


def assert_one_line_disk_full(r: Any) -> None:
    text = r.output
    assert r.exit_code == ExitCode.DISK_FULL, text
    assert "Traceback" not in text and (r.exception is None or isinstance(r.exception, SystemExit)), \
        (text, r.exception)
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "no space left" in errors[0], text


def ok_rows(m: Manifest) -> dict[str, int]:
    return {t.id: t.rows for t in m.trials if t.status == "ok"}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """Rows per trial of the spec run without a fault."""
    d = tmp_path_factory.mktemp("ref")
    spec = d / "spec.yaml"
    spec.write_text(SPEC)
    r = cli("run", str(spec), "--results", str(d / "results"), "-q", "--no-html")
    assert r.exit_code == 0, r.output
    m = find_runs(d / "results" / "diskfull")[0].manifest()
    assert m.status == "complete" and len(ok_rows(m)) == 2
    s = load_spec(spec)
    est = estimate_space(s, make_plan(s))  # the plan's disk estimate counts the rows a run keeps
    assert sum(ok_rows(m).values()) == pytest.approx((est.parquet - 2 * PARQUET_FILE_BYTES) / PARQUET_BYTES_PER_ROW)
    kept = sum(f.stat().st_size for f in (d / "results").rglob("*.parquet") if f.parent.name == "echo")
    assert kept <= est.parquet  # the estimate bounds what the run keeps
    return ok_rows(m)


def _once(fn: Callable[..., Any], when: Callable[..., bool], mnt: Path) -> Callable[..., Any]:
    done: list[int] = []

    def wrapper(*a: Any, **kw: Any) -> Any:
        if not done and when(*a, **kw):
            done.append(1)
            fill(mnt)
        return fn(*a, **kw)

    return wrapper


def _patch_site(site: str, mnt: Path, mp: pytest.MonkeyPatch) -> None:
    if site == "parquet":
        orig = parquet_mod.ParquetStream.__enter__
        mp.setattr(parquet_mod.ParquetStream, "__enter__",
                   _once(orig, lambda self: self.path.name.endswith("-echo.parquet"), mnt))
    elif site == "manifest":  # after the first trial is recorded ok
        mp.setattr("cloudbench.runner.campaign_runner.save_manifest", _once(
            save_manifest, lambda path, m: any(t.status == "ok" for t in m.trials), mnt))
    elif site == "summaries":
        mp.setattr("cloudbench.runner.campaign_runner.write_summaries", _once(write_summaries, lambda *a: True, mnt))
    elif site == "report":
        # report.json and the CSVs, written (by a forked child) beside the page
        mp.setattr("cloudbench.report.outputs.write_report", _once(cloudbench.write_report, lambda *a: True, mnt))
    elif site == "journal":
        mp.setattr(Journal, "update_trial", _once(Journal.update_trial,
                                                  lambda self, tid, event, *a, **kw: event == "trial end", mnt))


def _check_failed_run(run_dir: Path, site: str) -> Manifest:
    m = load_manifest(run_dir / "manifest.json")
    assert m.status == "failed" and m.error_kind == "disk_full", (m.status, m.error)
    assert "no space left" in (m.error or "")
    assert not list(run_dir.parent.parent.rglob("*.tmp")), list(run_dir.parent.parent.rglob("*.tmp"))
    assert not (run_dir / ".space-reserve").exists()
    raw = sorted((run_dir / "raw").glob("*.bin")) if (run_dir / "raw").is_dir() else []
    if site == "parquet":  # the trial's files were pulled whole: kept, listed with checksums, to ingest
        pending = [t for t in m.trials if t.status == "ingest"]
        assert len(pending) == 1 and len(pending[0].raw) == 3, m.trials
        assert len(raw) == 3
    for f in raw:
        rel = str(f.relative_to(run_dir))
        assert m.kept_raw[rel] == sha256_file(f)
    return m


@pytest.mark.parametrize("site", ["parquet", "manifest", "summaries", "report", "journal"])
def test_a_full_disk_loses_nothing_and_resume_completes(site: str, reference: dict[str, int],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + (SCHEDULE if site == "journal" else ""))
    with tmpfs(SMALL) as mnt:
        with monkeypatch.context() as mp:
            _patch_site(site, mnt, mp)
            if site == "journal":
                r0 = cli("campaign", "start", str(spec), "--dir", str(mnt / "camp"))
                assert r0.exit_code == 0, r0.output
                r = cli("campaign", "run", str(mnt / "camp"))
            else:
                r = cli("run", str(spec), "--results", str(mnt), "-q")
        assert_one_line_disk_full(r)
        root = mnt / "camp" if site == "journal" else mnt / "diskfull"
        (run,) = find_runs(root)
        m = _check_failed_run(run.path, site)
        assert m.repetitions and all(ours(rep.stack) == [] for rep in m.repetitions), "hosts left behind"
        free(mnt)
        if site == "journal":
            r2 = cli("campaign", "run", str(mnt / "camp"))
            assert r2.exit_code == 0, r2.output
            st = cloudbench.campaign_status(mnt / "camp")
            assert st["slots"] == {"finished": 1}, st
        else:
            r2 = cli("run", "--resume", str(run.path), "-q")
            assert r2.exit_code == 0, r2.output
            assert (run.path / "report" / "index.html").is_file()
        m = run.manifest()
        assert m.status == "complete", (m.status, m.error)
        assert ok_rows(m) == reference
        assert run.verify() == []
        assert not (run.path / "raw").exists() or not list((run.path / "raw").iterdir())
        assert not list(mnt.rglob("*.tmp"))
        assert all(ours(rep.stack) == [] for rep in m.repetitions)


def test_the_space_check_refuses_before_any_host_and_says_how_much(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with tmpfs("2m") as mnt:
        r = cli("run", str(spec), "--results", str(mnt), "-q")
        assert r.exit_code == ExitCode.DISK_FULL, r.output
        line = next(ln for ln in r.output.splitlines() if ln.startswith("error:"))
        assert str(mnt) in line and "bytes" in line and "free" in line and "--no-space-check" in line
        assert list(mnt.iterdir()) == []  # nothing created: no run directory, so no testbed either
