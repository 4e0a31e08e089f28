"""YAML loading that remembers where every key and item came from.

pydantic reports errors by location (a tuple of keys and indices); to turn that
into ``file:line`` we keep a map from each location to the line it starts on.
"""

from __future__ import annotations

from typing import Any

import yaml

from cloudbench.errors import SpecError

Loc = tuple[str | int, ...]


class LocatedYaml:
    """Parsed YAML data plus the line (1-based) of every mapping key and list item."""

    def __init__(self, data: Any, lines: dict[Loc, int], path: str) -> None:
        self.data = data
        self.lines = lines
        self.path = path

    def line_of(self, loc: Loc) -> int | None:
        """Line of the deepest prefix of ``loc`` that exists in the document.

        Elements of ``loc`` that are not in the document (pydantic adds union tags
        and validator names) are skipped rather than ending the walk.
        """
        best: int | None = self.lines.get(())
        cur: Loc = ()
        for item in loc:
            nxt = (*cur, item)
            if nxt in self.lines:
                cur = nxt
                best = self.lines[nxt]
        return best

    def error(self, loc: Loc, message: str) -> SpecError:
        return SpecError(self.path, self.line_of(loc), format_loc(loc), message)


def format_loc(loc: Loc) -> str:
    """A location in a YAML document as a dotted path with indices (``workloads[0].rate``)."""
    out = ""
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
        else:
            out += ("." if out else "") + str(item)
    return out


def load_yaml(text: str, path: str) -> LocatedYaml:
    """Parse a YAML spec, keeping the line of every value; SpecError names the file and line."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(path, 1, "", "the file is empty; a spec needs at least `name` and `workloads`")
        lines: dict[Loc, int] = {(): node.start_mark.line + 1}
        _walk(loader, node, (), lines, path)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        raise SpecError(path, line, "", f"not valid YAML: {e.problem or e}") from e
    except yaml.YAMLError as e:
        raise SpecError(path, None, "", f"not valid YAML: {e}") from e
    finally:
        loader.dispose()
    return LocatedYaml(data, lines, path)


def _walk(loader: yaml.SafeLoader, node: yaml.Node, loc: Loc, lines: dict[Loc, int], path: str) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int):
                key = str(key)
            if key in seen:
                raise SpecError(
                    path,
                    key_node.start_mark.line + 1,
                    format_loc((*loc, key)),
                    f"duplicate key {key!r} (YAML would silently keep only the last one)",
                )
            seen.add(key)
            lines[(*loc, key)] = key_node.start_mark.line + 1
            _walk(loader, value_node, (*loc, key), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*loc, i)] = item.start_mark.line + 1
            _walk(loader, item, (*loc, i), lines, path)
