"""What a decoding returns: the edited mask with what was done and why (:class:`EditResult`), and each bridge a
join considered (:class:`Join`), so a caller can see how close a refused edit was."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Join:
    """One bridge between two components: its new voxels along the centre line, mean darkness, tube
    radii (z, y, x, voxels) and whether it was painted."""

    length: int
    darkness: float
    radii: tuple[float, float, float] = (0.0, 0.0, 0.0)
    painted: bool = False


@dataclass
class EditResult:
    """The edited mask and what the decoding did, in words and numbers.

    ``changed`` is False whenever the decoding left the mask as it was (nothing to connect, nothing to
    remove, the best bridge over the limits); ``reason`` says why in one sentence either way. ``joins``
    lists every bridge considered in order (the last one is the one that stopped the joining when it was
    over the limits), so a caller can see how close a refused edit was.

    ``declined`` is True when the decoding found what the instruction names and refused it on the evidence
    (the best bridge too dark or too long; isolated pieces the image or the network shows): a judgement on the
    defect, not on the frame, so the loop need not look for another frame that gets past it.
    """

    mask: np.ndarray
    changed: bool
    reason: str
    removed_voxels: int = 0
    added_voxels: int = 0
    op: str = ""
    decoding: str = "topology"
    removed_pieces: int = 0
    joins: list[Join] = field(default_factory=list)
    declined: bool = False

    @classmethod
    def from_masks(cls, before: np.ndarray, after: np.ndarray, reason: str, **kw: Any) -> EditResult:
        added = int((after & ~before).sum())
        removed = int((before & ~after).sum())
        return cls(after, bool(added or removed), reason, removed_voxels=removed, added_voxels=added, **kw)
