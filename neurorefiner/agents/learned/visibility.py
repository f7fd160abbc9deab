"""Which candidate edits the learned Inspector can see through the inputs it is given (Table 5).

Why: the paper's Table 5 asks what each of the Inspector's inputs adds: the global mask MIP, the block MIPs, each
block's Betti-0. The learned Inspector enumerates candidates from the 3D components, so without this it would see
every defect whatever its inputs and the table's rows would coincide. Here a candidate is kept only when the
views it is given show it:

* ``global_mip``: the xy MIP of the whole mask. Pieces at different depths merge where their projections
  overlap anywhere in the volume, so a join is seen only if its two ends lie on different components of the MIP,
  and a loose piece only if its MIP component holds no other piece.
* ``block_mips``: the same xy MIP labelled inside each block's tile alone: a crossing far away no longer hides a
  gap, though a crossing inside the tile still does.
* ``betti0``: each block's 3D components: every join and loose piece is seen (the full method).

A prune (a branch attached to the tree) is seen in any MIP: its candidates are always kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.candidates import Candidate
from neurorefiner.agents.pieces import tile_labels
from neurorefiner.topology.blocks import Block

ALL_INPUTS = ("global_mip", "block_mips", "betti0")


def _global_labels(mip: np.ndarray) -> np.ndarray:
    from neurorefiner.topology.components import label_components

    return np.asarray(label_components(mip[None])[0][0], np.int64)


def _pieces_per_component(view: np.ndarray, labels3d: np.ndarray) -> np.ndarray:
    """For each 2D component of ``view``: how many 3D pieces project into it."""
    z, y, x = np.nonzero(labels3d)
    comp, piece = view[y, x], labels3d[z, y, x].astype(np.int64)
    stride = int(piece.max(initial=0)) + 1
    pairs = np.unique(comp * stride + piece)
    return np.bincount(pairs // stride, minlength=int(view.max(initial=0)) + 1)


def _seen_in(view: np.ndarray, per_component: np.ndarray, c: Candidate) -> bool:
    if c.kind == "join":
        (_, ya, xa), (_, yb, xb) = c.anchors[0], c.anchors[-1]
        return bool(view[ya, xa] != view[yb, xb] or view[ya, xa] == 0)
    if c.kind == "remove":
        _, y, x = c.anchors[0]
        return bool(view[y, x] == 0 or per_component[view[y, x]] <= 1)
    return True


def visible(candidates: Sequence[Candidate], labels3d: np.ndarray, blocks: Sequence[Block],
            inputs: Sequence[str]) -> np.ndarray:
    """One bool per candidate: whether any of ``inputs`` shows it (module docstring). ``labels3d``: the pieces
    the candidates' ``pieces`` refer to (:func:`neurorefiner.agents.candidates.find_candidates`' labels)."""
    unknown = set(inputs) - set(ALL_INPUTS)
    if unknown:
        raise ValueError(f"unknown Inspector input(s) {sorted(unknown)}; choose from {ALL_INPUTS}")
    if "betti0" in inputs or not candidates:
        return np.ones(len(candidates), bool)
    mip = np.asarray(labels3d > 0).max(axis=0)
    views = []
    if "global_mip" in inputs:
        views.append(_global_labels(mip))
    if "block_mips" in inputs:
        views.append(np.asarray(tile_labels(mip, blocks)[0], np.int64))
    counted = [(v, _pieces_per_component(v, labels3d)) for v in views]
    return np.array([any(_seen_in(v, n, c) for v, n in counted) for c in candidates], bool)
