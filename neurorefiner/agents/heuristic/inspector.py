"""The heuristic Global Inspector: flags blocks from whole-volume components (see ``detect``).

The paper's Inspector reads three inputs (Table 5): the global mask MIP, the block MIPs and each
block's Betti-0. Here the inputs decide what geometry the detector sees:

* ``betti0`` present: the 3D components (the full method);
* ``block_mips`` without ``betti0``: the xy MIP cut at block borders (each tile labelled alone, so a
  fibre crossing a border looks broken there and depth is lost);
* ``global_mip`` only: the xy MIP of the whole volume (depth lost, crossings merge).

A defect found in 2D is lifted back to 3D at the first foreground slice under its pixel.
"""

from __future__ import annotations

import time

import numpy as np

from neurorefiner.agents.heuristic.detect import DetectSettings, find_defects
from neurorefiner.agents.pieces import tile_labels
from neurorefiner.agents.roles import CallInfo, Defect, Flag, GlobalView, Inspection
from neurorefiner.topology.blocks import block_of_point


def _defect_xy(defect: Defect) -> np.ndarray:
    """Where a defect sits in xy: the gap's middle for a break, the piece for noise."""
    a = np.asarray(defect.anchors, dtype=float)
    return a.mean(axis=0)


def _lift(defect: Defect, mask: np.ndarray) -> Defect:
    anchors = []
    for _, y, x in defect.anchors:
        column = mask[:, y, x]
        anchors.append((int(column.argmax()) if column.any() else mask.shape[0] // 2, int(y), int(x)))
    return Defect(defect.kind, tuple(anchors), defect.size, defect.note + " (seen in the xy MIP)")


class HeuristicInspector:
    """Deterministic Inspector: breaks (FN) and noise (FP) from component geometry."""

    name = "heuristic"

    def __init__(self, fp_max_size: int = 60, blob_max_size: int = 400, blob_elongation: float = 2.5,
                 fn_min_size: int = 20, gap_max: float = 20.0, max_candidates: int = 64, signal_min: float = 0.25,
                 end_radius: float = 8.0, signal_path: bool = True, signal_by_gap: bool = True,
                 ends_not_blobs: bool = True, near_tree: int = 0) -> None:
        self.settings = DetectSettings(fp_max_size, blob_max_size, blob_elongation, fn_min_size, gap_max,
                                       max_candidates, signal_min, end_radius, signal_path, signal_by_gap,
                                       ends_not_blobs, near_tree)

    def defects(self, view: GlobalView) -> list[Defect]:
        """Every defect in priority order (breaks by gap length, then noise by size)."""
        mask = np.asarray(view.mask, dtype=bool)
        if "betti0" in view.inputs:
            return find_defects(mask, view.image, view.spacing, self.settings)
        mask2, image2 = mask.max(axis=0)[None], np.asarray(view.image).max(axis=0)[None]
        labels = tile_labels(mask2[0], view.blocks) if "block_mips" in view.inputs else None
        flat = find_defects(mask2, image2, (1.0, view.spacing[1], view.spacing[2]), self.settings, labels=labels)
        return [_lift(d, mask) for d in flat]

    def inspect(self, view: GlobalView) -> Inspection:
        t0 = time.perf_counter()
        grouped: dict[int, list[Defect]] = {}
        for d in self.defects(view):
            z, y, x = _defect_xy(d)
            block = block_of_point(view.blocks, (min(max(z, 0), view.mask.shape[0] - 1), y, x))
            if block is not None:
                grouped.setdefault(block.id, []).append(d)
        flags = {}
        for bid, ds in grouped.items():  # insertion order = priority of the block's first defect
            kind = "FN" if any(d.kind == "FN" for d in ds) else "FP"
            n_fn = sum(d.kind == "FN" for d in ds)
            flags[bid] = Flag(bid, kind, tuple(ds), f"{n_fn} break(s), {len(ds) - n_fn} noise piece(s)")
        info = CallInfo(self.name, seconds=time.perf_counter() - t0,
                        raw={str(b): f.kind for b, f in flags.items()})
        return Inspection(flags, info)
