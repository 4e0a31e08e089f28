"""The integer keys of the echo scan: leaves, cells, report keys and window keys, in one place.

The scan counts per *leaf*, one (repetition, sender, peer) of the run; inside one
trial's round matrices a (sender, peer) is a *cell*. The report's tables sum leaves
into *keys* of three families, laid end to end in one array::

    [ latency groups overall | latency groups per repetition | pairs (sender, peer) ]

Windowed sums are keyed by (file, leaf, window) and, summed over pairs, by (file,
window, latency group). Every encoding and its inverse is a method here: nothing else
computes an index from its parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cloudbench.core.topology import GROUP_ORDER, HostSpec, classify_pair
from cloudbench.errors import ResultError
from cloudbench.store.manifest import Manifest

N_GROUPS = len(GROUP_ORDER)
"""Latency groups (:data:`~cloudbench.core.topology.GROUP_ORDER`); a group's index is its position there."""
_WINDOW_BITS = 32  # a window key's low bits: the window's index in its trial
Index = Any
"""An encoded index: an int for int arguments, a numpy array for arrays."""


class KeySpace:
    """A run's hosts and repetitions (from its manifest) and the keys the scan counts under.

    ``hosts`` are sorted by name and ``repetitions`` by index; a host's or a repetition's
    *position* is its place in those lists. Arguments named ``rp``, ``src``, ``dst`` are
    positions (ints or numpy arrays of them).
    """

    def __init__(self, labels: dict[tuple[int, str], HostSpec]) -> None:
        self.hosts = sorted({n for _, n in labels})
        self.repetitions = sorted({r for r, _ in labels})
        self.host_position = {n: i for i, n in enumerate(self.hosts)}
        self.rep_position = {r: i for i, r in enumerate(self.repetitions)}
        H, R = len(self.hosts), len(self.repetitions)
        self.n_hosts, self.n_reps = H, R
        self.n_cells = H * H
        self.n_leaves = R * H * H
        self.n_keys = N_GROUPS + R * N_GROUPS + H * H
        # the latency group of every (repetition, src, dst); -1 where a host is absent in that repetition
        self.pair_group = np.full((R, H, H), -1, dtype=np.int64)
        for (r, a), la in labels.items():
            for (r2, b), lb in labels.items():
                if r2 == r:
                    self.pair_group[self.rep_position[r], self.host_position[a], self.host_position[b]] = \
                        GROUP_ORDER.index(classify_pair(la, lb))
        rp, src, dst = self.split_leaf(np.arange(self.n_leaves))
        grp = self.pair_group[rp, src, dst]
        self.leaf_keys = (np.where(grp >= 0, self.group_key(grp), -1),
                          np.where(grp >= 0, self.rep_group_key(rp, grp), -1),
                          self.pair_key(src, dst))
        """Per family (groups, groups per repetition, pairs): the key of every leaf; -1 for none."""

    @classmethod
    def of_manifest(cls, manifest: Manifest) -> KeySpace:
        """The key space of a run: its manifest's hosts and their labels per repetition."""
        return cls({(rep, name): HostSpec(name, lab["provider"], lab["region"], lab["zone"], lab["subnet"],
                                          lab["vm_type"])
                    for (rep, name), lab in manifest.labels().items()})

    # cells and leaves
    def cell(self, src: np.ndarray | int, dst: np.ndarray | int) -> Index:
        """The (sender, peer) cell of a trial's matrices."""
        return src * self.n_hosts + dst

    def leaf(self, rp: np.ndarray | int, src: np.ndarray | int, dst: np.ndarray | int) -> Index:
        """The leaf of (repetition, sender, peer)."""
        return (rp * self.n_hosts + src) * self.n_hosts + dst

    def leaf_of_cell(self, rp: int, cell: np.ndarray | int) -> Index:
        """The leaf of a cell of a trial of repetition ``rp``."""
        return rp * self.n_cells + cell

    def rep_leaves(self, rp: int) -> slice:
        """The leaves of repetition ``rp``, in cell order."""
        return slice(rp * self.n_cells, (rp + 1) * self.n_cells)

    def split_leaf(self, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(repetition, sender, peer) positions of leaves."""
        H = self.n_hosts
        return leaf // (H * H), (leaf // H) % H, leaf % H

    # the report's keys
    @staticmethod
    def group_key(group: np.ndarray | int) -> Index:
        """The key of a latency group overall."""
        return group

    @staticmethod
    def rep_group_key(rp: np.ndarray | int, group: np.ndarray | int) -> Index:
        """The key of a latency group in one repetition."""
        return N_GROUPS + rp * N_GROUPS + group

    def pair_key(self, src: np.ndarray | int, dst: np.ndarray | int) -> Index:
        """The key of a (sender, peer) pair over all repetitions."""
        return N_GROUPS + self.n_reps * N_GROUPS + src * self.n_hosts + dst

    def group_of_pair(self, src: int, dst: int) -> int:
        """The pair's latency group in the first repetition that has both hosts; -1 in none."""
        return next((int(self.pair_group[rp, src, dst]) for rp in range(self.n_reps)
                     if self.pair_group[rp, src, dst] >= 0), -1)

    # windows
    def window_key(self, file: int, leaf: int, window: np.ndarray) -> np.ndarray:
        """The keys of a leaf's windows in the run's ``file``-th file."""
        out: np.ndarray = (file * self.n_leaves + leaf) * (1 << _WINDOW_BITS) + window
        return out

    def split_window_key(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(file, leaf, window) of window keys."""
        high = key >> _WINDOW_BITS
        return high // self.n_leaves, high % self.n_leaves, key & ((1 << _WINDOW_BITS) - 1)

    @staticmethod
    def group_window_key(file: np.ndarray, window: np.ndarray, group: np.ndarray) -> np.ndarray:
        """The keys of (file, window, latency group): in file, window, group order."""
        out: np.ndarray = (file * (1 << _WINDOW_BITS) + window) * N_GROUPS + group
        return out

    @staticmethod
    def split_group_window_key(key: int) -> tuple[int, int, int]:
        """(file, window, latency group) of a key of :meth:`group_window_key`."""
        high = int(key) // N_GROUPS
        return high >> _WINDOW_BITS, high & ((1 << _WINDOW_BITS) - 1), int(key) % N_GROUPS

    # repetitions in files
    def rep_positions(self, reps: np.ndarray, where: Path) -> np.ndarray:
        """Positions of repetition indices; one the manifest does not list is an error naming ``where``."""
        lut = np.full(max(self.repetitions, default=0) + 2, -1, dtype=np.int64)
        for r, i in self.rep_position.items():
            lut[r] = i
        pos: np.ndarray = lut[np.clip(reps, -1, len(lut) - 1)]
        if (pos < 0).any():
            raise ResultError(str(where), "holds a repetition that the manifest does not list")
        return pos
