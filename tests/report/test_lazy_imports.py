"""`cloudbench report` imports what the run needs before its scan, and the page what it draws.

The report of a 6-hour run spent ~2.9 s importing before it read a row: report.build imported the
time-of-day analysis (scipy's fits) for every run, and the page imported the repetition analysis
(statsmodels, pandas with it) to read a confirm.json that most runs do not have. The time of day
loads for a scheduled campaign's run, the repetition analysis for a page that shows confirm.json,
statsmodels for the checks that call it; the page's modules (matplotlib) only for a page:
`report --no-html` never imports them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

HEAVY = ("statsmodels", "matplotlib", "cloudbench.analysis.diurnal", "cloudbench.report.diurnal",
         "cloudbench.analysis.confirm", "cloudbench.report.confirm")


def loaded(code: str, *args: str) -> list[str]:
    """The modules of HEAVY that ``code``, run in a fresh interpreter, leaves imported."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, check=True)
    return list(json.loads(out.stdout.splitlines()[-1]))


def test_the_report_path_imports_no_time_of_day_repetition_analysis_or_matplotlib() -> None:
    assert loaded("import cloudbench.cli, cloudbench.report.build, cloudbench.report.files") == []


def test_the_scan_starts_without_scipy_stats_or_asyncssh() -> None:
    """The workload registry imported every kind's analysis at once: scipy.stats (0.6 s; through
    scipy.signal too), asyncssh and DuckDB with it, before the echo scan read a row. The scan's
    modules need none of them: scipy.stats loads with the first event's interval or step test,
    or with the modes of the section."""
    code = ("import sys, cloudbench.cli, cloudbench.report.build, cloudbench.workloads.echo.aggregates\n"
            "print([m for m in ('scipy.stats', 'scipy.signal', 'scipy.ndimage', 'asyncssh') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_a_one_shot_runs_page_imports_matplotlib_and_no_analysis_it_does_not_show(tmp_path: Path) -> None:
    code = """
import sys
from pathlib import Path
from cloudbench.report.build import build_report
from cloudbench.report.html import write_html
from cloudbench.store.rundir import RunDir
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
values = {("rtt_p50_us", "cross_zone"): normal_values(5, 500.0, 0.05, 1)}
camp = make_campaign(Path(sys.argv[1]), "c", [FakeRun(values)])
run = RunDir(next(camp.glob("*/manifest.json")).parent)
page, *_ = write_html(run, build_report(run))
assert page.is_file()
"""
    assert loaded(code, str(tmp_path)) == ["matplotlib"]  # the page's figures, nothing else of HEAVY


def test_a_report_without_its_page_imports_no_matplotlib(tmp_path: Path) -> None:
    """`cloudbench report` writes report.json in a forked child and imports the page's modules beside
    it (outputs.write_outputs): `--no-html` asks for no page, and imports no matplotlib."""
    code = """
import sys
from pathlib import Path
from typer.testing import CliRunner
from cloudbench.cli import app
from cloudbench.testing.fake_results import FakeRun, make_campaign, normal_values
values = {("rtt_p50_us", "cross_zone"): normal_values(5, 500.0, 0.05, 1)}
camp = make_campaign(Path(sys.argv[1]), "c", [FakeRun(values)])
r = CliRunner().invoke(app, ["report", str(camp), "--no-html", "--json"])
assert r.exit_code == 0 and '"schema"' in r.output, r.output
"""
    assert loaded(code, str(tmp_path)) == []
    with_page = code.replace('"--no-html", ', "").replace(
        "assert r.exit_code", "assert any(camp.glob('*/report/index.html')) and r.exit_code")
    assert loaded(with_page, str(tmp_path / "page")) == ["matplotlib"]


def test_confirm_diurnal_and_changes_import_no_workload_kind_and_changes_no_matplotlib() -> None:
    """`confirm` imported report.files for the name of its directory, and with it every workload kind's
    controller (scipy.stats, asyncssh, the spec models): 0.4 s of a week's `confirm`; `compare --changes`
    imported them with report.compare's COMPARE_DIR, and matplotlib with report.confirm's fmt_value."""
    code = ("import sys, cloudbench.cli, cloudbench.report.confirm, cloudbench.report.diurnal, "
            "cloudbench.report.changes, cloudbench.report.changes_render")
    probe = f"{code}\nprint([m for m in ('cloudbench.workloads', 'asyncssh') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=180,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_compare_changes_imports_no_matplotlib() -> None:
    code = "import sys, cloudbench.cli, cloudbench.report.changes, cloudbench.report.changes_render"
    probe = f"{code}\nprint('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=180,
                         check=True)
    assert out.stdout.strip() == "False"


def test_confirm_refuses_a_bad_option_value_before_loading_its_analysis() -> None:
    """`confirm --error 5` took ~9 s under load to say the value was wrong: ``cloudbench.ConfirmParams``
    (the analysis, statsmodels with it) loaded before its arguments were checked."""
    code = """
from typer.testing import CliRunner
from cloudbench.cli import app
r = CliRunner().invoke(app, ["confirm", "nowhere", "--error", "5"])
assert r.exit_code == 2 and "--error '5'" in r.output, r.output
"""
    assert loaded(code) == []
