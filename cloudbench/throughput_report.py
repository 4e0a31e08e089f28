"""Throughput and token-bucket results: load, tabulate, summarise, render.

Reads the ``throughput`` Parquet files of a run (see
:mod:`cloudbench.workloads.throughput`) and applies the pure functions of
:mod:`cloudbench.analysis.throughput` and :mod:`cloudbench.analysis.tokenbucket`.
Produces the report section of ``throughput`` and ``tbdrain`` workloads and the
per-repetition rows of ``summaries.parquet`` that ``cloudbench confirm`` reads.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray
from rich.console import Console

from cloudbench.analysis.throughput import (
    asymmetry,
    capacity_lower_bound,
    cv_rmse,
    detect_level_shift,
    falling_trend,
    full_mask,
    rates_of,
    series_stats,
)
from cloudbench.analysis.tokenbucket import (
    UTA_WINDOW_S,
    DrainEstimate,
    Estimate,
    RefillEstimate,
    estimate_drain,
    estimate_refill,
)
from cloudbench.results import RunDir, iter_observation_files, read_parquet
from cloudbench.shaping import expected_goodput
from cloudbench.topology import HostSpec, classify_pair
from cloudbench.ui import titled_table
from cloudbench.vmtypes import VmTypeModel

KINDS = ("throughput", "tbdrain")
FloatArray = NDArray[np.float64]
MBIT = 1e6


@dataclass
class Series:
    """One direction of one trial: its report intervals in time order."""

    repetition: int
    trial: str
    src: str  # data sender
    dst: str
    direction: str
    tool: str
    protocol: str
    side: str
    burst: NDArray[np.int64]
    t_start: FloatArray  # s on the worker's clock
    t_end: FloatArray
    nbytes: FloatArray
    retrans: FloatArray  # nan where unknown
    lost: FloatArray
    packets: FloatArray

    def part(self, burst: int) -> tuple[FloatArray, FloatArray, FloatArray]:
        m = self.burst == burst
        return self.t_start[m], self.t_end[m], self.nbytes[m]

    @property
    def bursts(self) -> list[int]:
        return sorted({int(b) for b in self.burst})


def _num(col: list[Any]) -> FloatArray:
    return np.array([math.nan if v is None else float(v) for v in col], dtype=np.float64)


def load_series(run: RunDir, workload: str) -> list[Series]:
    out: list[Series] = []
    for path in iter_observation_files(run, workload):
        t = read_parquet(path, kind="throughput")
        d = {name: t.column(name).to_pylist() for name in t.column_names}
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, key in enumerate(zip(d["trial"], d["direction"], strict=True)):
            groups[key].append(i)
        for (trial, direction), idx in groups.items():
            order = sorted(idx, key=lambda i: (d["burst"][i], d["t_start_us"][i]))
            c = {name: [d[name][i] for i in order] for name in d}
            out.append(Series(
                repetition=int(c["repetition"][0]), trial=str(trial), src=str(c["src"][0]),
                dst=str(c["dst"][0]), direction=str(direction), tool=str(c["tool"][0]),
                protocol=str(c["protocol"][0]), side=str(c["side"][0]),
                burst=np.array(c["burst"], dtype=np.int64),
                t_start=_num(c["t_start_us"]) / 1e6, t_end=_num(c["t_end_us"]) / 1e6,
                nbytes=_num(c["bytes"]), retrans=_num(c["retrans"]), lost=_num(c["lost"]),
                packets=_num(c["packets"]),
            ))
    return out


class RunFacts:
    """Labels, shaping and timing of a run's hosts and trials, from the manifest."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self.hosts: dict[tuple[int, str], HostSpec] = {}
        self.shaping: dict[tuple[int, str], dict[str, Any] | None] = {}
        self.stack: dict[int, str] = {}
        for rep in manifest.get("repetitions", []):
            self.stack[int(rep["index"])] = str(rep.get("stack", ""))
            for h in rep.get("hosts", []):
                lab = h["labels"]
                key = (int(rep["index"]), h["name"])
                self.hosts[key] = HostSpec(h["name"], lab["provider"], lab["region"], lab["zone"],
                                           lab["subnet"], lab["vm_type"])
                self.shaping[key] = (h.get("facts") or {}).get("shaping")
        self.trial_start = {t["id"]: str(t.get("started_utc", "")) for t in manifest.get("trials", [])}

    def group(self, rep: int, src: str, dst: str) -> str:
        a, b = self.hosts.get((rep, src)), self.hosts.get((rep, dst))
        return classify_pair(a, b).value if a and b else "?"

    def vm_type(self, rep: int, host: str) -> str:
        h = self.hosts.get((rep, host))
        return h.vm_type if h else "?"

    def profile(self, rep: int, host: str) -> VmTypeModel | None:
        fact = self.shaping.get((rep, host))
        if not fact or not fact.get("profile"):
            return None
        return VmTypeModel.model_validate(fact["profile"])


def _mbit(v: float | None) -> float:
    return math.nan if v is None else v / MBIT


# -- throughput ------------------------------------------------------------------------------
def trial_rows(series: list[Series], facts: RunFacts, spec_w: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per series: distribution, loss, capacity bound (UDP), level shift.

    An on/off pattern is several bursts: its statistics cover the sending time
    only, and level shifts are sought in single-burst series only (a burst of a
    few seconds is too short to hold two levels).
    """
    rows: list[dict[str, Any]] = []
    for s in series:
        st = series_stats(s.nbytes, s.t_end - s.t_start)
        row: dict[str, Any] = {
            "repetition": s.repetition, "trial": s.trial, "src": s.src, "dst": s.dst,
            "direction": s.direction, "group": facts.group(s.repetition, s.src, s.dst),
            "intervals": st.n, "seconds": st.seconds, "mean_mbps": _mbit(st.mean_bps),
            "cov": st.cov, "p5_mbps": _mbit(st.percentiles["p5"]),
            "p50_mbps": _mbit(st.percentiles["p50"]), "p95_mbps": _mbit(st.percentiles["p95"]),
            "retrans": float(np.nansum(s.retrans)) if np.isfinite(s.retrans).any() else math.nan,
            "loss_pct": _loss_pct(s), "capacity_lb_mbps": math.nan,
            "shift_s": math.nan, "shift_volume_mb": math.nan, "shift_high_mbps": math.nan,
            "shift_low_mbps": math.nan, "expected_mbps": math.nan,
        }
        if s.protocol == "udp":
            caps = [capacity_lower_bound(*s.part(b)) for b in s.bursts]
            found = [c for c in caps if c is not None]
            row["capacity_lb_mbps"] = _mbit(max(found)) if found else math.nan
            row["target_mbps"] = _mbit(float(spec_w.get("udp_rate", math.nan)))
        if len(s.bursts) == 1:
            shift = detect_level_shift(s.t_start, s.t_end, s.nbytes)
            if shift is not None:
                row.update(shift_s=shift.time_s, shift_volume_mb=shift.volume_before_bits / 8e6,
                           shift_high_mbps=_mbit(shift.high_bps), shift_low_mbps=_mbit(shift.low_bps))
        prof = facts.profile(s.repetition, s.src)
        if prof is not None and prof.shaping == "cap":
            exp = expected_goodput(prof, s.protocol, payload=spec_w.get("length"))
            row["expected_mbps"] = _mbit(exp["rate"])
        rows.append(row)
    return rows


def _loss_pct(s: Series) -> float:
    ok = np.isfinite(s.lost) & np.isfinite(s.packets)
    if not ok.any() or np.sum(s.packets[ok]) <= 0:
        return math.nan
    return float(100.0 * np.sum(s.lost[ok]) / np.sum(s.packets[ok]))


def asymmetry_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per repetition and unordered host pair measured both ways: a→b vs b→a."""
    means: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for r in rows:
        means[(r["repetition"], r["src"], r["dst"])].append(r["mean_mbps"])
    out: list[dict[str, Any]] = []
    for (rep, a, b), fwd in sorted(means.items()):
        if a >= b or (rep, b, a) not in means:
            continue
        f, rv = float(np.mean(fwd)), float(np.mean(means[(rep, b, a)]))
        asym = asymmetry(f, rv)
        out.append({"repetition": rep, "a": a, "b": b, "a_to_b_mbps": f, "b_to_a_mbps": rv,
                    "ratio": asym.ratio, "relative_difference": asym.relative_difference})
    return out


def cv_rmse_rows(series: list[Series], facts: RunFacts) -> list[dict[str, Any]]:
    """CV_RMSE between zone pairs of one region pair (Persico et al. §5.6).

    Samples are paired by repetition (the mean of each zone pair's trials in that
    repetition) when two or more repetitions are shared; with a single one, by
    interval index within the first trial of each zone pair (the trials ran one
    after the other, not at the same time as in Persico et al.).
    """
    by_zone: dict[tuple[str, str], dict[tuple[str, str], list[Series]]] = defaultdict(
        lambda: defaultdict(list))
    for s in series:
        a, b = facts.hosts.get((s.repetition, s.src)), facts.hosts.get((s.repetition, s.dst))
        if a is None or b is None:
            continue
        by_zone[(a.region, b.region)][(a.zone, b.zone)].append(s)
    out: list[dict[str, Any]] = []
    for (ra, rb), zones in sorted(by_zone.items()):
        for (zx, sx), (zy, sy) in combinations(sorted(zones.items()), 2):
            reps = sorted({s.repetition for s in sx} & {s.repetition for s in sy})
            if len(reps) >= 2:
                x = [float(np.mean([_mean(s) for s in sx if s.repetition == r])) for r in reps]
                y = [float(np.mean([_mean(s) for s in sy if s.repetition == r])) for r in reps]
                method, n = "repetition means", len(reps)
            else:
                rx, ry = _rates(sx[0]), _rates(sy[0])
                n = min(len(rx), len(ry))
                if n < 2:
                    continue
                x, y, method = list(rx[:n]), list(ry[:n]), "interval rates"
            out.append({"regions": f"{ra}→{rb}", "zones_x": f"{zx[0]}→{zx[1]}",
                        "zones_y": f"{zy[0]}→{zy[1]}", "n": n, "cv_rmse": cv_rmse(x, y),
                        "method": method})
    return out


def _mean(s: Series) -> float:
    secs = float(np.sum(s.t_end - s.t_start))
    return float(np.sum(s.nbytes) * 8 / secs) if secs > 0 else math.nan


def _rates(s: Series) -> FloatArray:
    secs = s.t_end - s.t_start
    return rates_of(s.nbytes, secs)[full_mask(secs)]


def trend_warnings(series: list[Series], facts: RunFacts, workload: str) -> list[str]:
    """A falling trend over successive trials that reuse the same sender (same hosts)."""
    seqs: dict[tuple[str, str, str], list[tuple[str, float]]] = defaultdict(list)
    for s in series:
        key = (facts.stack.get(s.repetition, ""), s.src, s.direction)
        seqs[key].append((facts.trial_start.get(s.trial, s.trial), _mean(s)))
    out: list[str] = []
    for (_stack, src, direction), items in sorted(seqs.items()):
        values = [v for _, v in sorted(items)]
        tr = falling_trend(values)
        if tr is not None and tr.falling:
            out.append(
                f"{workload}: throughput sent by {src} ({direction}) falls over {tr.n} successive "
                f"trials on the same hosts ({tr.relative_drop:+.0%}, Kendall tau {tr.tau:+.2f}, "
                f"p={tr.p:.3g}): a token bucket that is not refilled between trials? (Uta et al. "
                "§4.2) Use fresh hosts per repetition or rest longer between trials")
    return out


# -- token-bucket drains ---------------------------------------------------------------------
@dataclass
class DrainResult:
    series: Series
    first: DrainEstimate
    refill: RefillEstimate | None


def drain_results(series: list[Series], spec_w: dict[str, Any]) -> list[DrainResult]:
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


# -- report section and summaries -------------------------------------------------------------
def _spec_workloads(manifest: dict[str, Any], kind: str | None = None) -> list[dict[str, Any]]:
    return [w for w in manifest.get("spec", {}).get("workloads", [])
            if w.get("kind") in KINDS and (kind is None or w.get("kind") == kind)]


def section(run: RunDir, manifest: dict[str, Any], w: dict[str, Any]) -> dict[str, Any]:
    """The report section of one throughput or tbdrain workload."""
    facts = RunFacts(manifest)
    series = load_series(run, w["name"])
    out: dict[str, Any] = {"kind": w["kind"], "unit": "Mbit/s", "rows": int(sum(len(s.burst)
                                                                               for s in series))}
    warnings = trend_warnings(series, facts, w["name"])
    if w["kind"] == "throughput":
        rows = trial_rows(series, facts, w)
        out["trials"] = rows
        out["asymmetry"] = asymmetry_rows(rows)
        out["cv_rmse"] = cv_rmse_rows(series, facts)
    else:
        out["drains"] = drain_rows(drain_results(series, w), facts)
        for d in out["drains"]:
            if not d["drained"]:
                warnings.append(f"{w['name']}: {d['src']}→{d['dst']} ({d['trial']}) did not "
                                "drain: no token bucket, or a budget larger than max_duration "
                                "allows")
    out["warnings"] = warnings
    return out


def summaries(run: RunDir, manifest: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """Per-repetition values for ``cloudbench confirm``: one per (metric, group)."""
    rows: list[dict[str, Any]] = []
    facts = RunFacts(manifest)

    def add(rep: int, workload: str, metric: str, group: str, value: float, unit: str,
            n: int) -> None:
        if value is not None and math.isfinite(value):
            rows.append({"run_id": run.run_id, "repetition": int(rep), "workload": workload,
                         "metric": metric, "group": group, "value": float(value), "unit": unit,
                         "n_obs": int(n)})

    for w in _spec_workloads(manifest, kind):
        series = load_series(run, w["name"])
        if kind == "throughput":
            trows = trial_rows(series, facts, w)
            groups: dict[tuple[int, str], list[int]] = defaultdict(list)
            for i, r in enumerate(trows):
                suffix = "" if r["direction"] == "forward" else ":reverse"
                groups[(r["repetition"], r["group"] + suffix)].append(i)
                add(r["repetition"], w["name"], "throughput_mbps", f"{r['src']}->{r['dst']}",
                    r["mean_mbps"], "Mbit/s", r["intervals"])
            for (rep, g), idx in sorted(groups.items()):
                sel = [trows[i] for i in idx]
                pooled = np.concatenate([_rates(series[i]) for i in idx]) / MBIT
                n = len(pooled)
                add(rep, w["name"], "throughput_mbps", g, float(np.mean([r["mean_mbps"] for r in sel])),
                    "Mbit/s", n)
                if n:
                    add(rep, w["name"], "throughput_p50_mbps", g, float(np.median(pooled)), "Mbit/s", n)
                    add(rep, w["name"], "throughput_p5_mbps", g, float(np.percentile(pooled, 5)),
                        "Mbit/s", n)
                add(rep, w["name"], "throughput_cov", g, _nanmean([r["cov"] for r in sel]), "1", n)
                add(rep, w["name"], "shift_share", g,
                    float(np.mean([math.isfinite(r["shift_s"]) for r in sel])), "1", len(sel))
                if any(series[i].protocol == "udp" for i in idx):
                    add(rep, w["name"], "loss_pct", g, _nanmean([r["loss_pct"] for r in sel]), "%",
                        n)
                    caps = [r["capacity_lb_mbps"] for r in sel if math.isfinite(r["capacity_lb_mbps"])]
                    add(rep, w["name"], "capacity_lb_mbps", g, max(caps) if caps else math.nan,
                        "Mbit/s", len(sel))
        else:
            for d in drain_rows(drain_results(series, w), facts):
                g = f"{d['src']}->{d['dst']}"
                rep, name = d["repetition"], w["name"]
                add(rep, name, "drained", g, float(d["drained"]), "1", 1)
                for metric, key, unit in (("high_rate_mbps", "high_mbps", "Mbit/s"),
                                          ("low_rate_mbps", "low_mbps", "Mbit/s"),
                                          ("time_to_empty_s", "time_to_empty_s", "s"),
                                          ("budget_mbit", "budget_mbit", "Mbit"),
                                          ("refill_rate_mbps", "refill_mbps", "Mbit/s")):
                    add(rep, name, metric, g, d[key], unit, 1)
    return rows


def _nanmean(values: list[float]) -> float:
    ok = [v for v in values if math.isfinite(v)]
    return float(np.mean(ok)) if ok else math.nan


def _f(v: Any, digits: int = 1) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:,.{digits}f}"
    return str(v)


def _pm(row: dict[str, Any], key: str, digits: int = 1) -> str:
    """value ± bootstrap SD (the 95 % interval is in the CSV/JSON)."""
    v, sd = row.get(key), row.get(f"{key}_sd")
    if not isinstance(v, float) or not math.isfinite(v):
        return "-"
    if isinstance(sd, float) and math.isfinite(sd):
        return f"{v:.{digits}f} ±{sd:.{digits}f}"
    return f"{v:.{digits}f}"


# (column key, header, digits) of the per-trial table; empty columns are left out.
_TRIAL_COLS: tuple[tuple[str, str, int], ...] = (
    ("repetition", "rep", 0), ("pair", "sender→receiver", 0), ("group", "group", 0),
    ("mean_mbps", "mean", 1), ("cov", "CoV", 3), ("p5_mbps", "p5", 1), ("p50_mbps", "p50", 1),
    ("p95_mbps", "p95", 1), ("retrans", "retr", 0), ("loss_pct", "loss %", 2),
    ("capacity_lb_mbps", "cap ≥", 1), ("shift_s", "shift s", 2),
    ("shift_volume_mb", "MB before", 0), ("expected_mbps", "expected", 1),
)


def render(name: str, sec: dict[str, Any], console: Console) -> None:
    """Print a throughput/tbdrain section (the report's tables for people)."""
    if sec["kind"] == "throughput":
        rows = [{**r, "pair": f"{r['src']}→{r['dst']}"} for r in sec.get("trials", [])]
        cols = [c for c in _TRIAL_COLS if any(_f(r.get(c[0], math.nan)) != "-" for r in rows)]
        t = titled_table(f"{name}: throughput per trial (Mbit/s; CoV and percentiles over "
                         "report intervals)", [header for _, header, _ in cols], no_wrap=True)
        for r in rows:
            t.add_row(*[_f(r.get(key, math.nan), digits) for key, _, digits in cols])
        console.print(t)
        if sec.get("asymmetry"):
            a = titled_table(f"{name}: direction asymmetry (Mbit/s)",
                             ("rep", "a", "b", "a→b", "b→a", "ratio"), no_wrap=True)
            for r in sec["asymmetry"]:
                a.add_row(str(r["repetition"]), r["a"], r["b"], _f(r["a_to_b_mbps"]),
                          _f(r["b_to_a_mbps"]), _f(r["ratio"], 3))
            console.print(a)
        if sec.get("cv_rmse"):
            cv = titled_table(f"{name}: CV_RMSE between zone pairs",
                              ("regions", "zones x", "zones y", "n", "CV_RMSE", "paired by"),
                              no_wrap=True)
            for r in sec["cv_rmse"]:
                cv.add_row(r["regions"], r["zones_x"], r["zones_y"], str(r["n"]),
                           _f(r["cv_rmse"], 3), r["method"])
            console.print(cv)
    else:
        t = titled_table(f"{name}: token-bucket drains (rates Mbit/s, budget Mbit, times s; "
                         "± bootstrap SD)", ("pair", "vm_type", "drained", "high", "low",
                                              "empty after", "budget", "rest", "refill"),
                         no_wrap=True)
        for r in sec.get("drains", []):
            t.add_row(f"{r['src']}→{r['dst']}", r["vm_type"], _f(r["drained"]),
                      _pm(r, "high_mbps"), _pm(r, "low_mbps"), _pm(r, "time_to_empty_s", 2),
                      _pm(r, "budget_mbit", 0), _f(r["rest_s"], 1), _pm(r, "refill_mbps"))
            if "expected_high_mbps" in r:
                t.add_row("  configured", "", "", _f(r["expected_high_mbps"]),
                          _f(r["expected_low_mbps"]), _f(r["expected_time_to_empty_s"], 2),
                          _f(r["expected_budget_mbit"], 0), "", _f(r["expected_refill_mbps"]))
        console.print(t)
        notes = [f"{r['src']}→{r['dst']} ({r['trial']}): {r['notes']}" for r in
                 sec.get("drains", []) if r.get("notes")]
        for n in notes:
            console.print(f"  note: {n}", soft_wrap=True)
    for msg in sec.get("warnings", []):
        console.print(f"[yellow]warning:[/] {msg}", soft_wrap=True)
