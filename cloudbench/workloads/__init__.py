"""The workload registry: every kind, and the spec model that knows them all.

A new workload is one folder under ``workloads/`` and one line in :data:`KINDS`.
The spec layer types workloads by their base model; :data:`SPEC_MODEL` is the
:class:`~cloudbench.spec.model.Spec` whose ``workloads`` accepts exactly the
registered kinds (told apart by ``kind``), and :func:`load_spec` validates
against it.
"""

from __future__ import annotations

import functools
import operator
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, create_model

from cloudbench.spec import loader
from cloudbench.spec.model import Spec
from cloudbench.store.formats import RENAMED_KINDS
from cloudbench.workloads.base import WorkloadKind
from cloudbench.workloads.colocation.controller import ColocationKind
from cloudbench.workloads.echo.controller import EchoKind
from cloudbench.workloads.tbdrain.controller import TbDrainKind
from cloudbench.workloads.throughput.controller import ThroughputKind
from cloudbench.workloads.traceroute.controller import TracerouteKind

KINDS: dict[str, WorkloadKind] = {k.kind: k for k in (
    EchoKind(),
    TracerouteKind(),
    ThroughputKind(),
    TbDrainKind(),
    ColocationKind(),
)}

KIND_ALIASES: dict[str, str] = RENAMED_KINDS
"""Old spellings of a kind -> the kind (specs accept them; manifests are migrated on reading)."""


def workload_kind(kind: str) -> WorkloadKind:
    """The registered kind called ``kind``; KeyError names the known ones."""
    try:
        return KINDS[KIND_ALIASES.get(kind, kind)]
    except KeyError:
        raise KeyError(f"no workload kind {kind!r} (known: {', '.join(KINDS)})") from None


def _spec_model() -> type[Spec]:
    members: Any = functools.reduce(operator.or_, (k.params for k in KINDS.values()))
    item = Annotated[members, Field(discriminator="kind")]
    model: type[Spec] = create_model(
        "Spec", __base__=Spec, __doc__="A measurement campaign.",
        workloads=(list[item], Field(min_length=1, description="what to measure, in trials "
                                     "(one entry per workload; `kind` says which)")),
    )
    return model


SPEC_MODEL: type[Spec] = _spec_model()


def load_spec(path: str | Path) -> Spec:
    """Read and validate a spec file; SpecError(s) name the file, the line and the field."""
    return loader.load_spec(path, SPEC_MODEL)


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Validate spec text (``path`` only names it in errors)."""
    return loader.parse_spec(text, SPEC_MODEL, path)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a spec with every registered workload kind."""
    return loader.json_schema(SPEC_MODEL)


__all__ = ["KINDS", "KIND_ALIASES", "SPEC_MODEL", "WorkloadKind", "json_schema", "load_spec", "parse_spec",
           "workload_kind"]
