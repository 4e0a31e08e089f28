"""`cloudbench --help` and every command's start stay cheap: importing the CLI loads no analysis.

Every `cloudbench` process (and the tests start dozens) paid ~2 s of CPU for statsmodels, pandas,
scipy, polars, DuckDB and asyncssh before it parsed its arguments (6-9 s of wall time on a busy
2-core machine): the progress display imported the workloads for two annotations, and `confirm`
imported its analysis at module level. A command loads what it uses when it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

HEAVY = ("statsmodels", "pandas", "scipy", "polars", "duckdb", "asyncssh", "pulumi",
         "cloudbench.workloads", "cloudbench.analysis", "cloudbench.runner")


def test_importing_the_cli_loads_no_analysis_workload_or_remote_library() -> None:
    code = ("import json, sys, cloudbench.cli; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout) == []


def test_an_echo_report_loads_neither_duckdb_nor_asyncio(tmp_path: Path) -> None:
    """``cloudbench report`` of an echo run starts its scan without the libraries other kinds need
    (DuckDB for throughput, asyncio for running trials: ~90 ms before the scan could start)."""
    from cloudbench.testing.fake_results import write_echo_run

    run = write_echo_run(tmp_path / "c", repetitions=1, rounds=400)  # here: the report's process starts clean
    code = ("import json, sys, cloudbench.cli; from cloudbench.report.build import build_report; "
            "from pathlib import Path; from cloudbench.store.rundir import RunDir; "
            f"build_report(RunDir(Path({str(run.path)!r}))); "
            "print(json.dumps([m for m in ('duckdb', 'asyncio') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == []
