"""Reports from the result store: tables for people, CSV and JSON for programs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cloudbench.analysis.latency import (
    PERCENTILES,
    group_table,
    load_echo,
    pair_table,
    pct_label,
    quorum_table,
    spec_quorums,
    windowed_means,
)
from cloudbench.analysis.levelshift import echo_level_shifts
from cloudbench.report_wan import build_paths, render_wan, write_wan
from cloudbench.results import RunDir, write_csv
from cloudbench.ui import titled_table

REPORT_DIR = "report"


def build_report(run: RunDir) -> dict[str, Any]:
    manifest = run.manifest()
    rep: dict[str, Any] = {
        "campaign": manifest.get("campaign"),
        "run_id": manifest.get("run_id"),
        "status": manifest.get("status"),
        "started_utc": manifest.get("started_utc"),
        "ended_utc": manifest.get("ended_utc"),
        "seed": manifest.get("seed"),
        "repetitions": len(manifest.get("repetitions", [])),
        # files changed or lost since the run wrote them (checksums in the manifest)
        "damaged": run.verify(),
        "failures": [
            {"trial": t["id"], **f} for t in manifest.get("trials", []) for f in t.get("failures", [])
        ],
        "workloads": {},
    }
    for w in manifest.get("spec", {}).get("workloads", []):
        if w.get("kind") == "traceroute":
            rep.setdefault("paths", {})[w["name"]] = build_paths(run, manifest, w)
        if w.get("kind") in ("throughput", "tbdrain"):
            from cloudbench.throughput_report import section

            rep["workloads"][w["name"]] = section(run, manifest, w)
            continue
        if w.get("kind") != "echo":
            continue
        d = load_echo(run, manifest, w["name"])
        rep["workloads"][w["name"]] = {
            "kind": "echo",
            "unit": "us",
            "rows": len(d),
            "groups": group_table(d),
            "quorums": quorum_table(d, spec_quorums(manifest, w["name"])),
            "windows": windowed_means(d, float(w.get("window", 30.0))),
            "pairs": pair_table(d),
        }
        sec = rep["workloads"][w["name"]]
        sec["level_shifts"] = echo_level_shifts(d, float(w.get("window", 30.0)), sec["windows"])
        sec["workers"] = echo_worker_health(manifest, w["name"])
    return rep


def echo_worker_health(manifest: dict[str, Any], workload: str) -> dict[str, Any] | None:
    """What the echo workers said about themselves: their CPU share and rounds sent late.

    A worker short of CPU sends its rounds late, and stamps replies late where the
    kernel does not stamp them, so these say how far its RTTs can be trusted. CPU
    is the worker's whole run (server included) over its wall time; a round is
    late when it left more than 1 ms (or half an interval) after its scheduled
    time; ``kernel_stamps``/``user_stamps`` count the echoes stamped by the kernel
    on arrival and by the worker when it read them. None when no trial reported.
    """
    worst: tuple[float, str, str] | None = None
    late = rounds = lag_us = kernel = user = 0
    for t in manifest.get("trials", []):
        if t.get("workload") != workload:
            continue
        for host, s in (t.get("stats") or {}).items():
            wall = float(s.get("wall_s") or 0.0)
            if wall > 0:
                pct = 100.0 * float(s.get("cpu_s") or 0.0) / wall
                if worst is None or pct > worst[0]:
                    worst = (pct, host, str(t.get("id")))
            late += int(s.get("late_sends") or 0)
            rounds += int(s.get("rounds") or 0)
            lag_us = max(lag_us, int(s.get("max_send_lag_us") or 0))
            kernel += int(s.get("kernel_stamps") or 0)
            user += int(s.get("user_stamps") or 0)
    if worst is None:
        return None
    return {"cpu_pct_max": round(worst[0], 2), "cpu_pct_max_host": worst[1],
            "cpu_pct_max_trial": worst[2], "rounds": rounds, "late_sends": late,
            "max_send_lag_us": lag_us, "kernel_stamps": kernel, "user_stamps": user}


def _stamps(health: dict[str, Any]) -> str:
    """How the echoes were stamped; empty for workers that did not count it (worker 1)."""
    kernel, user = int(health.get("kernel_stamps") or 0), int(health.get("user_stamps") or 0)
    if not kernel + user:
        return ""
    if not user:
        return f"; all {kernel} echoes stamped by the kernel"
    return (f"; {user} of {kernel + user} echoes ({user / (kernel + user):.2%}) stamped on read, "
            "not by the kernel")


def write_report(run: RunDir, report: dict[str, Any]) -> list[Path]:
    """CSV per table and one JSON beside the results; returns the paths written."""
    out = run.path / REPORT_DIR
    out.mkdir(exist_ok=True)
    written = [out / "report.json"]
    (out / "report.json").write_text(json.dumps(_clean(report), indent=2) + "\n")
    for wname, w in report["workloads"].items():
        for table in ("groups", "quorums", "windows", "pairs", "trials", "asymmetry", "cv_rmse",
                      "drains"):
            path = out / f"{wname}_{table}.csv"
            if write_csv(path, w.get(table) or []):
                written.append(path)
    written += write_wan(run, report, out)
    return written


def _clean(x: Any) -> Any:
    """JSON has no NaN/inf: write them as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}"
    return str(v)


def _distribution_table(console: Console, title: str, rows: list[dict[str, Any]], labels: list[str]) -> Table:
    """Table-1 style: one row per group; transposed (groups as columns) when narrow."""
    cols = ["count", "timeouts", "mean", *[pct_label(p) for p in PERCENTILES], "max"]
    wide = console.width >= 16 * (len(cols) + len(labels)) // 2 + 40
    t = titled_table(title)
    if wide:
        for c in labels:
            t.add_column(c, no_wrap=True)
        for c in cols:
            t.add_column(c, justify="right", no_wrap=True)
        for r in rows:
            t.add_row(*[str(r[c]) for c in labels], *[_fmt(r[c]) for c in cols])
        return t
    t.add_column("", no_wrap=True)
    for r in rows:
        t.add_column(" ".join(str(r[c]) for c in labels), justify="right", no_wrap=True)
    for c in cols:
        t.add_row(c, *[_fmt(r[c]) for r in rows])
    return t


def render(report: dict[str, Any], console: Console, windows: bool = False, pairs: bool = False) -> None:
    console.print(
        f"[bold]{report['campaign']}[/] run {report['run_id']} — {report['status']}, "
        f"{report['repetitions']} repetition(s), seed {report['seed']}"
    )
    for wname, w in report["workloads"].items():
        if w.get("kind") in ("throughput", "tbdrain"):
            from cloudbench.throughput_report import render as render_throughput

            render_throughput(wname, w, console)
            continue
        console.print(_distribution_table(console, f"{wname}: RTT by latency group (µs)", w["groups"], ["group"]))
        if w["quorums"]:
            console.print(_distribution_table(
                console, f"{wname}: quorum latency (µs; k-th fastest reply per round)", w["quorums"],
                ["quorum", "group"]))
        health = w.get("workers")
        if health:
            share = health["late_sends"] / health["rounds"] if health["rounds"] else 0.0
            console.print(
                f"{escape(wname)}: workers used at most {health['cpu_pct_max']:.1f} % of a core "
                f"({escape(health['cpu_pct_max_host'])}, {escape(health['cpu_pct_max_trial'])}); "
                f"{health['late_sends']} of {health['rounds']} rounds ({share:.2%}) left late, "
                f"by at most {health['max_send_lag_us'] / 1000:.1f} ms{_stamps(health)}")
        if windows and w["windows"]:
            cols = ("repetition", "trial", "start_s", "group", "count", "mean")
            wt = titled_table(f"{wname}: windowed mean RTT (µs)", cols)
            for r in w["windows"]:
                wt.add_row(*[_fmt(r[c]) for c in cols])
            console.print(wt)
        if pairs and w["pairs"]:
            pair_cols = ("src", "dst", "group", "count", "timeouts", "mean", "p50", "p99", "max")
            pt = titled_table(f"{wname}: per pair (µs)", pair_cols)
            for r in w["pairs"]:
                pt.add_row(*[_fmt(r[c]) for c in pair_cols])
            console.print(pt)
    render_wan(report, console)
    if report.get("damaged"):
        console.print(f"[red]{len(report['damaged'])} file(s) differ from the manifest's checksums:[/]")
        for d in report["damaged"]:
            console.print(escape(f"  {d}"), highlight=False)
    if report["failures"]:
        console.print(f"[yellow]{len(report['failures'])} host failure(s):[/]")
        for f in report["failures"]:
            code = "no exit code" if f.get("exit_code") is None else f"exit {f['exit_code']}"
            console.print(escape(f"  {f['trial']} {f['host']}: {f.get('reason') or code}  `{f['command'][:80]}`"),
                          highlight=False)
