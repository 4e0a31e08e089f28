"""``--threshold`` of ``compare`` and ``--changes``: a relative share or a value with a unit."""

from __future__ import annotations

import re

from cloudbench.analysis.compare import Threshold
from cloudbench.errors import UsageError

_NUMBER = r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
# absolute thresholds: unit -> (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "ns": ("time", 1e-3), "us": ("time", 1.0), "µs": ("time", 1.0), "ms": ("time", 1e3), "s": ("time", 1e6),
    "kbit/s": ("rate", 1e-3), "Mbit/s": ("rate", 1.0), "Gbit/s": ("rate", 1e3),
    "kbps": ("rate", 1e-3), "Mbps": ("rate", 1.0), "Gbps": ("rate", 1e3),
    "Mbit": ("volume", 1.0), "Gbit": ("volume", 1e3),
}


def parse_threshold(text: str) -> Threshold:
    """``5%`` (relative), ``0.05`` (a share), ``50us``, ``2ms``, ``100Mbit/s`` (absolute)."""
    raw = text.strip()
    m = re.fullmatch(rf"({_NUMBER})\s*(\S*)", raw)
    if m is None:
        raise UsageError(f"--threshold {text!r}: not a number, percentage or value with a unit "
                         "(examples: 5%, 0.05, 50us, 2ms, 100Mbit/s)")
    value, unit = float(m.group(1)), m.group(2)
    if value < 0:
        raise UsageError(f"--threshold {text!r}: must not be negative")
    if unit == "%":
        return Threshold(value / 100.0, True)
    if unit == "":
        if value >= 1:
            raise UsageError(f"--threshold {text!r}: a bare number is a share (0.05 = 5%); "
                             "write 5% or give a unit (50us)")
        return Threshold(value, True)
    if unit not in _UNITS:
        raise UsageError(f"--threshold {text!r}: unknown unit {unit!r} (known: %, {', '.join(_UNITS)})")
    return Threshold(value, False, unit)


def threshold_in(t: Threshold, unit: str) -> float | None:
    """An absolute threshold in a series' ``unit``; None when the dimensions differ."""
    if t.relative:
        return t.value
    if unit == t.unit:
        return t.value
    a, b = _UNITS.get(t.unit), _UNITS.get(unit)
    if a is None or b is None or a[0] != b[0]:
        return None
    return t.value * a[1] / b[1]

