"""``ckernels.load``: the one way a module gets its C kernels. A library is built once into the
per-machine cache and loaded once a process; the caller's ctypes signatures are applied to the
functions it gets back, and a second call gives the same functions without building or loading
again."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cloudbench.core import ckernels

pytestmark = pytest.mark.skipif(ckernels.compiler() is None, reason="no C compiler: load gives None (tested "
                                                                    "in tests/analysis/test_orderstats_bins.py)")

SOURCE = """
double cb_scale(double x, long long k) { return x * (double)k; }
long long cb_add(long long a, long long b) { return a + b; }
"""
SCALE: dict[str, ckernels.Signature] = {"cb_scale": (ctypes.c_double, (ctypes.c_double, ctypes.c_int64))}


def _counting(monkeypatch: pytest.MonkeyPatch, obj: Any, name: str) -> list[int]:
    """Count the calls of ``obj.name`` (still called)."""
    calls = [0]
    real: Callable[..., Any] = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, name, counted)
    return calls


@pytest.fixture
def source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small C file, an empty kernel cache, and a process that has loaded nothing yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(ckernels, "_loaded", {})
    monkeypatch.setattr(ckernels, "_typed", {})
    path = tmp_path / "tiny.c"
    path.write_text(SOURCE)
    return path


def test_a_second_load_neither_rebuilds_nor_reloads_and_the_signature_is_applied(
        source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builds = _counting(monkeypatch, ckernels, "compile_c")
    loads = _counting(monkeypatch, ctypes, "CDLL")
    fns = ckernels.load(source, SCALE)
    assert fns is not None and (builds[0], loads[0]) == (1, 1)
    scale: Any = fns["cb_scale"]  # a ctypes function: restype and argtypes
    assert scale.restype is ctypes.c_double
    assert tuple(scale.argtypes) == (ctypes.c_double, ctypes.c_int64)
    assert scale(1.5, 3) == 4.5  # without the signature: an int result, and no conversion of 1.5 at all
    assert ckernels.load(source, SCALE) is fns  # the same functions: nothing built, loaded or typed again
    assert (builds[0], loads[0]) == (1, 1)

    # a new process (nothing loaded) on the same machine: the cached library, loaded, not built
    monkeypatch.setattr(ckernels, "_loaded", {})
    monkeypatch.setattr(ckernels, "_typed", {})
    again = ckernels.load(source, SCALE)
    assert again is not None and again["cb_scale"](2.0, -4) == -8.0
    assert (builds[0], loads[0]) == (1, 2)
    assert [p.name.split("-")[0] for p in (source.parent / "cache" / "cloudbench").iterdir()] == ["tiny"]


def test_other_signatures_for_the_same_source_get_their_own_functions_on_the_one_library(
        source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loads = _counting(monkeypatch, ctypes, "CDLL")
    fns = ckernels.load(source, SCALE)
    add_sig: dict[str, ckernels.Signature] = {"cb_add": (ctypes.c_int64, (ctypes.c_int64, ctypes.c_int64)),
                                              "cb_scale": (ctypes.c_double, (ctypes.c_double, ctypes.c_double))}
    other = ckernels.load(source, add_sig)
    assert fns is not None and other is not None and loads[0] == 1
    assert other["cb_add"](2**40, 5) == 2**40 + 5  # a 64-bit result: the c_int64 restype, not ctypes' int
    assert other["cb_scale"] is not fns["cb_scale"]
    first: Any = fns["cb_scale"]
    assert tuple(first.argtypes) == (ctypes.c_double, ctypes.c_int64)  # untouched
    assert fns["cb_scale"](0.5, 3) == 1.5


def test_a_name_the_library_lacks_is_an_error_not_the_numpy_path(source: Path) -> None:
    with pytest.raises(AttributeError, match="cb_missing"):
        ckernels.load(source, {"cb_missing": (None, ())})
    assert ckernels.load(source, SCALE) is not None  # the library itself loaded fine
