"""The manifest of a run (``manifest.json``): a typed, versioned record of what ran where.

It is written before the first host exists and after every trial, so a run cut
short still says what it measured. :data:`POOLING_METADATA` names the metadata
that must match before repetitions are pooled (as pyperf checks its metadata);
:func:`pooling_key` computes it. Versions are in :mod:`.formats`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from cloudbench.core.files import write_json_atomic
from cloudbench.errors import ResultError
from cloudbench.store import formats


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

    @model_serializer(mode="wrap")
    def _without_unset_disk_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A run no full disk stopped is written as before these fields existed.
        out: dict[str, Any] = handler(self)
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


POOLING_METADATA: tuple[str, ...] = ("provider", "regions", "zones", "vm_type", "worker_version",
                                     "workloads")
"""Metadata of a repetition that must match before it is pooled with others."""


def pooling_key(manifest: Manifest, repetition: int, where: str = "manifest") -> dict[str, str]:
    """The :data:`POOLING_METADATA` of one repetition."""
    rep = manifest.repetition(repetition)
    if rep is None:
        raise ResultError(where, f"has no repetition {repetition}")
    hosts = rep.hosts

    def labels(key: str) -> str:
        return ",".join(sorted({h.labels[key] for h in hosts}))

    key = {
        "provider": labels("provider"),
        "regions": labels("region"),
        "zones": labels("zone"),
        "vm_type": labels("vm_type"),
        "worker_version": manifest.worker_version,
        "workloads": json.dumps(manifest.workloads(), sort_keys=True),
    }
    assert tuple(key) == POOLING_METADATA
    return key


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
        return Manifest.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ResultError(str(path), f"manifest field {where}: {first['msg']}") from e


def save_manifest(path: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` atomically (a crash leaves the previous version, never half)."""
    write_json_atomic(path, manifest.to_json())
