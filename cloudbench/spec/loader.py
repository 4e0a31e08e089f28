"""Load a spec file: YAML with lines, pydantic validation, checks; errors name file, line and field.

The functions take the spec model to validate against (``model``): the registry
(:mod:`cloudbench.workloads`) passes the :class:`~.model.Spec` subclass that knows
every workload kind, so this layer needs none of them.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cloudbench.errors import SpecError, SpecErrors
from cloudbench.spec.checks import check_spec
from cloudbench.spec.located import Loc, LocatedYaml, format_loc, load_yaml
from cloudbench.spec.model import Spec
from cloudbench.spec.providers import PROVIDER_MODELS
from cloudbench.spec.workload import workload_kinds_of

S = TypeVar("S", bound=Spec)


def json_schema(model: type[Spec]) -> dict[str, Any]:
    """The JSON Schema of ``model`` (for editors' YAML plugins)."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cloudbench campaign spec"
    return schema


def load_spec(path: str | Path, model: type[S]) -> S:
    """Read and validate a spec file; raises SpecError(s) naming file, line and field."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError as e:
        raise SpecError(str(p), None, "", "no such file") from e
    except OSError as e:
        raise SpecError(str(p), None, "", f"cannot read: {e.strerror}") from e
    return parse_spec(text, model, str(p))


def parse_spec(text: str, model: type[S], path: str = "<spec>") -> S:
    """Validate spec text (``path`` is only used in error messages)."""
    doc = load_yaml(text, path)
    if not isinstance(doc.data, dict):
        raise SpecError(path, 1, "", "a spec is a mapping (name:, providers:, workloads:, …)")
    try:
        spec = model.model_validate(doc.data)
    except ValidationError as e:
        raise SpecErrors([_from_pydantic(doc, err, model) for err in e.errors()]) from None
    errors, warnings = check_spec(spec, doc)
    if errors:
        raise SpecErrors(errors)
    spec._warnings = warnings
    return spec


# pydantic puts the member it tried into an error's loc; these are not spec fields.
_UNION_TAGS = {"float", "int", "list[str]", "list[constrained-str]", "str",
               "host count", "host list", "host name", "host mapping"}  # SubnetModel.hosts


def _from_pydantic(doc: LocatedYaml, err: Any, model: type[Spec]) -> SpecError:
    loc: Loc = tuple(err["loc"])
    typ = err["type"]
    msg = err["msg"]
    # A literal/union tag mismatch reports the tag in loc, and a union of models the
    # member's class name; keep the real fields only.
    tags = _UNION_TAGS | set(_workload_models(model)) | _model_names(model)
    clean = tuple(x for x in loc if not (isinstance(x, str) and ("[" in x or x in tags)))
    if typ == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}" + _known_keys_hint(clean[:-1], doc, model)
    elif typ == "missing":
        msg = f"required key {loc[-1]!r} is missing"
    elif typ == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif "input" in err and typ not in ("union_tag_invalid",):
        shown = json.dumps(err["input"], default=str)
        if len(shown) < 60:
            msg = f"{msg} (got {shown})"
    return SpecError(doc.path, doc.line_of(loc), format_loc(clean), msg)


def _workload_models(model: type[Spec]) -> dict[str, type[BaseModel]]:
    """kind -> parameter model of the workloads ``model`` accepts."""
    (item,) = typing.get_args(model.model_fields["workloads"].annotation)
    return dict(workload_kinds_of(item))


@functools.cache
def _model_names(model: type[BaseModel]) -> frozenset[str]:
    """Class names of every model reachable from ``model``'s fields (union tags in error locs)."""
    names: set[str] = set()
    todo = [model]
    while todo:
        m = todo.pop()
        if m.__name__ in names:
            continue
        names.add(m.__name__)
        for f in m.model_fields.values():
            todo += list(_models_in(f.annotation))
    return frozenset(names)


def _known_keys_hint(parent: Loc, doc: LocatedYaml, model: type[Spec]) -> str:
    found = _model_at(parent, doc, model)
    if found is None:
        return ""
    return "; known keys: " + ", ".join(sorted(found.model_fields))


def _model_at(loc: Loc, doc: LocatedYaml, spec_model: type[Spec]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (for hints).

    Walks the field annotations from the spec model down: a field typed by a
    model (directly, or as the items of a list or the values of a dict) leads to
    it; workloads are told apart by ``kind``, providers by their name.
    """
    model: type[BaseModel] = spec_model
    data: Any = doc.data
    i = 0
    while i < len(loc):
        key = str(loc[i])
        field = model.model_fields.get(key)
        if field is None:
            return None
        data = _get(data, (loc[i],))
        candidates = list(_models_in(field.annotation))
        if model is spec_model and key == "providers":
            candidates = [PROVIDER_MODELS[str(loc[i + 1])]] if i + 1 < len(loc) and \
                str(loc[i + 1]) in PROVIDER_MODELS else []
        elif model is spec_model and key == "workloads" and i + 1 < len(loc):
            item = _get(data, (loc[i + 1],))
            kind = item.get("kind") if isinstance(item, dict) else None
            found = _workload_models(spec_model).get(str(kind))
            candidates = [found] if found is not None else []
        if len(candidates) != 1:
            return None
        nested = candidates[0]
        if _is_container(field.annotation) or (model is spec_model and key == "providers"):
            if i + 1 >= len(loc):
                return None
            data = _get(data, (loc[i + 1],))
            i += 2
        else:
            i += 1
        model = nested
    return model


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """Model classes an annotation refers to (through Optional, list, dict, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _is_container(annotation: Any) -> bool:
    """Whether the field holds a list or dict of its models (so loc has an index or key next)."""
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return True
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return any(_is_container(a) for a in typing.get_args(annotation))
    return False


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        try:
            data = data[p]
        except (KeyError, IndexError, TypeError):
            return None
    return data
