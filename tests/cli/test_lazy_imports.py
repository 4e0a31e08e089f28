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

from tests.paths import ROOT

HEAVY = ("statsmodels", "pandas", "scipy", "polars", "duckdb", "asyncssh", "pulumi",
         "cloudbench.workloads", "cloudbench.analysis", "cloudbench.runner")


def test_importing_the_cli_loads_no_analysis_workload_or_remote_library() -> None:
    code = ("import json, sys, cloudbench.cli; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout) == []
