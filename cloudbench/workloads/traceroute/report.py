"""The traceroute workload's report section: MDA paths, hops, diamonds, changes, inflation.

:func:`section` turns a run's traceroute tables into rows (paths, hops,
diamonds, changes between repetitions, AS paths, inflation over the propagation
bound); :func:`render` prints them; :func:`write_figures` draws one PNG of each
pair's MDA graph.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from cloudbench.analysis.paths import (
    PathGraph,
    PrefixTable,
    anonymous_hops,
    as_path,
    diamonds,
    graph_drawing,
    inflation,
    is_anonymous,
    path_change,
)
from cloudbench.core.blocks import Block, fact, print_blocks
from cloudbench.core.tables import ReportTable, fmt_number, rep_number, titled_table
from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.workloads.traceroute.data import asn_table_path, graphs, load_prefix_table

PATH_TABLES = ("paths", "hops", "diamonds", "changes", "inflation")


def _coords(manifest: Manifest) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for prov in manifest.spec.get("providers", {}).values():
        for name, region in (prov or {}).get("regions", {}).items():
            loc = (region or {}).get("location")
            if loc:
                out[name] = (float(loc[0]), float(loc[1]))
    return out


def section(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> dict[str, Any]:
    """The report section of one traceroute workload (``w``: its spec entry)."""
    name = w["name"]
    gs = graphs(run, name)
    table_path = asn_table_path(run, name, w)
    table = load_prefix_table(table_path) if table_path is not None else None
    labels = manifest.labels()
    coords = _coords(manifest)
    out: dict[str, Any] = {"kind": "traceroute", "asn_table": str(table_path or ""),
                           **{t: [] for t in PATH_TABLES}}
    best_rtt: dict[tuple[str, str], float] = {}
    for (rep, src, dst), g in gs.items():
        ds = diamonds(g)
        rtt = g.rtt_min_us.get(g.dst)
        if rtt is not None:
            best_rtt[(src, dst)] = min(best_rtt.get((src, dst), rtt), rtt)
        out["paths"].append({
            "repetition": rep, "src": src, "dst": dst, "reached": g.reached, "hops": g.hop_count(),
            "nodes": len(g.nodes) - 1, "anonymous": anonymous_hops(g), "diamonds": len(ds),
            "max_width": max((d.width for d in ds), default=1),
            "max_length": max((d.length for d in ds), default=0),
            "rtt_min_us": float("nan") if rtt is None else rtt,
            "as_path": " ".join(str(a) for a in as_path(g, table)) if table is not None else "",
        })
        for h, nodes in enumerate(g.hops(), start=1):
            asns = sorted({hit[0] for n in nodes if table is not None and not is_anonymous(n)
                           for hit in [table.lookup(n)] if hit is not None})
            out["hops"].append({"repetition": rep, "src": src, "dst": dst, "hop": h,
                                "interfaces": len(nodes), "nodes": " ".join(nodes),
                                "asns": " ".join(map(str, asns))})
        for d in ds:
            out["diamonds"].append({"repetition": rep, "src": src, "dst": dst,
                                    "divergence": d.divergence, "convergence": d.convergence or "",
                                    "start_hop": d.start_hop, "width": d.width, "length": d.length})
    by_pair: dict[tuple[str, str], list[tuple[int, PathGraph]]] = defaultdict(list)
    for (rep, src, dst), g in gs.items():
        by_pair[(src, dst)].append((rep, g))
    for (src, dst), seq in sorted(by_pair.items()):
        for (r0, g0), (r1, g1) in itertools.pairwise(seq):
            c = path_change(g0, g1)
            out["changes"].append({"src": src, "dst": dst, "from_repetition": r0, "to_repetition": r1,
                                   "changed": c["changed"], "jaccard_distance": c["jaccard_distance"],
                                   "nodes_added": " ".join(c["nodes_added"]),
                                   "nodes_removed": " ".join(c["nodes_removed"])})
        la, lb = labels.get((seq[0][0], src), {}), labels.get((seq[0][0], dst), {})
        ra, rb = la.get("region"), lb.get("region")
        if ra and rb and ra != rb and ra in coords and rb in coords and (src, dst) in best_rtt:
            out["inflation"].append({"src": src, "dst": dst, "src_region": ra, "dst_region": rb,
                                     **inflation(best_rtt[(src, dst)], coords[ra], coords[rb])})
    # each pair's MDA graph in its latest repetition, for the HTML report's figures
    latest = {(src, dst): (rep, g) for (rep, src, dst), g in gs.items()}
    out["graphs"] = [{"repetition": rep, "src": src, "dst": dst, **graph_drawing(g, table)}
                     for (src, dst), (rep, g) in sorted(latest.items())]
    return out


def views(wname: str, w: dict[str, Any]) -> list[Block]:
    """The path tables of one traceroute section and its count of path changes."""
    out: list[Block] = [_table(f"{wname}: MDA paths", w["paths"],
                               ["repetition", "src", "dst", "hops", "nodes", "anonymous", "diamonds",
                                "max_width", "max_length", "rtt_min_us", "as_path"], 3)]
    if w["changes"]:
        changed = [c for c in w["changes"] if c["changed"]]
        out.append(fact(f"{wname}: {len(changed)} of {len(w['changes'])} pair-repetition "
                        "transitions changed the path"))
    if w["inflation"]:
        out.append(_table(f"{wname}: minimum RTT over the propagation bound", w["inflation"],
                          ["src", "dst", "distance_km", "min_rtt_us", "bound_c_us",
                           "inflation_c", "inflation_fibre"], 2))
    return out


def render(wname: str, w: dict[str, Any], console: Console) -> None:
    """Print the path tables of one traceroute section (:func:`views`)."""
    print_blocks(views(wname, w), console)


_SHORT = {"repetition": "rep", "anonymous": "anon", "diamonds": "diam", "max_width": "width",
          "max_length": "length", "rtt_min_us": "rtt µs", "distance_km": "km", "min_rtt_us": "rtt µs",
          "bound_c_us": "c µs", "inflation_c": "×c", "inflation_fibre": "×fibre"}
"""Headers of the path tables where the full names do not fit (a legend explains them)."""


def _table(title: str, rows: list[dict[str, Any]], cols: list[str], key: int) -> ReportTable:
    t = titled_table(title, cols, left=("src", "dst", "as_path"), short=_SHORT, key=key)
    for r in rows:
        t.add_row(*[Text(rep_number(r.get(c, "")) if c == "repetition" else fmt_number(r.get(c, ""), 2))
                    for c in cols])
    return t


def write_figures(run: RunDir, wname: str, w: dict[str, Any], out: Path) -> list[Path]:
    """A PNG of each pair's MDA graph (its latest repetition) under ``out/paths/``."""
    written: list[Path] = []
    table = load_prefix_table(Path(w["asn_table"])) if w.get("asn_table") else None
    latest: dict[tuple[str, str], tuple[int, PathGraph]] = {}
    for (rep, src, dst), g in graphs(run, wname).items():
        latest[(src, dst)] = (rep, g)
    for (src, dst), (rep, g) in sorted(latest.items()):
        path = out / "paths" / f"{wname}_{src}_{dst}.png"
        draw_mda(g, path, f"{src} → {dst} (repetition {rep})", table)
        written.append(path)
    return written


def draw_mda(g: PathGraph, path: Path, title: str, table: PrefixTable | None = None) -> None:
    """A PNG of the MDA graph: hops left to right, parallel interfaces stacked."""
    import matplotlib  # noqa: PLC0415 - matplotlib is heavy: only reports that draw figures pay for it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - matplotlib is heavy: only reports that draw figures pay for it

    hops = [[g.src], *g.hops()]
    pos: dict[str, tuple[float, float]] = {}
    for x, nodes in enumerate(hops):
        for k, n in enumerate(nodes):
            pos[n] = (float(x), (len(nodes) - 1) / 2.0 - k)
    height = max(len(h) for h in hops)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(hops)), max(2.5, 1.1 * height + 1.2)))
    for a, b in sorted(g.edges):
        if a in pos and b in pos:
            ax.annotate("", xy=pos[b], xytext=pos[a],
                        arrowprops={"arrowstyle": "->", "color": "0.45", "shrinkA": 9, "shrinkB": 9})
    for n, (px, py) in pos.items():
        anon = is_anonymous(n)
        color = "white" if anon else ("#cfe3f6" if n not in (g.src, g.dst) else "#f6dcb4")
        ax.plot([px], [py], "o", ms=16, mfc=color, mec="0.2")
        label = "*" if anon else n
        if table is not None and not anon:
            hit = table.lookup(n)
            if hit is not None:
                label += f"\nAS{hit[0]}"
        rtt = g.rtt_min_us.get(n)
        if rtt is not None:
            label += f"\n{rtt / 1000:.2f} ms"
        ax.text(px, py - 0.28, label, ha="center", va="top", fontsize=7)
    ax.set_xticks(range(len(hops)))
    ax.set_xticklabels([str(i) for i in range(len(hops))])
    ax.set_xlabel("hop")
    ax.set_yticks([])
    ax.set_ylim(-(height / 2.0) - 0.9, height / 2.0 + 0.2)
    ax.set_title(title, fontsize=9)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
