"""A run directory on disk, and finding runs under a campaign directory.

Layout::

    results/<campaign>/<run-id>/manifest.json          what ran, where, with what (:mod:`.manifest`)
    results/<campaign>/<run-id>/<workload>/*.parquet   observations, one row each (:mod:`.parquet`)
    results/<campaign>/<run-id>/summaries.parquet      one value per (repetition, workload, metric,
                                                       group) (:mod:`.summaries`)
    results/<campaign>/<run-id>/report/                report.json, CSV tables, figures

Every workload reduces each repetition to rows of ``summaries.parquet``; the
repetition analyzer (``cloudbench confirm``) reads only those rows and the
manifest. The versions of every file are in :mod:`.formats`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cloudbench.core.files import sha256_file, utc_stamp
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest, load_manifest


def new_run_id() -> str:
    """A run id: the UTC start time, sortable, and a random suffix."""
    return utc_stamp(basic=True) + "-" + secrets.token_hex(2)


@dataclass(order=True)
class RunDir:
    """One run of a campaign on disk (``results/<campaign>/<run-id>``).

    Runs sort by path, so by run id, which starts with a UTC timestamp.
    """

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def summaries_path(self) -> Path:
        return self.path / "summaries.parquet"

    def manifest(self) -> Manifest:
        return load_manifest(self.manifest_path)

    def verify(self) -> list[str]:
        """Files whose checksum differs from the manifest's (empty when all is well)."""
        bad: list[str] = []
        for rel, digest in self.manifest().files.items():
            p = self.path / rel
            if not p.exists():
                bad.append(f"{rel}: missing")
            elif sha256_file(p) != digest:
                bad.append(f"{rel}: checksum mismatch")
        return bad


def find_runs(path: Path) -> list[RunDir]:
    """Runs under ``path``: a campaign directory (all its runs) or one run directory."""
    path = Path(path)
    if not path.exists():
        raise ResultError(str(path), "no such directory")
    if (path / "manifest.json").exists():
        return [RunDir(path)]
    runs = sorted(RunDir(p.parent) for p in path.glob("*/manifest.json"))
    if not runs:
        raise ResultError(str(path), "holds no cloudbench run (no */manifest.json)")
    return runs


def open_results(path: Path, run_id: str | None = None) -> RunDir:
    """One run under ``path`` (a campaign or a run directory): ``run_id``, else the newest."""
    runs = find_runs(path)
    if run_id is None:
        return runs[-1]
    for r in runs:
        if r.run_id == run_id:
            return r
    raise ResultError(str(path), f"no run {run_id!r}; runs: {', '.join(r.run_id for r in runs)}")


def iter_observation_files(run: RunDir, workload: str) -> Iterator[Path]:
    """A workload's Parquet files in the run, in trial order."""
    yield from sorted((run.path / workload).glob("*.parquet"))

