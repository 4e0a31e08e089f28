"""The token-bucket drain workload's report section: each drain's rates, time to empty, budget and refill."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from cloudbench.analysis.tokenbucket import (
    UTA_WINDOW_S,
    DrainEstimate,
    Estimate,
    RefillEstimate,
    estimate_drain,
    estimate_refill,
)
from cloudbench.core.blocks import Block, print_blocks, warning
from cloudbench.core.tables import titled_table
from cloudbench.spec.vmtypes import expected_goodput
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.throughput.data import MBIT, RunFacts, Transfer, load_transfers, trend_warnings
from cloudbench.workloads.throughput.report import fmt_cell, series_points, warning_lines

TABLES = ("drains",)


@dataclass
class DrainResult:
    """The drain (and optional refill) estimates of one throughput series."""
    series: Transfer
    first: DrainEstimate
    refill: RefillEstimate | None


def drain_results(series: list[Transfer], spec_w: dict[str, Any]) -> list[DrainResult]:
    """Estimate the drain and refill of each series with the workload's window and factor."""
    out: list[DrainResult] = []
    interval = float(spec_w.get("interval", 1.0))
    w = max(1, round(float(spec_w.get("window", UTA_WINDOW_S)) / interval))
    factor = float(spec_w.get("factor", 0.75))
    for s in series:
        first = estimate_drain(*s.part(0), window_intervals=w, factor=factor)
        refill = None
        if 1 in s.bursts:
            _, t1a, _ = s.part(0)
            t0b, t1b, nb = s.part(1)
            rest = float(t0b[0] - t1a[-1]) if len(t0b) and len(t1a) else math.nan
            refill = estimate_refill(first, t0b, t1b, nb, rest)
        out.append(DrainResult(s, first, refill))
    return out


def _e(est: Estimate | None, scale: float, name: str) -> dict[str, float]:
    if est is None:
        return {name: math.nan, f"{name}_sd": math.nan, f"{name}_ci_low": math.nan,
                f"{name}_ci_high": math.nan}
    return {name: est.value / scale, f"{name}_sd": est.sd / scale,
            f"{name}_ci_low": est.low / scale, f"{name}_ci_high": est.high / scale}


def drain_rows(results: list[DrainResult], facts: RunFacts) -> list[dict[str, Any]]:
    """The report rows of the drain results, one per series."""
    rows: list[dict[str, Any]] = []
    for d in results:
        s, f = d.series, d.first
        row: dict[str, Any] = {
            "repetition": s.repetition, "trial": s.trial, "src": s.src, "dst": s.dst,
            "direction": s.direction, "vm_type": facts.vm_type(s.repetition, s.src),
            "side": s.side, "drained": f.drained, "window_intervals": f.window_intervals,
            **_e(f.high, MBIT, "high_mbps"), **_e(f.low, MBIT, "low_mbps"),
            **_e(f.time_to_empty, 1.0, "time_to_empty_s"), **_e(f.budget, MBIT, "budget_mbit"),
            "volume_before_mbit": f.volume_before_bits / MBIT,
            "high_rate_sd_mbps": f.high_rate_sd / MBIT, "low_rate_sd_mbps": f.low_rate_sd / MBIT,
            "rest_s": d.refill.rest_s if d.refill else math.nan,
            **_e(d.refill.refill if d.refill else None, MBIT, "refill_mbps"),
            "refill_saturated": bool(d.refill.saturated) if d.refill else False,
            "notes": "; ".join(f.notes + (d.refill.notes if d.refill else [])),
        }
        prof = facts.profile(s.repetition, s.src)
        if prof is not None and prof.shaping == "token_bucket":
            exp = expected_goodput(prof, "tcp")
            row.update(expected_high_mbps=exp["high_rate"] / MBIT,
                       expected_low_mbps=exp["low_rate"] / MBIT,
                       expected_time_to_empty_s=exp["time_to_empty"],
                       expected_budget_mbit=exp["budget_bits"] / MBIT,
                       expected_refill_mbps=exp["refill_rate"] / MBIT)
        rows.append(row)
    return rows


def _pm(row: dict[str, Any], key: str, digits: int = 1) -> str:
    """value ± SD of its draws (the 95 % interval is in the CSV/JSON)."""
    v, sd = row.get(key), row.get(f"{key}_sd")
    if not isinstance(v, float) or not math.isfinite(v):
        return "-"
    if isinstance(sd, float) and math.isfinite(sd):
        return f"{v:.{digits}f} ±{sd:.{digits}f}"
    return f"{v:.{digits}f}"


def section(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> dict[str, Any]:
    """The report section of one tokenbucket workload (``w``: its spec entry)."""
    facts = RunFacts(manifest)
    series = load_transfers(run, w["name"])
    out: dict[str, Any] = {"kind": w["kind"], "unit": "Mbit/s",
                           "rows": int(sum(len(s.burst) for s in series))}
    warnings = trend_warnings(series, facts, w["name"])
    out["drains"] = drain_rows(drain_results(series, w), facts)
    for d in out["drains"]:
        if not d["drained"]:
            warnings.append(f"{w['name']}: {d['src']}→{d['dst']} ({d['trial']}) did not "
                            "drain: no token bucket, or a budget larger than max_duration "
                            "allows")
    out["warnings"] = warnings
    # the rate curve of each drain (bursts 0 and 1; times from the start of the first,
    # the origin of time_to_empty_s), for the HTML report's figure
    out["series"] = series_points(series, facts)
    return out


def views(name: str, sec: dict[str, Any]) -> list[Block]:
    """A tokenbucket section's table (a row per drain, the configured truth under it when known),
    its notes and warnings."""
    t = titled_table(f"{name}: token-bucket drains (rates Mbit/s, budget Mbit, times s; "
                     "± SD of noise, drift and resolution; 95 % intervals in the CSV/JSON)",
                     ("pair", "vm_type", "drained", "high", "low", "empty after", "budget", "rest", "refill"),
                     left=("pair", "vm_type"), short={"vm_type": "vm", "drained": "dr."})
    for r in sec.get("drains", []):
        t.add_row(*map(Text, (f"{r['src']}→{r['dst']}", r["vm_type"], fmt_cell(r["drained"]),
                              _pm(r, "high_mbps"), _pm(r, "low_mbps"), _pm(r, "time_to_empty_s", 2),
                              _pm(r, "budget_mbit", 0), fmt_cell(r["rest_s"], 1), _pm(r, "refill_mbps"))))
        if "expected_high_mbps" in r:
            t.add_row(*map(Text, ("  configured", "", "", fmt_cell(r["expected_high_mbps"]),
                                  fmt_cell(r["expected_low_mbps"]), fmt_cell(r["expected_time_to_empty_s"], 2),
                                  fmt_cell(r["expected_budget_mbit"], 0), "", fmt_cell(r["expected_refill_mbps"]))))
    out: list[Block] = [t]
    # what limits a drain's estimates (a short test, no clean shift, a refill bound): warnings
    out += [warning(f"{r['src']}→{r['dst']} ({r['trial']}): {r['notes']}") for r in sec.get("drains", [])
            if r.get("notes")]
    return out + warning_lines(sec)


def render(name: str, sec: dict[str, Any], console: Console) -> None:
    """Print a tokenbucket section (:func:`views`)."""
    print_blocks(views(name, sec), console)
