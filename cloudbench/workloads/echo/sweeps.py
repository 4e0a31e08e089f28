"""Swept echo parameters (``payload: [64, 1024, 16384, 65536]``, ``rate: [...]``): strata and the latency curve.

The plan gives a swept workload one trial per value (in the seeded random
order); each trial's values are in the manifest (``TrialRecord.sweep``). Here
the run's rows are split by those values:

* summaries: each latency group's summary rows get the value in their group
  name (``same_zone@payload=1024``, :func:`~cloudbench.store.summaries.sweep_group`),
  so ``cloudbench confirm`` pools repetitions per value and gives each its CI;
* the report: per latency group and value, the median over repetitions of each
  repetition's p50 and p99 with the exact order-statistic CI that confirm
  computes (Le Boudec Thm. 2.1; none below 6 repetitions at 95 %), and a figure
  of latency against the swept value (StormCloud, Fig. 11).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.analysis.latency import EchoData, group_table
from cloudbench.analysis.stats import quantile_ci
from cloudbench.core.topology import GROUP_ORDER
from cloudbench.store.manifest import Manifest
from cloudbench.store.summaries import SummaryRow, sweep_group
from cloudbench.workloads.base import sweep_label

TABLES = ("sweep",)
LEVEL = 0.95


def trial_sweeps(manifest: Manifest, trials: list[str]) -> list[dict[str, Any]]:
    """The swept values of each trial (``{}`` when it swept nothing), in the order of ``trials``."""
    by_id = {t.id: t.sweep for t in manifest.trials}
    return [dict(by_id.get(t) or {}) for t in trials]


def subset(d: EchoData, mask: np.ndarray) -> EchoData:
    """The rows of ``d`` under ``mask`` (trial and host indices keep their meaning)."""
    return dataclasses.replace(
        d,
        **{
            f.name: getattr(d, f.name)[mask]
            for f in dataclasses.fields(d)
            if isinstance(getattr(d, f.name), np.ndarray)
        },
    )


def strata(d: EchoData, manifest: Manifest) -> list[tuple[dict[str, Any], EchoData]]:
    """``d`` split by swept values, in increasing order of them; ``[]`` when nothing was swept."""
    sweeps = trial_sweeps(manifest, d.trials)
    if not any(sweeps):
        return []
    labels = sorted({sweep_label(s) for s in sweeps}, key=lambda lb: _sort_key(sweeps, lb))
    out = []
    for lb in labels:
        idx = np.array([i for i, s in enumerate(sweeps) if sweep_label(s) == lb], dtype=np.int64)
        values = next(s for s in sweeps if sweep_label(s) == lb)
        out.append((values, subset(d, np.isin(d.trial, idx))))
    return out


def _sort_key(sweeps: list[dict[str, Any]], label: str) -> tuple[float, ...]:
    values = next(s for s in sweeps if sweep_label(s) == label)
    return tuple(float(v) for _, v in sorted(values.items()))


def stratified(d: EchoData, manifest: Manifest, summaries: Callable[[EchoData], list[SummaryRow]]) -> list[SummaryRow]:
    """``summaries(d)``, or, when a parameter was swept, ``summaries`` of each value's rows
    with the value in the group names."""
    parts = strata(d, manifest)
    if not parts:
        return summaries(d)
    rows: list[SummaryRow] = []
    for values, sub in parts:
        label = sweep_label(values)
        rows += [dataclasses.replace(r, group=sweep_group(r.group, label)) for r in summaries(sub)]
    return rows


def sweep_table(d: EchoData, manifest: Manifest) -> list[dict[str, Any]]:
    """Per latency group and swept value: rows, p50 and p99 of all rows, and the median over
    repetitions of each repetition's p50 and p99 with its CI (µs)."""
    out: list[dict[str, Any]] = []
    for values, sub in strata(d, manifest):
        reps = sorted(set(sub.repetition.tolist()))
        per_rep = {rep: {g["group"]: g for g in group_table(sub, sub.repetition == rep)} for rep in reps}
        for g in group_table(sub):
            row: dict[str, Any] = {
                "group": g["group"],
                **values,
                "sweep": sweep_label(values),
                "count": g["count"],
                "timeouts": g["timeouts"],
                "p50": g["p50"],
                "p99": g["p99"],
                "repetitions": len(reps),
            }
            for key in ("p50", "p99"):
                xs = [per_rep[r][g["group"]][key] for r in reps if g["group"] in per_rep[r]]
                ci = quantile_ci(np.array([x for x in xs if np.isfinite(x)]), 0.5, LEVEL)
                row[f"rep_{key}_median"] = ci.estimate
                row[f"rep_{key}_lower"] = ci.lower
                row[f"rep_{key}_upper"] = ci.upper
            out.append(row)
    order = {g.value: i for i, g in enumerate(GROUP_ORDER)}
    out.sort(key=lambda r: order.get(r["group"], len(order)))
    return out


def swept_fields(rows: list[dict[str, Any]]) -> list[str]:
    """The parameters a sweep table varies (``payload``, ``rate``)."""
    return [f for f in ("payload", "rate") if rows and f in rows[0]]


def write_figure(name: str, rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Latency against each swept parameter, one line per latency group (p50 and p99, the
    median over repetitions with its CI as error bars when there is one); the paths written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    written = []
    for field in swept_fields(rows):
        fig = Figure(figsize=(7.0, 4.8))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        others = [f for f in swept_fields(rows) if f != field]  # one line per value of the others

        def series(r: dict[str, Any], others: list[str] = others) -> str:
            return " ".join([r["group"], *(f"{o}={r[o]:g}" for o in others)])

        for gi, group in enumerate(dict.fromkeys(series(r) for r in rows)):
            sel = sorted((r for r in rows if series(r) == group), key=lambda r: float(r[field]))
            xs = np.array([float(r[field]) for r in sel])
            for key, style in (("p50", "-o"), ("p99", "--^")):
                ys = np.array([r[f"rep_{key}_median"] for r in sel], dtype=float)
                lo = np.array(
                    [
                        r[f"rep_{key}_lower"] if r[f"rep_{key}_lower"] is not None else y
                        for r, y in zip(sel, ys, strict=True)
                    ],
                    dtype=float,
                )
                hi = np.array(
                    [
                        r[f"rep_{key}_upper"] if r[f"rep_{key}_upper"] is not None else y
                        for r, y in zip(sel, ys, strict=True)
                    ],
                    dtype=float,
                )
                ax.errorbar(
                    xs, ys, yerr=[ys - lo, hi - ys], fmt=style, color=f"C{gi}", capsize=3, label=f"{group} {key}"
                )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({float(r[field]) for r in rows})
        ax.set_xticks(ticks, [_size(v) if field == "payload" else f"{v:g}" for v in ticks])
        ax.minorticks_off()
        ax.set_xlabel(f"{field} ({'bytes' if field == 'payload' else 'rounds/s'})")
        ax.set_ylabel("RTT (µs)")
        ax.set_title(f"{name}: RTT against {field} (median over repetitions, {LEVEL:.0%} CI)", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
        fig.tight_layout()
        path = out / f"{name}_latency_vs_{field}.png"
        fig.savefig(path, dpi=120)
        written.append(path)
    return written


def _size(v: float) -> str:
    """64, 1 KiB, 64 KiB."""
    return f"{v / 1024:g} KiB" if v >= 1024 else f"{v:g}"
