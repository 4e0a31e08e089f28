"""A colocation run's probes as arrays: who sent in each probe, and at what rate.

The Parquet file of a trial holds the throughput workload's interval rows
(:data:`~cloudbench.workloads.throughput.controller.THROUGHPUT_SCHEMA`) plus
``probe``, ``phase`` and ``senders``. A sender's rate in a probe is its bytes
over its time in the reported intervals after the first (TCP's ramp and the few
ms by which the senders' starts differ fall in the first; nuttcp's derived tail
is not a reported interval). A mean, not a median: shares of a NIC swing from
one interval to the next, and only their mean is the share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cloudbench.analysis.colocation import Probe
from cloudbench.core import catalog
from cloudbench.spec.vmtypes import VmTypeModel, expected_goodput, goodput_fraction
from cloudbench.store.parquet import read_parquet
from cloudbench.store.rundir import RunDir, iter_observation_files

PARQUET_KIND = "colocation"


def nominal_rate(vm_type: str, provider: str, shaping: Any,
                 spec_nominal: Mapping[str, float]) -> float | None:
    """A host's nominal TCP goodput (bit/s): the spec's ``nominal`` for its vm_type, else its
    testbed shaping (``shaping``: its facts' record; a cap, or a token bucket's high rate),
    else the catalogue's ``network_gbps``; None when nothing says. Wire rates become
    goodput as the shaper counts them (:func:`~cloudbench.spec.vmtypes.goodput_fraction`)."""
    tcp = goodput_fraction("tcp")
    if vm_type in spec_nominal:
        return float(spec_nominal[vm_type]) * tcp
    if isinstance(shaping, dict) and shaping.get("profile"):
        exp = expected_goodput(VmTypeModel.model_validate(shaping["profile"]), "tcp")
        rate = exp.get("rate", exp.get("high_rate"))
        if rate:
            return float(rate)
    if provider in catalog.CLOUDS:
        gbps = catalog.vm_types(provider).get(vm_type, {}).get("network_gbps")
        if gbps:
            return float(gbps) * 1e9 * tcp
    return None


def with_probe_columns(table: pa.Table, probe: int, phase: str, senders: int) -> pa.Table:
    """``table`` (interval rows of one probe) with the probe's number, phase and sender count."""
    n = table.num_rows
    return (table.append_column("probe", pa.array([probe] * n, pa.int16()))
            .append_column("phase", pa.array([phase] * n, pa.string()).dictionary_encode()
                           .cast(pa.dictionary(pa.int8(), pa.string())))
            .append_column("senders", pa.array([senders] * n, pa.int16())))


def probe_rates(table: pa.Table) -> dict[str, float]:
    """Each sender's rate (bit/s) in the probe rows of ``table`` (module doc)."""
    t = table.filter(pc.invert(table.column("derived")))
    src = np.asarray(t.column("src").cast(pa.string()).to_numpy(zero_copy_only=False))
    start = t.column("t_start_us").to_numpy()
    end = t.column("t_end_us").to_numpy()
    nbytes = t.column("bytes").to_numpy().astype(np.float64)
    out: dict[str, float] = {}
    for s in np.unique(src):
        m = src == s
        order = np.argsort(start[m])
        keep = order[1:] if len(order) > 1 else order
        secs = float(np.sum(end[m][keep] - start[m][keep])) / 1e6
        if secs > 0:
            out[str(s)] = float(np.sum(nbytes[m][keep])) * 8 / secs
    return out


@dataclass
class Audit:
    """One trial of the audit: its probes in order and the full-load flows."""

    repetition: int
    trial: str
    hosts: list[str]
    probes: list[Probe] = field(default_factory=list)
    flows: dict[str, str] = field(default_factory=dict)  # full load: sender -> receiver


def load_audits(run: RunDir, workload: str) -> list[Audit]:
    """Every trial of the workload in ``run``, probes rebuilt from the interval rows."""
    out: list[Audit] = []
    for path in iter_observation_files(run, workload):
        t = read_parquet(path, kind=PARQUET_KIND)
        if t.num_rows == 0:
            continue
        rep = int(t.column("repetition")[0].as_py())
        trial = str(t.column("trial")[0].as_py())
        audit = Audit(rep, trial, [])
        for p in sorted(pc.unique(t.column("probe")).to_pylist()):
            part = t.filter(pc.equal(t.column("probe"), p))
            senders = [str(s) for s in pc.unique(part.column("src").cast(pa.string())).to_pylist()]
            phase = str(part.column("phase")[0].as_py())
            audit.probes.append(Probe(frozenset(senders), probe_rates(part), phase))
            if p == 0:
                pairs = pc.unique(pc.binary_join_element_wise(
                    part.column("src").cast(pa.string()), part.column("dst").cast(pa.string()), ">"))
                audit.flows = dict(str(x).split(">", 1) for x in pairs.to_pylist())
        audit.hosts = sorted({h for pr in audit.probes for h in pr.senders})
        out.append(audit)
    return out
