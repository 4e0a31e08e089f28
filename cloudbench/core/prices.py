"""Dated price tables: the bundled ``data/prices.json`` with overrides merged over it."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cloudbench.errors import CloudbenchError


@dataclass(frozen=True)
class PriceTable:
    """The bundled prices: VM hourly, public IPv4 hourly and egress per GB, with date and source."""
    date: str
    currency: str
    source: str
    vm_hourly: dict[str, dict[str, float]]
    public_ipv4_hourly: dict[str, float]
    egress_per_gb: dict[str, dict[str, float]]  # cloud -> egress class -> per GB, at the source
    # Where the source region (or the region pair) sets the price: cloud -> region -> class -> per GB,
    # and cloud -> "src>dst" -> per GB. Clouds price inter-region transfer by where it leaves.
    egress_by_region: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    egress_pairs: dict[str, dict[str, float]] = field(default_factory=dict)
    # Billed at the destination too (Azure's global VNet peering): cloud -> class -> per GB.
    ingress_per_gb: dict[str, dict[str, float]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # cloud -> where its prices come from, when

    def vm(self, provider: str, vm_type: str) -> float | None:
        return self.vm_hourly.get(provider, {}).get(vm_type)

    def egress(self, cloud: str, src_region: str, dst_region: str, klass: str) -> float:
        """Per GB sent from ``src_region`` to ``dst_region`` of ``cloud``, billed at the source."""
        pair = self.egress_pairs.get(cloud, {}).get(f"{src_region}>{dst_region}")
        if pair is not None and klass != "internet":
            return pair
        by_region = self.egress_by_region.get(cloud, {}).get(src_region, {})
        if klass in by_region:
            return by_region[klass]
        return self.egress_per_gb.get(cloud, {}).get(klass, 0.0)

    def ingress(self, cloud: str, klass: str) -> float:
        """Per GB received, billed at the destination (zero on most clouds)."""
        return self.ingress_per_gb.get(cloud, {}).get(klass, 0.0)


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
        egress_by_region={
            c: {r: prices(v, f"egress_by_region.{c}.{r}") for r, v in _obj(regions, f"egress_by_region.{c}").items()}
            for c, regions in _obj(data.get("egress_by_region", {}), "egress_by_region").items()},
        egress_pairs={c: prices(v, f"egress_pairs.{c}")
                      for c, v in _obj(data.get("egress_pairs", {}), "egress_pairs").items()},
        ingress_per_gb={c: prices(v, f"ingress_per_gb.{c}")
                        for c, v in _obj(data.get("ingress_per_gb", {}), "ingress_per_gb").items()},
        sources={str(c): str(v) for c, v in _obj(data.get("price_sources", {}), "price_sources").items()},
    )


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CloudbenchError(f"prices: {where} must be an object")
    return value
