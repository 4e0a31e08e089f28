"""Durations, sizes and rates as people write them in specs."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s|m|min|h|d)?\s*$")
_DURATION_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                   "d": 86400.0}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib|k|m|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1000**3, "gib": 1024**3,
}

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)?\s*$", re.IGNORECASE)
_RATE_UNITS = {
    "bit": 1.0, "bps": 1.0, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
    "gbit": 1e9, "gbps": 1e9,
}


def parse_duration(value: object) -> float:
    """Seconds from ``5``, ``2.5s``, ``500ms``, ``10m``, ``1h``, ``7d``; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"duration {value} is negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]
    raise ValueError(
        f"bad duration {value!r}: write a number with one of the units us, ms, s, m, h, d "
        "(e.g. `500ms`, `20s`, `10m`, `7d`)"
    )


def parse_size(value: object) -> int:
    """Bytes from ``1024``, ``64KiB``, ``1k`` (=1024), ``1kb`` (=1000)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m:
            return int(float(m.group(1)) * _SIZE_UNITS[(m.group(2) or "b").lower()])
    raise ValueError(f"bad size {value!r}: write bytes, or a number with KiB, MiB, GiB, kB, MB")


def parse_bitrate(value: object) -> float:
    """Bits per second from ``500mbit``, ``1gbit``, ``1e6``."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a rate")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        m = _RATE.match(value)
        if m:
            return float(m.group(1)) * _RATE_UNITS[(m.group(2) or "bit").lower()]
    raise ValueError(f"bad bit rate {value!r}: write e.g. `500mbit`, `1gbit`, `100kbit`")


def fmt_duration(seconds: float) -> str:
    """A duration in seconds for people: µs, ms, s, min or h, whichever reads best."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s".replace(".0s", "s")
    if seconds < 7200:
        return f"{seconds / 60:.1f}min"
    return f"{seconds / 3600:.1f}h"


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units, three significant digits: ``812 B``, ``5.43 MB``, ``81.2 GB``."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


_TIME_UNITS = (("s", 1e6), ("ms", 1e3), ("µs", 1.0))
_TIME_SCALE = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


def natural_unit(value: float, unit: str) -> tuple[float, str]:
    """The factor and unit a value of ``unit`` reads best in: microseconds from 1,000 on as ms,
    from 1,000,000 on as s, below as ``µs`` (the data's ``us`` is printed as ``µs``, as every
    report prints it); a fraction (unit ``1``) as a percentage; anything else as it is.
    Multiply the value (and its interval's bounds) by the factor."""
    if unit in _TIME_SCALE:
        us = abs(value) * _TIME_SCALE[unit]
        for name, scale in _TIME_UNITS:
            if us >= scale or name == "µs":
                return _TIME_SCALE[unit] / scale, name
    if unit == "1":
        return 100.0, "%"
    return 1.0, unit


def unit_name(unit: str) -> str:
    """A unit as printed: ``µs`` for the data's ``us``; any other unit as it is."""
    return "µs" if unit == "us" else unit


def fmt_quantity(value: float | None, unit: str, factor: float | None = None, digits: int = 4) -> str:
    """``3.98 ms`` for 3980 us, ``113.4 µs`` for 113.4 us, ``1.2%`` for a fraction 0.012, ``-`` for none or non-finite;
    ``factor``: the scale of another value (an interval's bounds in their estimate's unit),
    then the number alone."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return "-"
    own, name = natural_unit(value, unit)
    scaled = value * (own if factor is None else factor)
    text = f"{scaled:,.0f}" if abs(scaled) >= 10 ** digits else f"{scaled:.{digits}g}"
    if factor is not None:
        return text
    return f"{text}%" if name == "%" else f"{text} {name}".rstrip()
