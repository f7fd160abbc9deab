"""What lies outside the block: which block voxels may continue into foreground beyond it, and which of the
block's components are one piece through the halo. The remove decoding never takes a piece that continues
outside for isolated; the join decoding never joins again what is already joined outside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.inference.decoding.geometry import label_components

# block faces in the grammar's words -> (array axis, side): front/rear = z, top/bottom = y, left/right = x
FACES: dict[str, tuple[int, int]] = {"front": (0, 0), "rear": (0, 1), "top": (1, 0), "bottom": (1, 1),
                                     "left": (2, 0), "right": (2, 1)}
NO_OUTSIDE: dict[str, bool] = dict.fromkeys(FACES, False)  # the block is the whole volume

Context = np.ndarray | Mapping[str, bool] | Sequence[bool] | None


def _halo(context: np.ndarray, shape: tuple[int, ...]) -> tuple[int, int, int]:
    extra = [c - s for c, s in zip(context.shape, shape, strict=True)]
    if any(e < 0 or e % 2 for e in extra):
        raise ValueError(f"context {context.shape} must be the block {shape} with an equal halo on every side")
    return tuple(e // 2 for e in extra)  # type: ignore[return-value]


def _inner(shape: tuple[int, ...], halo: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(h, h + s) for h, s in zip(halo, shape, strict=True))


def outside_contact(mask: np.ndarray, context: Context = None) -> np.ndarray:
    """Block voxels where the mask may continue into foreground outside the block.

    ``context`` is the mask with a halo around the block (shape = block + 2 * halo per axis; its inner
    part is replaced by ``mask``), a mapping face -> bool ("touches foreground outside", faces named as
    in :data:`FACES`), or six bools in the order of :data:`FACES`. None means *unknown*: every border
    voxel may continue (conservative: a piece at the border is never taken for isolated).
    """
    shape = mask.shape
    out = np.zeros(shape, dtype=bool)
    if isinstance(context, np.ndarray):
        halo = _halo(context, shape)
        if not any(halo):
            return out
        outside = np.asarray(context, dtype=bool).copy()
        outside[_inner(shape, halo)] = False
        near = ndi.maximum_filter(outside.astype(np.uint8), size=3, mode="constant") > 0
        return near[_inner(shape, halo)]
    if context is None:
        faces = dict.fromkeys(FACES, True)
    elif isinstance(context, Mapping):
        unknown = set(context) - set(FACES)
        if unknown:
            raise ValueError(f"unknown faces {sorted(unknown)}; known: {list(FACES)}")
        faces = {f: bool(context.get(f, True)) for f in FACES}
    else:
        flags = list(context)
        if len(flags) != 6:
            raise ValueError(f"context needs one flag per face ({list(FACES)}), got {len(flags)}")
        faces = {f: bool(v) for f, v in zip(FACES, flags, strict=True)}
    for name, (axis, side) in FACES.items():
        if faces[name]:
            idx = [slice(None)] * 3
            idx[axis] = slice(0, 1) if side == 0 else slice(shape[axis] - 1, shape[axis])
            out[tuple(idx)] = True
    return out


def context_groups(labels: np.ndarray, n: int, context: Context) -> np.ndarray:
    """Group id per block component (index 0 unused): components joined through the halo of an array
    ``context`` share a group; without an array context every component is its own group."""
    groups = np.arange(n + 1)
    if not isinstance(context, np.ndarray) or n < 2:
        return groups
    halo = _halo(context, labels.shape)
    if not any(halo):
        return groups
    full = np.asarray(context, dtype=bool).copy()
    full[_inner(labels.shape, halo)] = labels > 0
    ctx_labels, _ = label_components(full)
    inner = ctx_labels[_inner(labels.shape, halo)]
    fg = labels > 0
    first = np.full(n + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, labels[fg], inner[fg].astype(np.int64))  # a block component lies in one
    groups[1:] = first[1:]
    return groups
