"""Attached false structure: a fibre pasted so that one end merges into the neuron (stage 1, ``touch``).

``paste`` and ``noise`` add foreground that lies apart from the neuron, so "Remove noise" there always
means deleting a loose piece. Segmenters also fuse a passing fibre (another neuron's neurite, an
autofluorescent streak) to the tree: the false structure is then a branch of the neuron itself, and the
agents name it "Remove noise from <tip> to <junction>" (the editor cuts it at the junction,
:mod:`neurorefiner.inference.branch_cut`). Without such defects in stage 1 the network never learns
that a branch the instruction names can be wrong.

A patch of another neuron's mask (or the block's own, as ``paste`` uses it) is reduced to its largest
piece, turned (mirrors, y/x swap) so that it points away from the neuron, and placed with one end on a
boundary voxel of the gold. Kept only when the pasted voxels form one piece that touches the gold near
that end only, lies mostly outside it and joins no two gold pieces; the target is the gold.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np
from scipy import ndimage

from neurorefiner.defects.breaks import Defect
from neurorefiner.defects.describe import principal_extent
from neurorefiner.topology.components import betti0, label_components
from neurorefiner.topology.instructions import Instruction
from neurorefiner.topology.positions import locate

CUBE = np.ones((3, 3, 3), dtype=bool)  # 26-connectivity, as betti0 counts


def fibre_patch(src: np.ndarray, rng: np.random.Generator, size_range: tuple[int, int], z_scale: float,
                shape: Sequence[int]) -> np.ndarray:
    """Voxel coordinates (N, 3) of the largest piece of a random patch of ``src`` around a foreground voxel.

    The largest piece only: a second piece of the patch would lie loose in the block, which is ``paste``,
    not attached structure."""
    lim = [min(a, b) for a, b in zip(src.shape, shape, strict=True)]
    s, sy = (int(rng.integers(int(size_range[0]), int(size_range[1]) + 1)) for _ in range(2))
    size = [min(n, v) for n, v in zip(lim, (max(1, int(round(s * z_scale))), sy, s), strict=True)]
    fg = np.flatnonzero(src)
    c = np.unravel_index(fg[rng.integers(len(fg))], src.shape)
    lo = [int(np.clip(ci - si // 2, 0, n - si)) for ci, si, n in zip(c, size, src.shape, strict=True)]
    patch = src[tuple(slice(a, a + si) for a, si in zip(lo, size, strict=True))]
    labels, n = label_components(patch)
    if n == 0:
        return np.zeros((0, 3), dtype=int)
    biggest = int(np.argmax(np.bincount(labels.ravel())[1:])) + 1
    return np.argwhere(labels == biggest)


def outward(gold: np.ndarray, anchor: np.ndarray, radius: int = 4) -> np.ndarray:
    """Unit direction from the gold's local mass to ``anchor`` (a boundary voxel): away from the neuron."""
    lo = np.maximum(anchor - radius, 0)
    near = np.argwhere(gold[tuple(slice(a, b) for a, b in zip(lo, anchor + radius + 1, strict=True))]) + lo
    d = anchor - near.mean(axis=0)
    norm = float(np.linalg.norm(d))
    return d / norm if norm > 1e-6 else np.zeros(3)


def orientations(coords: np.ndarray) -> list[np.ndarray]:
    """The fibre mirrored along any of z, y, x and with y/x swapped or not (16 poses, shape kept in z)."""
    out = []
    for swap, *flips in product((False, True), (False, True), (False, True), (False, True)):
        c = coords[:, [0, 2, 1]] if swap else coords.copy()
        for axis, flip in enumerate(flips):
            if flip:
                c[:, axis] = c[:, axis].max() - c[:, axis]
        out.append(c)
    return out


def place_touching(coords: np.ndarray, gold: np.ndarray, anchor: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
    """The fibre's voxels in the block, one end on ``anchor``, turned to run away from the gold.

    Of the two ends along its main direction one is drawn to attach; of the 16 poses the one whose
    attached-to-free-end direction best follows :func:`outward` is used. Voxels leaving the block drop."""
    normal = outward(gold, anchor)
    best, best_dot = coords, -np.inf
    pick_low = rng.random() < 0.5
    for c in orientations(coords):
        _, proj = principal_extent(c)
        ends = (int(np.argmin(proj)), int(np.argmax(proj)))
        attach, free = (ends if pick_low else ends[::-1])
        dot = float(np.dot(c[free] - c[attach], normal))
        if dot > best_dot:
            best, best_dot = c + (anchor - c[attach]), dot
    inside = np.all((best >= 0) & (best < np.array(gold.shape)), axis=1)
    return best[inside]


def bounding_box(mask: np.ndarray, pad: int = 1) -> tuple[slice, ...]:
    """Slices of the box around ``mask``'s voxels grown by ``pad``: morphology there, not on the block, keeps
    a defect at a few milliseconds."""
    idx = np.argwhere(mask)
    lo, hi = np.maximum(idx.min(axis=0) - pad, 0), idx.max(axis=0) + pad + 1
    return tuple(slice(int(a), int(b)) for a, b in zip(lo, hi, strict=True))


def contact_voxels(changed: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Coordinates of the pasted voxels that touch the gold (26-neighbours of it): the junction."""
    box = bounding_box(changed)
    near = changed[box] & ndimage.binary_dilation(gold[box], structure=CUBE)
    return np.argwhere(near) + [b.start for b in box]


def farthest_along(changed: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """The voxel of ``changed`` farthest from ``seeds`` walking inside ``changed`` (26-steps): the tip.

    A walk, not a straight line, so a fibre that curves back towards the neuron still ends at its free
    end."""
    box = bounding_box(changed)
    origin = np.array([b.start for b in box])
    inside = changed[box]
    reached = np.zeros_like(inside)
    reached[tuple((seeds - origin).T)] = True
    front = reached
    while True:
        grown = ndimage.binary_dilation(reached, structure=CUBE) & inside
        new = grown & ~reached
        if not new.any():
            return np.argwhere(front)[0] + origin
        front, reached = new, grown


def touch_instruction(changed: np.ndarray, gold: np.ndarray) -> Instruction | None:
    """"Remove noise from <tip cell> to <junction cell>", or None when both ends fall in one cell
    (the agents name attached branches by their two ends; one cell would read as an isolated piece)."""
    contact = contact_voxels(changed, gold)
    if not len(contact):
        return None
    junction = locate(contact, changed.shape)
    tip = locate(farthest_along(changed, contact)[None], changed.shape)
    return None if tip == junction else Instruction("remove", tip, junction)


def is_attached(changed: np.ndarray, gold: np.ndarray, anchor: np.ndarray, contact_radius: float) -> bool:
    """True when ``changed`` is one piece that touches the gold only within ``contact_radius`` of the
    anchor (one end merged, not a fibre running along the neurite) and joins no two gold pieces."""
    if betti0(changed) != 1:
        return False
    contact = contact_voxels(changed, gold)
    if not len(contact) or np.linalg.norm(contact - anchor, axis=1).max() > contact_radius:
        return False
    return betti0(gold | changed) == betti0(gold)


def paste_touching_fibre(gold: np.ndarray, rng: np.random.Generator, sources: Sequence[np.ndarray],
                         size_range: tuple[int, int] = (14, 32), z_scale: float = 0.5, min_voxels: int = 15,
                         min_length: float = 10.0, max_overlap: float = 0.2, contact_radius: float = 5.0,
                         max_tries: int = 20) -> Defect | None:
    """Paste a fibre from one of ``sources`` so that it touches the foreground of ``gold`` at one end.

    The patch (side drawn from ``size_range`` in y and x, ``z_scale`` times that in z) must be at least
    ``min_length`` voxels long along its main direction (a fibre, not a speck), add ``min_voxels`` new
    voxels and overlap the gold by at most ``max_overlap`` of its voxels. None when no try fits."""
    gold = np.asarray(gold, dtype=bool)
    usable = [np.asarray(s, dtype=bool) for s in sources if s is not None and np.asarray(s).any()]
    boundary = np.argwhere(gold & ~ndimage.binary_erosion(gold, structure=CUBE))
    if not usable or not len(boundary):
        return None
    for _ in range(max_tries):
        src = usable[int(rng.integers(len(usable)))]
        coords = fibre_patch(src, rng, size_range, z_scale, gold.shape)
        if len(coords) < min_voxels or principal_extent(coords)[0] < min_length:
            continue
        anchor = boundary[rng.integers(len(boundary))]
        placed = place_touching(coords, gold, anchor, rng)
        if not len(placed) or gold[tuple(placed.T)].sum() > max_overlap * len(placed):
            continue
        out = gold.copy()
        out[tuple(placed.T)] = True
        changed = out & ~gold
        if changed.sum() < min_voxels or not is_attached(changed, gold, anchor, contact_radius):
            continue
        instruction = touch_instruction(changed, gold)
        if instruction is None:
            continue
        return Defect(out, gold.copy(), instruction, "touch", changed)
    return None
