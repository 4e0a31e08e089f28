"""The bins' compiled kernels (``orderstats_bins.c``) against the numpy expressions they replace:
``histogram`` is ``bincount(value_bins(v))`` and ``needed_values`` the second pass's selection,
on both cell types, at the sentinels and the bins' edges, and without a compiler."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cloudbench.analysis import orderstats as ost
from cloudbench.core import ckernels


def _values(dtype: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = int(np.iinfo(dtype).max)
    edges = ost.bin_edges()[1:200:7].astype(np.uint64)  # values at the low bins' edges and one below
    special = [0, 1, 2, 3, top - 1, top, 2**32 - 1, 2**35 - 1, 2**35, 2**53 + 1]
    parts = [rng.lognormal(13, 1.5, 50_000).astype(dtype), rng.integers(0, top, 5_000, dtype=dtype, endpoint=True),
             np.array([x for x in special if x <= top], dtype=dtype), edges.astype(dtype), (edges - 1).astype(dtype)]
    return np.concatenate(parts)


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def compiled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    if request.param:
        if ost._compiled() is None:
            pytest.skip("no C compiler: the numpy path is all there is")
    else:
        monkeypatch.setattr(ost, "_compiled", lambda: None)
    return bool(request.param)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("seed", range(3))
def test_histogram_equals_bincount_of_value_bins(compiled: bool, dtype: Any, seed: int) -> None:
    v = _values(dtype, seed)
    want = np.bincount(ost.value_bins(v), minlength=ost.NBINS)
    got = ost.histogram(v)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert ost.histogram(v[::2]).tolist() == np.bincount(ost.value_bins(v[::2]), minlength=ost.NBINS).tolist()


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
@pytest.mark.parametrize("seed", range(3))
def test_needed_values_are_the_cells_rtts_in_the_needed_bins_in_order(compiled: bool, dtype: Any, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    v = _values(dtype, seed)
    v = v[v <= np.iinfo(dtype).max - 2]
    cells = v + dtype(2)  # as stored: RTT + 2, and 0 (no row) and 1 (no reply) among them
    cells[rng.random(len(cells)) < 0.2] = rng.integers(0, 2, dtype=dtype)
    rtts = cells[cells >= 2] - dtype(2)
    bins = ost.value_bins(rtts)
    need = np.zeros(ost.NBINS, dtype=bool)
    need[rng.choice(np.unique(bins), 25, replace=False)] = True
    need[ost.NBINS - 1] = need[0] = True
    keep = need[bins]
    room = int(np.count_nonzero(keep))
    for r in (room, room + 10):  # exact, and an upper bound (a leaf's histogram over several trials)
        got_bins, got_vals = ost.needed_values(cells, need, r)
        assert got_bins.tolist() == bins[keep].tolist()
        assert got_vals.dtype == np.int64 and got_vals.tolist() == rtts[keep].astype(np.int64).tolist()
    # too little room (a wrong count): the numpy pass answers, never a short list
    got_bins, _ = ost.needed_values(cells, need, max(room - 1, 0))
    assert got_bins.tolist() == bins[keep].tolist()


def test_kernels_build_once_into_the_cache_and_are_none_without_a_compiler(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(ckernels, "_loaded", {})
    monkeypatch.setattr(ckernels, "_typed", {})
    source = Path(ost.__file__).with_name("orderstats_bins.c")
    if shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"):
        assert ckernels.load(source, ost._SIGNATURES) is not None
        assert [p.name.split("-")[0] for p in (tmp_path / "cloudbench").iterdir()] == ["orderstats_bins"]
    monkeypatch.setattr(ckernels, "_loaded", {})
    monkeypatch.setattr(ckernels, "_typed", {})
    for p in (tmp_path / "cloudbench").glob("*"):
        p.unlink()
    monkeypatch.setattr(ckernels.shutil, "which", lambda name: None)
    assert ckernels.load(source, ost._SIGNATURES) is None
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(ckernels, "_loaded", {})
    monkeypatch.setattr(ckernels, "_typed", {})
    assert ckernels.load(broken, {}) is None  # the build fails: the numpy path
