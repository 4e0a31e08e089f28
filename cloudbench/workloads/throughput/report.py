"""The throughput workload's report section: per-trial distributions, asymmetry, CV_RMSE.

Applies the pure functions of :mod:`cloudbench.analysis.throughput` to the series
of :mod:`.data`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations
from typing import Any

import numpy as np
from rich.console import Console
from rich.text import Text

from cloudbench.analysis.quantiles import P5, P50, P95
from cloudbench.analysis.throughput import (
    asymmetry,
    binned_rates,
    capacity_lower_bound,
    capacity_lower_bound_95,
    cv_rmse,
    detect_level_shift,
    series_stats,
)
from cloudbench.core.blocks import Block, note, print_blocks, warning
from cloudbench.core.tables import rep_number, titled_table
from cloudbench.spec.vmtypes import expected_goodput, goodput_fraction
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.throughput.data import (
    RunFacts,
    Transfer,
    interval_rates,
    load_transfers,
    mbit,
    mean_rate,
    trend_warnings,
)

TABLES = ("trials", "asymmetry", "cv_rmse")


def trial_rows(series: list[Transfer], facts: RunFacts, spec_w: dict[str, Any]) -> list[dict[str, Any]]:
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
            "intervals": st.n, "seconds": st.seconds, "mean_mbps": mbit(st.mean_bps),
            "cov": st.cov, "p5_mbps": mbit(st.percentiles[P5]),
            "p50_mbps": mbit(st.percentiles[P50]), "p95_mbps": mbit(st.percentiles[P95]),
            "retrans": float(np.nansum(s.retrans)) if np.isfinite(s.retrans).any() else math.nan,
            "loss_pct": _loss_pct(s), "capacity_lb_mbps": math.nan, "capacity_lb95_mbps": math.nan,
            "shift_s": math.nan, "shift_volume_mb": math.nan, "shift_high_mbps": math.nan,
            "shift_low_mbps": math.nan, "expected_mbps": math.nan,
        }
        if s.protocol == "udp":
            caps = [capacity_lower_bound(*s.part(b)) for b in s.bursts]
            found = [c for c in caps if c is not None]
            row["capacity_lb_mbps"] = mbit(max(found)) if found else math.nan
            # a bound that holds at 95 % (the max of window means alone does not)
            bounds = [c for b in s.bursts if (c := capacity_lower_bound_95(*s.part(b))) is not None]
            row["capacity_lb95_mbps"] = mbit(max(bounds)) if bounds else math.nan
            row["target_mbps"] = mbit(float(spec_w.get("udp_rate", math.nan)))
        if len(s.bursts) == 1:
            shift = detect_level_shift(s.t_start, s.t_end, s.nbytes)
            if shift is not None:
                row.update(shift_s=shift.time_s, shift_volume_mb=shift.volume_before_bits / 8e6,
                           shift_high_mbps=mbit(shift.high_bps), shift_low_mbps=mbit(shift.low_bps))
        prof = facts.profile(s.repetition, s.src)
        if prof is not None and prof.shaping == "cap":
            exp = expected_goodput(prof, s.protocol, payload=spec_w.get("length"))
            row["expected_mbps"] = mbit(exp["rate"])
        rows.append(row)
    return rows


def _loss_pct(s: Transfer) -> float:
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


def cv_rmse_rows(series: list[Transfer], facts: RunFacts) -> list[dict[str, Any]]:
    """CV_RMSE between zone pairs of one region pair (Persico et al. §5.6).

    Samples are paired by repetition (the mean of each zone pair's trials in that
    repetition) when two or more repetitions are shared; with a single one, by
    interval index within the first trial of each zone pair (the trials ran one
    after the other, not at the same time as in Persico et al.).
    """
    by_zone: dict[tuple[str, str], dict[tuple[str, str], list[Transfer]]] = defaultdict(
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
                x = [float(np.mean([mean_rate(s) for s in sx if s.repetition == r])) for r in reps]
                y = [float(np.mean([mean_rate(s) for s in sy if s.repetition == r])) for r in reps]
                method, n = "repetition means", len(reps)
            else:
                rx, ry = interval_rates(sx[0]), interval_rates(sy[0])
                n = min(len(rx), len(ry))
                if n < 2:
                    continue
                x, y, method = list(rx[:n]), list(ry[:n]), "interval rates"
            out.append({"regions": f"{ra}→{rb}", "zones_x": f"{zx[0]}→{zx[1]}",
                        "zones_y": f"{zy[0]}→{zy[1]}", "n": n, "cv_rmse": cv_rmse(x, y),
                        "method": method})
    return out


def section(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> dict[str, Any]:
    """The report section of one throughput workload (``w``: its spec entry)."""
    facts = RunFacts(manifest)
    series = load_transfers(run, w["name"])
    out: dict[str, Any] = {"kind": w["kind"], "unit": "Mbit/s", "rows": int(sum(len(s.burst)
                                                                               for s in series))}
    rows = trial_rows(series, facts, w)
    out["trials"] = rows
    out["asymmetry"] = asymmetry_rows(rows)
    out["cv_rmse"] = cv_rmse_rows(series, facts)
    out["warnings"] = trend_warnings(series, facts, w["name"])
    out["notes"] = expected_notes(series, facts, w)
    out["series"] = series_points(series, facts)
    return out


def expected_notes(series: list[Transfer], facts: RunFacts, spec_w: dict[str, Any]) -> list[str]:
    """What the ``expected`` column is, once per cap and protocol: the cap less the headers and
    framing the shaper counts (47.82 for a 50 Mbit/s cap over TCP)."""
    notes: dict[tuple[float, str], str] = {}
    for s in series:
        prof = facts.profile(s.repetition, s.src)
        if prof is None or prof.shaping != "cap" or prof.rate is None or (prof.rate, s.protocol) in notes:
            continue
        payload = spec_w.get("length")
        frac = goodput_fraction(s.protocol, payload=payload)
        exp = expected_goodput(prof, s.protocol, payload=payload)["rate"]
        what = ("TCP segments' payload (a 1514-byte frame carries 1448 bytes: Ethernet, IP and TCP headers "
                "with timestamps are not goodput)" if s.protocol == "tcp" else
                "UDP datagrams' payload (Ethernet, IP and UDP headers, and IP fragments' own headers, are not "
                "goodput)")
        notes[(prof.rate, s.protocol)] = (
            f"expected {mbit(exp):.2f} Mbit/s = the vm_type's cap of {mbit(prof.rate):g} Mbit/s × "
            f"{frac:.1%}: the shaper counts whole frames on the wire, the receiver only the {what}")
    return list(notes.values())


def series_points(series: list[Transfer], facts: RunFacts, max_points: int = 600) -> list[dict[str, Any]]:
    """Each series as at most ``max_points`` points per burst, for figures: ``repetition``,
    ``trial``, ``src``, ``dst``, ``direction``, ``group``, and lists ``burst``, ``t_s``
    (bin middle, s after the series' first interval began) and ``mbps`` (the bin's
    bytes over its seconds; :func:`~cloudbench.analysis.throughput.binned_rates`)."""
    out: list[dict[str, Any]] = []
    for s in series:
        origin = float(s.t_start[0]) if len(s.t_start) else 0.0
        bursts: list[int] = []
        ts: list[float] = []
        rates: list[float] = []
        for b in s.bursts:
            t, r = binned_rates(*s.part(b), origin=origin, max_points=max_points)
            bursts += [b] * len(t)
            ts += [round(float(x), 4) for x in t]
            rates += [mbit(float(x)) for x in r]
        out.append({"repetition": s.repetition, "trial": s.trial, "src": s.src, "dst": s.dst,
                    "direction": s.direction, "group": facts.group(s.repetition, s.src, s.dst),
                    "burst": bursts, "t_s": ts, "mbps": rates})
    return out


def fmt_cell(v: Any, digits: int = 1) -> str:
    """A cell of the throughput and drain tables: yes/no, thousands separators, ``-`` for NaN."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:,.{digits}f}"
    return str(v)


# (column key, header, digits) of the per-trial table; empty columns are left out.
_TRIAL_COLS: tuple[tuple[str, str, int], ...] = (
    ("repetition", "rep", 0), ("pair", "sender→receiver", 0), ("group", "group", 0),
    ("mean_mbps", "mean", 1), ("cov", "CoV", 3), ("p5_mbps", P5, 1), ("p50_mbps", P50, 1),
    ("p95_mbps", P95, 1), ("retrans", "retr", 0), ("loss_pct", "loss %", 2),
    ("capacity_lb_mbps", "cap ≥", 1), ("capacity_lb95_mbps", "cap ≥ (95 %)", 1), ("shift_s", "shift s", 2),
    ("shift_volume_mb", "MB before", 0), ("expected_mbps", "expected", 1),
)


def views(name: str, sec: dict[str, Any]) -> list[Block]:
    """A throughput section's tables and lines (the terminal prints them, the page shows them)."""
    out: list[Block] = []
    rows = [{**r, "pair": f"{r['src']}→{r['dst']}"} for r in sec.get("trials", [])]
    cols = [c for c in _TRIAL_COLS if any(fmt_cell(r.get(c[0], math.nan)) != "-" for r in rows)]
    t = titled_table(f"{name}: throughput per trial (Mbit/s; CoV and percentiles over "
                     "report intervals)", [header for _, header, _ in cols], left=("sender→receiver", "group"),
                     key=2)
    for r in rows:
        t.add_row(*[Text(rep_number(r[key]) if key == "repetition" else fmt_cell(r.get(key, math.nan), digits))
                    for key, _, digits in cols])
    out.append(t)
    if sec.get("asymmetry"):
        a = titled_table(f"{name}: direction asymmetry (Mbit/s)",
                         ("rep", "a", "b", "a→b", "b→a", "ratio"), left=("a", "b"), key=3)
        for r in sec["asymmetry"]:
            a.add_row(*map(Text, (rep_number(r["repetition"]), r["a"], r["b"], fmt_cell(r["a_to_b_mbps"]),
                                  fmt_cell(r["b_to_a_mbps"]), fmt_cell(r["ratio"], 3))))
        out.append(a)
    if sec.get("cv_rmse"):
        cv = titled_table(f"{name}: CV_RMSE between zone pairs",
                          ("regions", "zones x", "zones y", "n", "CV_RMSE", "paired by"),
                          left=("regions", "zones x", "zones y", "paired by"), key=3)
        for r in sec["cv_rmse"]:
            cv.add_row(*map(Text, (r["regions"], r["zones_x"], r["zones_y"], str(r["n"]),
                                   fmt_cell(r["cv_rmse"], 3), r["method"])))
        out.append(cv)
    out += [note(n) for n in sec.get("notes", [])]
    out += warning_lines(sec)
    return out


def render(name: str, sec: dict[str, Any], console: Console) -> None:
    """Print a throughput section (:func:`views`)."""
    print_blocks(views(name, sec), console)


def warning_lines(sec: dict[str, Any]) -> list[Block]:
    """The section's warnings, one line each."""
    return [warning(str(msg)) for msg in sec.get("warnings", [])]
