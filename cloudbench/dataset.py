"""A campaign's results as a dataset, for notebooks: ``cloudbench.open("results/<campaign>")``.

::

    import cloudbench

    camp = cloudbench.open("results/quickstart")
    camp.runs                      # [Run(run_id, status, …)], oldest first
    camp.trials()                  # pandas: one row per trial of every run
    obs = camp.observations("echo")          # a DuckDB relation: nothing is loaded yet
    obs.filter("\\"group\\" = 'cross_region' AND NOT warmup") \\
       .aggregate("src, dst, median(rtt_ns) / 1e3 AS p50_us").df()
    camp.summaries()               # pandas: the per-repetition values confirm pools
    camp.table("echo", "groups")   # pandas: one table of the report (newest run)

Observations stay in the Parquet files until asked for: ``observations`` is a
lazy DuckDB relation over every run's files of that workload (filter, aggregate,
then ``.df()``, ``.arrow()`` or ``.fetchnumpy()`` the small result). Echo files
written before schema 2 lack the ``run_id``, ``trial`` and ``group`` columns; the
relation adds them from the file names and the manifests, so old and new runs read
the same.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from cloudbench.core.topology import HostSpec, classify_pair
from cloudbench.engine import Engine, sql_ident, sql_list
from cloudbench.errors import ResultError
from cloudbench.report.build import build_report
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir, find_runs, iter_observation_files
from cloudbench.store.summaries import read_summaries


class RunningRunWarning(UserWarning):
    """A run still running was skipped (or every run is running): its tables are incomplete."""


@dataclass(frozen=True)
class Run:
    """One run of the campaign: its directory and manifest."""

    run_dir: RunDir
    manifest: Manifest

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def status(self) -> str:
        return self.manifest.status

    @property
    def path(self) -> Path:
        return self.run_dir.path

    def report(self) -> dict[str, Any]:
        """The run's report (what ``report.json`` holds), computed from its files."""
        return build_report(self.run_dir)

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, status={self.status!r}, repetitions={len(self.manifest.repetitions)})"


class Campaign:
    """The runs under a campaign directory (or one run directory), with one query engine.

    Close it (or use ``with``) to release the engine's spill directory.
    """

    def __init__(self, path: Path | str, *, threads: int | None = None, memory_limit: str | None = None) -> None:
        self.path = Path(path)
        self.runs = [Run(r, r.manifest()) for r in find_runs(self.path)]
        self.engine = Engine(threads=threads, memory_limit=memory_limit)
        self._reports: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.engine.close()

    def __repr__(self) -> str:
        return f"Campaign({str(self.path)!r}, runs={len(self.runs)})"

    def run(self, run_id: str | None = None) -> Run:
        """The run ``run_id``, or the newest."""
        if run_id is None:
            return self.runs[-1]
        for r in self.runs:
            if r.run_id == run_id:
                return r
        raise ResultError(str(self.path), f"no run {run_id!r}; runs: {', '.join(r.run_id for r in self.runs)}")

    def workloads(self) -> list[str]:
        """Names of the workloads any run measured."""
        seen: dict[str, None] = {}
        for r in self.runs:
            for w in r.manifest.workloads():
                seen.setdefault(w["name"], None)
        return list(seen)

    def repetitions(self) -> pd.DataFrame:
        """One row per repetition of every run: times, status, provider, stack and hosts."""
        rows = [{"run_id": r.run_id, "repetition": rep.index, "status": rep.status, "provider": rep.provider,
                 "stack": rep.stack, "started_utc": rep.started_utc, "ended_utc": rep.ended_utc,
                 "hosts": len(rep.hosts), "deploy_s": rep.deploy_s}
                for r in self.runs for rep in r.manifest.repetitions]
        return _frame(rows, ["run_id", "repetition", "status", "provider", "stack", "started_utc", "ended_utc",
                             "hosts", "deploy_s"], ("started_utc", "ended_utc"))

    def hosts(self) -> pd.DataFrame:
        """One row per host of every repetition: its labels and address (fresh hosts each repetition)."""
        rows = [{"run_id": r.run_id, "repetition": rep.index, "host": h.name, "address": h.address, **h.labels}
                for r in self.runs for rep in r.manifest.repetitions for h in rep.hosts]
        return _frame(rows, ["run_id", "repetition", "host", "address"])

    def trials(self) -> pd.DataFrame:
        """One row per trial of every run: workload, kind, repetition, status, rows, times, failures."""
        rows = [{"run_id": r.run_id, "trial": t.id, "repetition": t.repetition, "workload": t.workload,
                 "kind": t.kind, "status": t.status, "rows": t.rows, "started_utc": t.started_utc,
                 "ended_utc": t.ended_utc, "failures": len(t.failures)}
                for r in self.runs for t in r.manifest.trials]
        return _frame(rows, ["run_id", "trial", "repetition", "workload", "kind", "status", "rows",
                             "started_utc", "ended_utc", "failures"], ("started_utc", "ended_utc"))

    def kinds(self) -> dict[str, list[str]]:
        """Each workload kind any run measured, with the names of its workloads."""
        out: dict[str, list[str]] = {}
        for r in self.runs:
            for w in r.manifest.workloads():
                names = out.setdefault(str(w.get("kind", "")), [])
                if w["name"] not in names:
                    names.append(w["name"])
        return out

    def _names(self, workload: str) -> list[str]:
        """A workload name as itself; a kind as the names of its workloads (``echo`` for hot, warm,
        cold); else the name alone (the caller's error then lists what exists)."""
        if workload in self.workloads():
            return [workload]
        return self.kinds().get(workload) or [workload]

    def _known(self) -> str:
        kinds = ", ".join(f"{k} ({', '.join(ns)})" for k, ns in self.kinds().items())
        return f"workloads: {', '.join(self.workloads()) or 'none'}; kinds: {kinds or 'none'}"

    def files(self, workload: str) -> list[Path]:
        """The Parquet files of ``workload`` (a name, or a kind: all its workloads) in every run,
        in run and trial order."""
        return [p for r in self.runs for name in self._names(workload)
                for p in iter_observation_files(r.run_dir, name)]

    def observations(self, workload: str = "echo") -> duckdb.DuckDBPyRelation:
        """Every row ``workload`` measured, in every run, as a lazy DuckDB relation.

        ``workload``: a workload's name, or a kind (``echo`` for workloads named hot, warm and
        cold): a kind with several workloads gives all their rows with a ``workload`` column.
        Columns are the workload's Parquet schema plus ``run_id`` and ``trial`` (and,
        for echo, the pair's latency ``group``), whatever schema version wrote them.
        """
        names = self._names(workload)
        files = self.files(workload)
        if not files:
            raise ResultError(str(self.path), f"no observations of workload {workload!r} ({self._known()})")
        eng = self.engine
        file_rows = pa.table({"filename": [str(p) for p in files],
                              "f_run_id": [p.parent.parent.name for p in files],
                              "f_trial": [p.stem for p in files],
                              "f_workload": [p.parent.name for p in files]})
        ftab = eng.table("files", file_rows)
        base = (f"SELECT * FROM read_parquet({sql_list([str(p) for p in files])}, union_by_name = true, "
                "filename = true)")
        cols = eng.sql(f"DESCRIBE {base}").fetchall()
        columns = [c[0] for c in cols if c[0] != "filename"]
        select = [f"o.{sql_ident(c)}" for c in columns if c not in ("run_id", "trial", "group")]
        select.insert(0, "coalesce(o.run_id, f.f_run_id) AS run_id" if "run_id" in columns else "f.f_run_id AS run_id")
        select.insert(2 if "repetition" in columns else 1,
                      "coalesce(o.trial, f.f_trial) AS trial" if "trial" in columns else "f.f_trial AS trial")
        if len(names) > 1:
            select.insert(0, "f.f_workload AS workload")
        joins = f"JOIN {ftab} f ON o.filename = f.filename"
        if {"src", "dst", "repetition"} <= set(columns) and set(names) <= self._echo_workloads():
            ltab = eng.table("pair_groups", self._pair_groups())
            grp = 'coalesce(o."group", l.l_group)' if "group" in columns else "l.l_group"
            select.insert(select.index('o."dst"') + 1 if 'o."dst"' in select else len(select), f'{grp} AS "group"')
            joins += (f" LEFT JOIN {ltab} l ON l.l_run_id = coalesce({'o.run_id' if 'run_id' in columns else 'NULL'}, "
                      "f.f_run_id) AND l.l_repetition = o.repetition AND l.l_src = o.src AND l.l_dst = o.dst")
        return eng.sql(f"SELECT {', '.join(select)} FROM ({base}) o {joins}")

    def summaries(self) -> pd.DataFrame:
        """The per-repetition summaries of every run (what ``cloudbench confirm`` pools), with run_id."""
        frames = []
        for r in self.runs:
            t = read_summaries(r.run_dir).to_pandas()
            if "run_id" not in t.columns:
                t.insert(0, "run_id", r.run_id)
            frames.append(t)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def report(self, run_id: str | None = None) -> dict[str, Any]:
        """The report of one run (the newest by default), computed once per campaign object."""
        run = self.run(run_id)
        if run.run_id not in self._reports:
            self._reports[run.run_id] = run.report()
        return self._reports[run.run_id]

    def finished_run(self, include_running: bool = False) -> Run:
        """The newest run, skipping runs still running (a :class:`RunningRunWarning` says so)
        unless ``include_running``; the newest run when every run is running."""
        newest = self.runs[-1]
        if include_running or newest.status != "running":
            return newest
        done = [r for r in self.runs if r.status != "running"]
        if not done:
            warnings.warn(f"{self.path}: every run is still running; reading the newest, "
                          f"{newest.run_id}, as it is so far", RunningRunWarning, stacklevel=3)
            return newest
        warnings.warn(f"{self.path}: run {newest.run_id} is still running; reading {done[-1].run_id}, "
                      "the newest finished run (include_running=True reads the running one)",
                      RunningRunWarning, stacklevel=3)
        return done[-1]

    def tables(self, workload: str, run_id: str | None = None,
               include_running: bool = False) -> dict[str, pd.DataFrame]:
        """Every table of one workload's report section, as DataFrames.

        ``workload``: a name or a kind (a kind with several workloads: their tables concatenated,
        with a ``workload`` column). ``run_id``: one run; by default the newest finished run (a
        run still running is skipped with a :class:`RunningRunWarning`, or read with
        ``include_running=True``)."""
        rid = run_id if run_id is not None else self.finished_run(include_running).run_id
        report = self.report(rid)["workloads"]
        names = [n for n in self._names(workload) if n in report]
        if not names:
            raise ResultError(str(self.path), f"the report of run {rid} has no workload {workload!r} "
                                              f"({self._known()})")
        per = [{k: pd.DataFrame(v) for k, v in report[n].items()
                if isinstance(v, list) and (not v or isinstance(v[0], dict))} for n in names]
        if len(names) == 1:
            return per[0]
        out: dict[str, pd.DataFrame] = {}
        for key in dict.fromkeys(k for t in per for k in t):
            frames = [t[key].assign(workload=n) for n, t in zip(names, per, strict=True) if key in t]
            df = pd.concat(frames, ignore_index=True)
            out[key] = df[["workload", *[c for c in df.columns if c != "workload"]]]
        return out

    def table(self, workload: str, name: str, run_id: str | None = None,
              include_running: bool = False) -> pd.DataFrame:
        """One table of a workload's report section (``groups``, ``pairs``, ``windows``, …)."""
        tables = self.tables(workload, run_id, include_running)
        if name not in tables:
            raise ResultError(str(self.path), f"workload {workload!r} has no table {name!r} "
                                              f"(tables: {', '.join(tables)})")
        return tables[name]

    def _echo_workloads(self) -> set[str]:
        return {w["name"] for r in self.runs for w in r.manifest.workloads("echo")}

    def _pair_groups(self) -> pa.Table:
        """(run, repetition, src, dst) -> latency group, from the manifests' labels."""
        cols: dict[str, list[Any]] = {"l_run_id": [], "l_repetition": [], "l_src": [], "l_dst": [], "l_group": []}
        for r in self.runs:
            specs = {(rep, name): HostSpec(name, lab["provider"], lab["region"], lab["zone"], lab["subnet"],
                                           lab["vm_type"])
                     for (rep, name), lab in r.manifest.labels().items()}
            for (rep, a), ha in specs.items():
                for (rep2, b), hb in specs.items():
                    if rep2 == rep:
                        for k, v in zip(cols, (r.run_id, rep, a, b, classify_pair(ha, hb).value), strict=True):
                            cols[k].append(v)
        return pa.table(cols)


def _frame(rows: list[dict[str, Any]], columns: Sequence[str], times: Sequence[str] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(dict.fromkeys([*columns, *(k for r in rows for k in r)])))
    for c in times:
        df[c] = pd.to_datetime(df[c], utc=True, errors="coerce")
    return df


def open_campaign(path: Path | str, *, threads: int | None = None, memory_limit: str | None = None) -> Campaign:
    """The campaign (or run) directory ``path`` as a :class:`Campaign`."""
    return Campaign(path, threads=threads, memory_limit=memory_limit)
