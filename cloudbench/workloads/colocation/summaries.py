"""Per-repetition summaries of the colocation audit, for ``cloudbench confirm``."""

from __future__ import annotations

from typing import Any

from cloudbench.store.manifest import Manifest
from cloudbench.store.rundir import RunDir
from cloudbench.store.summaries import SummaryRow, SummaryRows
from cloudbench.workloads.colocation.data import load_audits
from cloudbench.workloads.colocation.report import analyse, host_facts

# Which way is better, per summary metric (``cloudbench compare``).
COLOCATION_BETTER = {"egress_mbps": "higher", "egress_share": "higher", "loss": "lower", "colocated_hosts": "lower"}


def colocation_summaries(run: RunDir, manifest: Manifest, w: dict[str, Any]) -> list[SummaryRow]:
    """Per host: egress under full load (Mbit/s) and its share of nominal; per group size: the
    loss; per repetition: how many hosts share a NIC, and how many probes that took."""
    rows = SummaryRows(run, w["name"])
    for audit in load_audits(run, w["name"]):
        if not audit.probes:
            continue
        a = analyse(audit, host_facts(manifest, audit.repetition), w)
        rep = audit.repetition
        for h in a["hosts"]:
            rows.add(rep, "egress_mbps", h["host"], h["egress_mbps"], "Mbit/s", 1)
            rows.add(rep, "egress_share", h["host"], h["egress_share"], "1", 1)
        for x in a["loss"]:
            rows.add(rep, "loss", f"size{x['size']}", x["loss"], "1", x["hosts"])
        s = a["summary"]
        rows.add(rep, "colocated_hosts", "all", float(s["colocated_hosts"]), "hosts", len(audit.hosts))
        rows.add(rep, "probes", "all", float(s["probes"]), "probes", 1)
    return list(rows)
