"""The throughput report says once what its ``expected`` column is: the cap less headers and framing."""

from __future__ import annotations

from rich.console import Console

from cloudbench.store.manifest import Manifest
from cloudbench.workloads.throughput.data import RunFacts
from cloudbench.workloads.throughput.report import expected_notes, render
from tests.workloads.throughput.test_workload import _series, spec


def _facts(rate: float) -> RunFacts:
    labels = {h.name: h.labels() for h in spec().topology()}
    cap = {"profile": {"shaping": "cap", "rate": rate}}
    return RunFacts(Manifest.model_validate({
        "campaign": "tput", "run_id": "x",
        "repetitions": [{"index": 0, "stack": "s", "hosts": [
            {"name": n, "labels": lab, "facts": {"shaping": cap}} for n, lab in labels.items()]}],
        "trials": [{"id": "r000-t000-tcp", "repetition": 0, "workload": "tcp", "kind": "throughput",
                    "started_utc": "2026-01-01T00:00:00Z"}],
    }))


def test_the_expected_goodput_of_a_50_mbit_cap_is_explained_once() -> None:
    series = [_series(0, "r000-t000-tcp", "a1", "c1", 47.0), _series(0, "r000-t000-tcp", "c1", "a1", 47.5)]
    notes = expected_notes(series, _facts(50e6), {})
    assert len(notes) == 1, notes  # once per cap and protocol, not per row
    (note,) = notes
    assert note.startswith("expected 47.82 Mbit/s = the vm_type's cap of 50 Mbit/s × 95.6%"), note
    assert "1514-byte frame carries 1448 bytes" in note
    console = Console(width=80, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    render("tcp", {"trials": [], "notes": notes}, console)
    assert "note: expected 47.82 Mbit/s" in " ".join(console.export_text().split())


def test_no_cap_no_note() -> None:
    labels = {h.name: h.labels() for h in spec().topology()}
    facts = RunFacts(Manifest.model_validate({
        "campaign": "tput", "run_id": "x",
        "repetitions": [{"index": 0, "stack": "s", "hosts": [
            {"name": n, "labels": lab, "facts": {}} for n, lab in labels.items()]}],
        "trials": []}))
    assert expected_notes([_series(0, "r000-t000-tcp", "a1", "c1", 47.0)], facts, {}) == []
