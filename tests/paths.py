"""Paths the tests read: the repository root, the example specs, recorded tool output."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
EXPERIMENTS = ROOT / "experiments"
QUICKSTART = EXPERIMENTS / "quickstart.yaml"
