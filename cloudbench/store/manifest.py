"""The manifest of a run (``manifest.json``): a typed, versioned record of what ran where.

It is written before the first host exists and after every trial, so a run cut
short still says what it measured. :data:`POOLING_METADATA` names the metadata
that must match before repetitions are pooled (as pyperf checks its metadata);
:func:`pooling_key` computes it from what was measured, not from names: the
resolved values the runner records (:func:`resolve_metadata`, manifest schema 2).
Versions are in :mod:`.formats`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from cloudbench.core.files import write_json_atomic
from cloudbench.errors import ResultError
from cloudbench.spec.vmtypes import resolve_vm_type
from cloudbench.spec.wan import resolve_links
from cloudbench.store import formats

if TYPE_CHECKING:
    from cloudbench.spec.model import Spec


class _Record(BaseModel):
    # Unknown keys of a known version are kept (a newer writer of the same version may add some).
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class HostRecord(_Record):
    """One provisioned host: its labels, address, SSH endpoint and facts."""

    name: str
    labels: dict[str, str]
    address: str = ""
    ssh: str = ""
    facts: dict[str, Any] = Field(default_factory=dict)


class FailureRecord(_Record):
    """One host's failure (what ran, how it ended, the last lines it printed)."""

    host: str
    command: str
    exit_code: int | None = None
    stderr_tail: str = ""
    reason: str = ""


class RepetitionRecord(_Record):
    """One repetition: the hosts it had and how it went."""

    index: int
    provider: str = ""
    stack: str = ""
    started_utc: str | None = None
    ended_utc: str | None = None
    hosts: list[HostRecord] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)
    status: str | None = None  # ok | failed; None while it runs
    deploy_s: float | None = None
    failures: list[FailureRecord] = Field(default_factory=list)


class TrialRecord(_Record):
    """One trial: its files (with checksums), failures and the workers' own stats."""

    id: str
    repetition: int
    workload: str
    kind: str
    started_utc: str | None = None
    ended_utc: str | None = None
    status: str = "running"  # running | ok | partial | failed | ingest (raw files kept, not yet ingested)
    rows: int = 0
    files: dict[str, str] = Field(default_factory=dict)
    failures: list[FailureRecord] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, Any] = Field(default_factory=dict)  # swept parameter values of this trial
    raw: dict[str, str] = Field(default_factory=dict)  # status ingest: raw files kept -> sha256

    @model_serializer(mode="wrap")
    def _without_empty_sweep(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A trial that swept nothing (or keeps no raw files) is written as before those existed.
        out: dict[str, Any] = handler(self)
        for key in ("sweep", "raw"):
            if not out.get(key):
                out.pop(key, None)
        return out


class ResolvedMetadata(_Record):
    """What a run measured, resolved when it ran (manifest schema 2); the pooling guard compares it.

    Names can keep their spelling while what they stand for changes (a vm_type's cap
    50 -> 200 Mbit/s, a default of cloudbench, a region's location), so the runner
    records the values themselves.
    """

    vm_types: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    """Every vm_type a host has -> its shaping profile with defaults (None: a cloud type,
    which its name and the provider define)."""
    wan: dict[str, Any] | None = None
    """``settings`` (the spec's ``wan:`` with defaults) and ``links`` (every region pair's
    resolved delay, branches, hops and weather), or None without a ``wan:``."""
    workloads: list[dict[str, Any]] = Field(default_factory=list)
    """Every workload entry with every parameter, defaults filled in."""


def resolve_metadata(spec: Spec) -> ResolvedMetadata:
    """The :class:`ResolvedMetadata` of a validated spec, as the runner records it."""
    topology = spec.topology()
    vm_types: dict[str, dict[str, Any] | None] = {}
    for name in sorted({h.vm_type for h in topology.hosts}):
        profile = resolve_vm_type(name, spec.vm_types)
        vm_types[name] = None if profile is None else profile.model_dump(mode="json")
    wan: dict[str, Any] | None = None
    if spec.wan is not None:
        regions = sorted({h.region for h in topology.hosts})
        try:
            links: list[dict[str, Any]] | None = [
                dataclasses.asdict(link) for link in resolve_links(spec.wan, regions, topology.region_coords)]
        except ValueError:  # the spec checks refuse this; a link without a delay has nothing to record
            links = None
        wan = {"settings": spec.wan.model_dump(mode="json"), "links": links}
    return ResolvedMetadata(vm_types=vm_types, wan=wan,
                            workloads=[w.resolved() for w in spec.workloads])


class Manifest(_Record):
    """What a run is: spec, seed, plan, hosts with labels and facts, versions, times, files."""

    schema_version: int = Field(default=formats.MANIFEST.current, alias="schema")
    campaign: str
    run_id: str
    status: str = "running"  # running | complete | partial | failed | interrupted
    started_utc: str | None = None
    ended_utc: str | None = None
    error: str | None = None
    # "disk_full": the run failed because the results filesystem filled up; `run --resume` finishes it
    error_kind: str | None = None
    kept_raw: dict[str, str] = Field(default_factory=dict)  # raw files not yet ingested -> sha256
    spec_path: str = ""
    spec_sha256: str = ""
    spec: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    plan: dict[str, Any] = Field(default_factory=dict)
    worker_version: str = ""
    workers: dict[str, dict[str, str]] = Field(default_factory=dict)
    controller: dict[str, Any] = Field(default_factory=dict)
    clock: dict[str, str] = Field(default_factory=dict)
    repetitions: list[RepetitionRecord] = Field(default_factory=list)
    trials: list[TrialRecord] = Field(default_factory=list)
    files: dict[str, str] = Field(default_factory=dict)  # path in the run directory -> sha256
    resolved: ResolvedMetadata | None = None  # schema >= 2; None in a schema-1 manifest

    @model_serializer(mode="wrap")
    def _without_unset_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A schema-1 manifest read and written back stays as it was written (no `resolved`), and
        # a run no full disk stopped is written as before `error_kind` and `kept_raw` existed.
        out: dict[str, Any] = handler(self)
        if out.get("resolved") is None:
            out.pop("resolved", None)
        for key in ("error_kind", "kept_raw"):
            if not out.get(key):
                out.pop(key, None)
        return out

    @property
    def resumable(self) -> bool:
        """Whether ``run --resume`` may finish this run: cut off (running, interrupted) or stopped by a
        full disk."""
        return self.status in ("running", "interrupted") or (self.status == "failed"
                                                             and self.error_kind == "disk_full")

    def workloads(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The spec's workload entries (of one ``kind``)."""
        ws: list[dict[str, Any]] = list(self.spec.get("workloads", []))
        return [w for w in ws if kind is None or w.get("kind") == kind]

    def repetition(self, index: int) -> RepetitionRecord | None:
        return next((r for r in self.repetitions if r.index == index), None)

    def labels(self) -> dict[tuple[int, str], dict[str, str]]:
        """(repetition, host) -> the host's labels."""
        return {(r.index, h.name): h.labels for r in self.repetitions for h in r.hosts}

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


POOLING_METADATA: tuple[str, ...] = ("provider", "regions", "zones", "vm_type", "vm_type_definitions",
                                     "wan", "worker_version", "workloads", "sweeps")
"""Metadata of a repetition that must match before it is pooled with others (the guard of
``confirm``, and of any command that pools repetitions): names (provider, regions, zones,
vm_type), what they stood for when the run measured (the vm_type definitions of its hosts,
the ``wan:`` settings and resolved links, every workload parameter with defaults filled in,
the swept values its trials ran), and the worker versions (name and sha256 of each worker)."""

RESOLVED_POOLING_METADATA: tuple[str, ...] = ("vm_type_definitions", "wan", "sweeps")
"""The keys a schema-1 manifest cannot give (it recorded names, not resolved values);
its ``workloads`` are the entries as its spec was dumped."""


def pooling_key(manifest: Manifest, repetition: int, where: str = "manifest") -> dict[str, str]:
    """The :data:`POOLING_METADATA` of one repetition, in that order.

    A manifest without resolved values (schema 1) gives every key but
    :data:`RESOLVED_POOLING_METADATA`; a comparison skips what a repetition lacks.
    """
    rep = manifest.repetition(repetition)
    if rep is None:
        raise ResultError(where, f"has no repetition {repetition}")
    hosts = rep.hosts

    def labels(key: str) -> str:
        return ",".join(sorted({h.labels[key] for h in hosts}))

    def dump(value: Any) -> str:
        return json.dumps(value, sort_keys=True)

    res = manifest.resolved
    key = {
        "provider": labels("provider"),
        "regions": labels("region"),
        "zones": labels("zone"),
        "vm_type": labels("vm_type"),
        "worker_version": manifest.worker_version,
        "workloads": dump(manifest.workloads() if res is None else res.workloads),
    }
    if res is not None:
        used = sorted({h.labels["vm_type"] for h in hosts})
        key["vm_type_definitions"] = dump({n: res.vm_types.get(n, "<not recorded>") for n in used})
        key["wan"] = dump(res.wan)
        sweeps: dict[str, list[dict[str, Any]]] = {}
        for t in manifest.trials:
            if t.repetition == repetition and t.sweep and t.sweep not in sweeps.setdefault(t.workload, []):
                sweeps[t.workload].append(t.sweep)
        key["sweeps"] = dump({w: sorted(v, key=dump) for w, v in sorted(sweeps.items())})
    ordered = {k: key[k] for k in POOLING_METADATA if k in key}
    assert set(ordered) == set(key)
    return ordered


def migrate_kinds(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest's workload kinds by their current spelling (:data:`.formats.RENAMED_KINDS`), in
    the spec's and the resolved workload entries, the plan's trials and the trials; an entry
    without a name keeps the one its old kind gave it. ``data`` as read, changed in place."""
    resolved = data.get("resolved") if isinstance(data.get("resolved"), dict) else {}
    entries = [*(data.get("spec") or {}).get("workloads", []), *(resolved or {}).get("workloads", [])]
    for w in entries:
        if isinstance(w, dict) and (new := formats.RENAMED_KINDS.get(w.get("kind", ""))):
            w.setdefault("name", w["kind"])
            w["kind"] = new
    for t in [*(data.get("plan") or {}).get("trials", []), *data.get("trials", [])]:
        if isinstance(t, dict) and (new := formats.RENAMED_KINDS.get(t.get("kind", ""))):
            t["kind"] = new
    return data


def load_manifest(path: Path) -> Manifest:
    """Read and check ``manifest.json``; a ResultError says what is wrong with it."""
    if not path.exists():
        raise ResultError(str(path), "no manifest.json here; is this a cloudbench run directory?")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ResultError(str(path), f"manifest is not valid JSON (truncated?): {e}") from e
    if not isinstance(data, dict) or "schema" not in data:
        raise ResultError(str(path), "manifest has no schema version")
    formats.MANIFEST.check(data["schema"], str(path))
    try:
        return Manifest.model_validate(migrate_kinds(data))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ResultError(str(path), f"manifest field {where}: {first['msg']}") from e


def save_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` atomically (a crash leaves the previous version, never half)."""
    write_json_atomic(path, manifest.to_json())
