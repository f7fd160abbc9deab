"""The soma's piece is never cut away: a check the loop makes on every edit when the soma (root) is known.

Why a loop rule and not a Validator's judgement: the soma is an input the user gives (the root-seeded protocol
seeds APP2 at the mask voxel nearest it), not something an agent decides, so it holds for every backend and
every Table 3 row. Without it an edit could delete the soma's piece where it looked like noise from inside one
block: the Validators count pieces on the block's region only, where a part of the tree can look small, and the
editor removes what its frame holds, not only the piece it was asked to. On one SYNTHETIC bigneuron volume
(nnU-Net-style mask) the loop accepted such edits, the voxel nearest the soma ended in a one-voxel piece, and the
root-seeded reconstruction was empty (F1 18.51 -> 0.00).

The rule, on the block's region, against the soma's piece as it was when the round began:

* no edit deletes the seed (the mask voxel nearest the soma);
* a noise removal (``FP``) deletes no voxel of the soma's piece: noise is, by the Inspector's definition,
  a piece other than the tree;
* no edit splits the soma's piece (more region components of it after the edit than before); a cut of an
  attached branch (a spur, a touching fibre) that leaves the rest in one piece stays allowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.topology.blocks import Slices

NOISE = "FP"


@dataclass(frozen=True)
class RegionSoma:
    """The soma's piece seen from one block's region: its voxels there (bool, region shape, as the round
    began) and the seed in region coordinates (None when the seed lies outside the region)."""

    piece: np.ndarray
    seed: tuple[int, int, int] | None

    def refusal(self, kind: str, region: np.ndarray, window: Slices, after: np.ndarray) -> str | None:
        """Why the edit that writes ``after`` into ``window`` of region mask ``region`` (bool) must be refused, or
        None. ``kind`` is the defect's kind (``FP`` noise, ``FN`` break, or another). Only the window is read
        unless the edit deletes voxels of the piece (an edit changes nothing outside its window)."""
        from neurorefiner.topology.components import label_components

        region, after = np.asarray(region, bool), np.asarray(after, bool)
        lost = self.piece[window] & region[window] & ~after
        n_lost = int(lost.sum())
        if n_lost == 0:
            return None
        if self.seed is not None:
            local = tuple(v - w.start for v, w in zip(self.seed, window))
            if all(0 <= v < n for v, n in zip(local, lost.shape)) and lost[local]:
                return "the edit deletes the mask voxel at the soma"
        if kind == NOISE:
            return f"a noise removal deletes {n_lost} voxels of the soma's piece"
        kept = self.piece & region
        _, n_before = label_components(kept)
        kept[window] &= after
        _, n_after = label_components(kept)
        if n_after > n_before:
            return f"the edit splits the soma's piece ({n_before} -> {n_after} parts in this region)"
        return None


@dataclass(frozen=True)
class SomaPiece:
    """The piece of the whole mask that holds the voxel nearest the soma, and that voxel (the seed)."""

    piece: np.ndarray
    seed: tuple[int, int, int]

    @classmethod
    def of(cls, mask: np.ndarray, root: Sequence[float] | None, spacing: Sequence[float]) -> SomaPiece | None:
        """The soma's piece of ``mask`` (bool ZYX) for ``root`` (ZYX voxels); None without a root or a mask."""
        from neurorefiner.topology.components import label_components
        from neurorefiner.topology.tree_root import nearest_foreground

        if root is None:
            return None
        mask = np.asarray(mask, bool)
        seed = nearest_foreground(mask, root, spacing)
        if seed is None:
            return None
        labels, _ = label_components(mask)
        seed_t = tuple(int(v) for v in seed)
        return cls(labels == labels[seed_t], seed_t)  # type: ignore[arg-type]

    def in_region(self, region: Slices) -> RegionSoma | None:
        """What a block whose region is ``region`` sees of the piece; None when the piece misses the region."""
        piece = self.piece[region]
        if not piece.any():
            return None
        local = tuple(s - r.start for s, r in zip(self.seed, region))
        inside = all(0 <= v < n for v, n in zip(local, piece.shape))
        return RegionSoma(piece, local if inside else None)  # type: ignore[arg-type]
