"""Run every benchmark in bench/ in turn, printing their figures (needs root).

Usage: .venv/bin/python bench/run_all.py [NAME ...]   e.g. `.venv/bin/python bench/run_all.py testbed echo`
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    wanted = set(sys.argv[1:])
    scripts = sorted(HERE.glob("bench_*.py"))
    if wanted:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    failed: list[str] = []
    for script in scripts:
        print(f"=== {script.stem} ===", flush=True)
        if subprocess.run([sys.executable, str(script)], check=False).returncode != 0:
            failed.append(script.stem)
        print(flush=True)
    if failed:
        print("targets missed or errors in: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
