"""The colocation audit's report section: egress vs nominal per host, inferred groups with their
confidence (and the testbed's ground truth when it has one), bandwidth loss per group size.

Applies :mod:`cloudbench.analysis.colocation` to the probes of :mod:`.data`; the
inference is recomputed from the stored rates, so the report says what the data
say, whatever the run decided on the way.
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.text import Text

from cloudbench.analysis.colocation import (
    DEFAULT_THRESHOLD,
    group_confidence,
    infer,
    loss_by_group_size,
)
from cloudbench.core.blocks import Block, fact, note, print_blocks, warning
from cloudbench.core.tables import rep_number, titled_table
from cloudbench.spec.vmtypes import goodput_fraction
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.colocation.data import Audit, load_audits, nominal_rate

TABLES = ("hosts", "groups", "loss")
MBIT = 1e6
BAR_WIDTH = 10


def _mbit(v: float | None) -> float:
    return math.nan if v is None or not math.isfinite(v) else v / MBIT


def host_facts(manifest: Manifest, rep: int) -> dict[str, dict[str, Any]]:
    """name -> {vm_type, provider, shaping, physical_host} of a repetition's hosts."""
    for r in manifest.repetitions:
        if r.index == rep:
            return {h.name: {"vm_type": h.labels.get("vm_type", "?"),
                             "provider": h.labels.get("provider", "?"),
                             "shaping": h.facts.get("shaping"),
                             "physical_host": (h.facts.get("physical_host") or {}).get("name")}
                    for h in r.hosts}
    return {}


def analyse(audit: Audit, facts: dict[str, dict[str, Any]], w: dict[str, Any]) -> dict[str, Any]:
    """Rows of the three tables and the summary of one audit."""
    hosts = audit.hosts
    spec_nominal = {k: float(v) for k, v in (w.get("nominal") or {}).items()}
    nominal = {h: nominal_rate(facts.get(h, {}).get("vm_type", "?"),
                               facts.get(h, {}).get("provider", "?"),
                               facts.get(h, {}).get("shaping"), spec_nominal) for h in hosts}
    threshold = float(w.get("threshold", DEFAULT_THRESHOLD))
    classes = {h: str(facts[h]["vm_type"]) for h in hosts if h in facts}
    inf = infer(audit.probes, hosts, nominal, threshold, classes)
    conf = group_confidence(inf, audit.probes)
    full = next((p for p in audit.probes if p.phase == "full"), audit.probes[0])
    egress = dict(full.rates)
    ingress = {dst: egress[src] for src, dst in audit.flows.items() if src in egress}
    truth_known = any(f.get("physical_host") for f in facts.values())
    truth: dict[str, tuple[str, ...]] = {}
    if truth_known:
        for h in hosts:
            ph = facts.get(h, {}).get("physical_host")
            truth[h] = tuple(sorted(x for x in hosts if ph and facts[x].get("physical_host") == ph)
                             ) or (h,)
    ids = {g: f"G{i + 1}" if len(g) > 1 else "-" for i, g in enumerate(inf.groups)}
    host_rows = []
    for h in hosts:
        g = inf.group_of(h)
        nom = nominal[h]
        host_rows.append({
            "repetition": audit.repetition, "host": h, "vm_type": facts.get(h, {}).get("vm_type"),
            "nominal_mbps": _mbit(nom), "egress_mbps": _mbit(egress.get(h)),
            "egress_share": egress[h] / nom if nom and h in egress else math.nan,
            "ingress_mbps": _mbit(ingress.get(h)), "baseline_mbps": _mbit(inf.baseline[h]),
            "group": ids[g], "group_size": len(g),
            "physical_host": facts.get(h, {}).get("physical_host") or "",
        })
    group_rows = []
    for g in inf.groups:
        row: dict[str, Any] = {
            "repetition": audit.repetition, "group": ids[g], "hosts": " ".join(g), "size": len(g),
            "confidence": conf[g],
            "full_load_mbps": _mbit(sum(egress.get(h, 0.0) for h in g) / len(g)),
            "baseline_mbps": _mbit(sum(inf.baseline[h] for h in g) / len(g)),
        }
        if truth_known:
            row["matches_truth"] = all(truth[h] == g for h in g)
        group_rows.append(row)
    loss_rows = [{"repetition": audit.repetition, "size": x.size, "groups": x.groups,
                  "hosts": x.hosts, "full_load_mbps": _mbit(x.mean_rate),
                  "baseline_mbps": _mbit(x.mean_baseline), "loss": x.loss}
                 for x in loss_by_group_size(inf.groups, egress, inf.baseline)]
    warnings = []
    if inf.undetermined:
        warnings.append(f"repetition {audit.repetition}: {len(inf.undetermined)} host pair(s) "
                        "still undetermined (max_probes reached?); their groups are shown apart")
    if inf.unexplained:
        who = sorted({h for _, h in inf.unexplained})
        warnings.append(f"repetition {audit.repetition}: {len(inf.unexplained)} drop(s) that no "
                        f"partner explains ({', '.join(who)}): noise near the threshold, or a "
                        "host below its nominal rate even alone")
    summary = {
        "repetition": audit.repetition, "probes": len(audit.probes),
        "phases": {ph: sum(p.phase == ph for p in audit.probes)
                   for ph in dict.fromkeys(p.phase for p in audit.probes)},
        "colocated_hosts": sum(len(g) for g in inf.groups if len(g) > 1),
        "groups": [list(g) for g in inf.groups if len(g) > 1],
        "truth": sorted({truth[h] for h in hosts if len(truth[h]) > 1}) if truth_known else None,
        "matches_truth": ({g for g in inf.groups} == set(truth.values())) if truth_known else None,
    }
    return {"hosts": host_rows, "groups": group_rows, "loss": loss_rows, "summary": summary,
            "warnings": warnings}


def section(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> dict[str, Any]:
    """The workload's part of report.json."""
    out: dict[str, Any] = {"kind": "colocation", "hosts": [], "groups": [], "loss": [],
                           "audits": [], "warnings": []}
    for audit in load_audits(run, w["name"]):
        if not audit.probes:
            continue
        a = analyse(audit, host_facts(manifest, audit.repetition), w)
        for key in ("hosts", "groups", "loss", "warnings"):
            out[key] += a[key]
        out["audits"].append(a["summary"])
    return out


def _fmt(v: Any, digits: int = 1) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:,.{digits}f}"
    return "-" if v is None else str(v)


def bar(share: float, width: int = BAR_WIDTH) -> str:
    """egress/nominal as a bar of ``width`` cells (full = nominal; a '|' marks 100 % beyond it)."""
    if not math.isfinite(share):
        return ""
    cells = round(min(share, 1.5) * width)
    return "█" * min(cells, width) + ("|" + "█" * (cells - width) if cells > width else "")


def views(name: str, sec: dict[str, Any]) -> list[Block]:
    """The section's tables and lines: per-host bars, groups with confidence, loss per group size,
    the audits' probes and the warnings (the terminal prints them, the page shows them)."""
    out: list[Block] = []
    t = titled_table(f"{name}: egress under full load vs nominal (Mbit/s; bar: egress/nominal)",
                     ("rep", "host", "nominal", "egress", "ingress", "share", "", "group", "phys."),
                     left=("host", "", "phys."))
    for r in sec.get("hosts", []):
        share = r["egress_share"]
        t.add_row(*map(Text, (rep_number(r["repetition"]), r["host"], _fmt(r["nominal_mbps"]),
                              _fmt(r["egress_mbps"]), _fmt(r["ingress_mbps"]),
                              f"{share:.0%}" if math.isfinite(share) else "-", bar(share), r["group"],
                              r["physical_host"] or "-")))
    out.append(t)
    out += [note(line) for line in nominal_notes(sec.get("hosts", []))]
    groups = [g for g in sec.get("groups", []) if g["size"] > 1]
    truth = any("matches_truth" in g for g in sec.get("groups", []))
    cols = ["rep", "group", "hosts", "conf.", "full load", "alone", *(["truth"] if truth else [])]
    gt = titled_table(f"{name}: hosts sharing a NIC (inferred; confidence = weakest evidence)",
                      cols, left=("group", "hosts"))
    for g in groups:
        gt.add_row(*map(Text, (rep_number(g["repetition"]), g["group"], g["hosts"], _fmt(g["confidence"], 3),
                               _fmt(g["full_load_mbps"]), _fmt(g["baseline_mbps"]),
                               *([_fmt(g.get("matches_truth"))] if truth else []))))
    out.append(gt if groups else fact(f"{name}: no hosts found sharing a NIC"))
    lt = titled_table(f"{name}: bandwidth loss under full load per group size",
                      ("rep", "group size", "groups", "hosts", "full load", "alone", "loss"))
    for r in sec.get("loss", []):
        lt.add_row(*map(Text, (rep_number(r["repetition"]), str(r["size"]), str(r["groups"]), str(r["hosts"]),
                               _fmt(r["full_load_mbps"]), _fmt(r["baseline_mbps"]),
                               _fmt(r["loss"] * 100, 0) + "%" if math.isfinite(r["loss"]) else "-")))
    out.append(lt)
    for a in sec.get("audits", []):
        phases = ", ".join(f"{k} {v}" for k, v in a["phases"].items())
        match = ("" if a["matches_truth"] is None else
                 f"; testbed truth {'matched' if a['matches_truth'] else 'NOT matched'}")
        out.append(fact(f"repetition {rep_number(a['repetition'])}: {a['probes']} probes ({phases}){match}"))
    out += [warning(str(msg)) for msg in sec.get("warnings", [])]
    return out


def render(name: str, sec: dict[str, Any], console: Console) -> None:
    """Print the section (:func:`views`)."""
    print_blocks(views(name, sec), console)


def nominal_notes(hosts: list[dict[str, Any]]) -> list[str]:
    """What ``nominal`` is, once per value: the vm_type's rate as TCP goodput (80 Mbit/s × 95.6 %
    = 76.5), so that a host measured above it (alone, or under full load) reads as more than the
    shaper's steady TCP goodput, not as a share of the rate the type is sold with."""
    frac = goodput_fraction("tcp")
    values = sorted({r["nominal_mbps"] for r in hosts if math.isfinite(r.get("nominal_mbps", math.nan))})
    if not values:
        return []
    each = ", ".join(f"{v:.1f} = {round(v / frac, 1):g} Mbit/s × {frac:.1%}" for v in values)
    return [f"nominal: the vm_type's rate as TCP goodput ({each}: frame and TCP/IP headers are not goodput); "
            "share = egress / nominal (over 100 % when a host's goodput exceeds it); alone (below): a "
            "host's egress when it sends alone"]
