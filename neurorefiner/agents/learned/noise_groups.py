"""A block's isolated noise as few removals as an editor frame can hold, as the paper's Advisor writes it
("Remove isolated noise at right-center-rear" for a block, not one sentence per speck).

The judge scores every isolated piece on its own, and a stand-in's mask holds thousands: one defect per
piece filled the loop's per-round cap with specks, each one editor call, while the joins that move a traced
tree waited behind them. Pieces whose anchors fit in ``span`` (half the editor frame: a frame placed as the
editor's training crops hold their defects keeps its centre a quarter of a side from each border, so a
cluster this wide always lies inside it) become one defect whose anchors are every piece's voxel; the
Advisor names their union and the editor removes what it takes in one call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.roles import Defect

DEFAULT_SPAN = (16, 32, 32)
"""Half the shipped editor's 32 x 64 x 64 (ZYX) frame."""


def group_noise(defects: Sequence[Defect], span: Sequence[int] = DEFAULT_SPAN) -> list[Defect]:
    """``defects`` with the removals (``FP``) merged greedily, in the given order (most probable first), into
    groups whose anchors span at most ``span`` voxels on each axis; other defects keep their place in front."""
    limit = np.asarray(span, dtype=np.int64)
    others = [d for d in defects if d.kind != "FP" or not d.anchors]
    groups: list[list[Defect]] = []
    boxes: list[tuple[np.ndarray, np.ndarray]] = []
    for d in (d for d in defects if d.kind == "FP" and d.anchors):
        a = np.asarray(d.anchors[0], dtype=np.int64)
        for i, (lo, hi) in enumerate(boxes):
            nlo, nhi = np.minimum(lo, a), np.maximum(hi, a)
            if ((nhi - nlo) <= limit).all():
                groups[i].append(d)
                boxes[i] = (nlo, nhi)
                break
        else:
            groups.append([d])
            boxes.append((a, a))
    merged = [g[0] if len(g) == 1 else
              Defect("FP", tuple(d.anchors[0] for d in g), sum(d.size for d in g),
                     f"remove {len(g)} isolated pieces, {sum(d.size for d in g)} voxels: " + g[0].note)
              for g in groups]
    return others + merged
