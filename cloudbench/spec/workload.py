"""What every workload's spec parameters share, and what their checks are given.

Each workload kind defines its parameter model in ``workloads/<kind>/params.py``
as a subclass of :class:`WorkloadModel`; the registry (:mod:`cloudbench.workloads`)
binds the kinds into the spec's ``workloads:`` list. Checks that need the rest of
the document (host names, groups) override :meth:`WorkloadModel.check` and get a
:class:`CheckContext`, so the spec layer never imports a workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from cloudbench.core.pairs import PairSelector
from cloudbench.core.topology import PortRange
from cloudbench.errors import SpecError
from cloudbench.spec.fields import Model, Name
from cloudbench.spec.located import Loc, LocatedYaml

HostSelector = str | list[str]


def resolve_selector(selector: HostSelector, hosts: list[str],
                     groups: Mapping[str, list[str]]) -> list[str]:
    """Host names of a workload's ``hosts``: `all` (``hosts``, in spec order), a group, or a list."""
    if isinstance(selector, list):
        return list(selector)
    if selector == "all":
        return list(hosts)
    return list(groups[selector])


@dataclass(frozen=True)
class CheckContext:
    """The parts of a validated spec that a workload's checks refer to, with their lines."""

    doc: LocatedYaml
    hosts: Mapping[str, Loc]  # every host name -> where it is declared
    groups: Mapping[str, list[str]]

    def error(self, loc: Loc, message: str) -> SpecError:
        return self.doc.error(loc, message)

    def resolve_hosts(self, selector: HostSelector) -> list[str]:
        """Host names of a selector that :meth:`check_selector` accepted."""
        return resolve_selector(selector, list(self.hosts), self.groups)

    def check_selector(self, selector: HostSelector, loc: Loc) -> list[SpecError]:
        """`all`, a group name, or a list of known hosts."""
        if isinstance(selector, str):
            if selector != "all" and selector not in self.groups:
                return [self.error(loc, f"{selector!r} is neither `all` nor a group" + self.choices())]
            return []
        return [self.error((*loc, i), f"unknown host {h!r}") for i, h in enumerate(selector)
                if h not in self.hosts]

    def check_pair_list(self, selector: PairSelector, loc: Loc) -> list[SpecError]:
        """An explicit pair list: known hosts, no host paired with itself."""
        if isinstance(selector, str):
            return []
        errors: list[SpecError] = []
        for i, (a, b) in enumerate(selector):
            for j, h in enumerate((a, b)):
                if h not in self.hosts:
                    errors.append(self.error((*loc, i, j), f"pair names unknown host {h!r}"))
            if a == b:
                errors.append(self.error((*loc, i), f"pair [{a}, {b}] sends to itself; "
                                         "throughput is measured between two hosts"))
        return errors

    def choices(self) -> str:
        """A hint listing the spec's groups."""
        if self.groups:
            return f" (groups: {', '.join(self.groups)})"
        return " (the spec defines no `groups`)"


class WorkloadModel(Model):
    """Base of every workload's parameters: its ``kind`` (the registry key) and ``name``."""

    kind: str
    name: Name

    def check(self, ctx: CheckContext, loc: Loc) -> list[SpecError]:
        """Errors that depend on the rest of the spec (hosts, groups); none by default."""
        return []

    def listen_ports(self) -> list[PortRange]:
        """Ports its workers or tools listen on, on the measured hosts; none by default."""
        return []

    def resolved(self) -> dict[str, Any]:
        """Every parameter as the run uses it: the entry with its defaults, and the values a kind
        derives from others where the spec leaves them out (the pooling guard compares these)."""
        out: dict[str, Any] = self.model_dump(mode="json")
        return out


def workload_kinds_of(model: Any) -> dict[str, type[WorkloadModel]]:
    """kind -> parameter model, for a union of workload models (or one model)."""
    if isinstance(model, type) and issubclass(model, WorkloadModel):
        kinds = get_args(model.model_fields["kind"].annotation)  # Literal["echo"] -> ("echo",)
        return {str(k): model for k in kinds}  # a kind and its old spellings (aliases)
    out: dict[str, type[WorkloadModel]] = {}
    for m in get_args(model):  # Union members, Annotated's type (its metadata yields nothing)
        out.update(workload_kinds_of(m))
    return out
