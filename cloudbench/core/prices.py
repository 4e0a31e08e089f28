"""Dated price tables: the bundled ``data/prices.json`` with overrides merged over it."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cloudbench.errors import CloudbenchError


@dataclass(frozen=True)
class PriceTable:
    date: str
    currency: str
    source: str
    vm_hourly: dict[str, dict[str, float]]
    public_ipv4_hourly: dict[str, float]
    egress_per_gb: dict[str, dict[str, float]]

    def vm(self, provider: str, vm_type: str) -> float | None:
        return self.vm_hourly.get(provider, {}).get(vm_type)


def _bundled() -> dict[str, Any]:
    text = resources.files("cloudbench").joinpath("data/prices.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def load_prices(override: str | Path | Mapping[str, Any] | None = None,
                base: Path | None = None) -> PriceTable:
    """The bundled table, with ``override`` (a JSON file or a mapping) merged over it."""
    data = _bundled()
    if override is not None:
        if isinstance(override, Mapping):
            extra: Any = dict(override)
            origin = "the spec's prices"
        else:
            path = Path(override).expanduser()
            if not path.is_absolute() and base is not None:
                path = base / path
            try:
                extra = json.loads(path.read_text())
            except FileNotFoundError:
                raise CloudbenchError(f"price file {path} does not exist") from None
            except (OSError, json.JSONDecodeError) as e:
                raise CloudbenchError(f"price file {path} is not readable JSON: {e}") from None
            origin = str(path)
        if not isinstance(extra, dict):
            raise CloudbenchError(f"{origin}: a price table is a JSON object")
        data = _merge(data, extra)
        if "source" not in extra:
            data["source"] = f"{data['source']} Overridden in part by {origin}."
    return _validate(data)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _validate(data: dict[str, Any]) -> PriceTable:
    def prices(obj: Any, where: str) -> dict[str, float]:
        if not isinstance(obj, dict):
            raise CloudbenchError(f"prices: {where} must be an object of numbers")
        out: dict[str, float] = {}
        for k, v in obj.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise CloudbenchError(f"prices: {where}.{k} must be a number >= 0 (got {v!r})")
            out[str(k)] = float(v)
        return out

    for key in ("date", "currency", "source"):
        if not isinstance(data.get(key), str):
            raise CloudbenchError(f"prices: `{key}` must be a string")
    vm = data.get("vm_hourly", {})
    eg = data.get("egress_per_gb", {})
    if not isinstance(vm, dict) or not isinstance(eg, dict):
        raise CloudbenchError("prices: `vm_hourly` and `egress_per_gb` are objects keyed by cloud")
    return PriceTable(
        date=data["date"],
        currency=data["currency"],
        source=data["source"],
        vm_hourly={c: prices(v, f"vm_hourly.{c}") for c, v in vm.items()},
        public_ipv4_hourly=prices(data.get("public_ipv4_hourly", {}), "public_ipv4_hourly"),
        egress_per_gb={c: prices(v, f"egress_per_gb.{c}") for c, v in eg.items()},
    )
