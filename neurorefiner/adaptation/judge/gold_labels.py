"""What gold says of a candidate edit: the labels the judge learns from and the ceilings are chosen with.

* A **join** is true where the gold skeleton runs through the bridge: at least ``join_true`` of the bridge's
  path within ``tol_um`` of the gold, both ends too; false where at most ``join_false`` of it is.
* A **removal** or a **prune** is true (the structure is false) where at most ``remove_true`` of its voxels lie
  within ``tol_um`` of the gold, and false (it is neuron) where at least ``remove_false`` do.
* Anything in between is ambiguous and carries no label. So does anything reaching **beyond the gold's
  scope** (the gold nodes' bounding box grown by ``scope_margin`` voxels): DIADEM's gold traces one neuron
  from a root inside the stack while a fibre may run on to the image edge; a judge trained to remove what
  the gold simply did not trace would learn to cut real fibres.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.agents.candidates import Candidate
from neurorefiner.io.swc import Tree


@dataclass(frozen=True)
class LabelSettings:
    tol_um: float = 3.0
    scope_margin: int = 10
    join_true: float = 0.7
    join_false: float = 0.3
    remove_true: float = 0.1
    remove_false: float = 0.5
    step_um: float = 0.5
    join_piece: float | None = None   # a join is right only if the piece it attaches lies near the gold for at least
                                      # this share of its voxels (None: the gap alone decides, as before)
    join_value: bool = True           # a join is valued by what it attaches (:func:`join_values`): right only where
                                      # its gap is and the piece adds more traced length on the gold than off it,
                                      # weighted by that length against the gold's


class GoldIndex:
    """The gold tree resampled densely, for distance queries in micrometres, and its scope box."""

    def __init__(self, gold: Tree, spacing: Sequence[float], shape: Sequence[int],
                 settings: LabelSettings | None = None) -> None:
        from scipy.spatial import cKDTree

        self.s = settings or LabelSettings()
        self.sp = np.asarray(spacing, np.float64)
        dense = gold.resampled(self.s.step_um, tuple(self.sp)) if len(gold) else gold
        zyx = np.asarray(dense.zyx, np.float64)
        self.tree = cKDTree(zyx * self.sp) if len(zyx) else None
        self.length_um = float(max(len(zyx) - 1, 0) * self.s.step_um)   # the gold's cable length (resampled)
        if len(zyx):
            lo = np.floor(zyx.min(axis=0)).astype(int) - self.s.scope_margin
            hi = np.ceil(zyx.max(axis=0)).astype(int) + self.s.scope_margin + 1
            self.lo, self.hi = np.maximum(lo, 0), np.minimum(hi, np.asarray(shape))
        else:
            self.lo = self.hi = np.zeros(3, int)

    def near(self, voxels: np.ndarray) -> np.ndarray:
        """Whether each voxel (N x 3) lies within ``tol_um`` of the gold."""
        v = np.asarray(voxels, np.float64).reshape(-1, 3)
        if self.tree is None or not len(v):
            return np.zeros(len(v), bool)
        d, _ = self.tree.query(v * self.sp, distance_upper_bound=self.s.tol_um)
        return np.isfinite(d)

    def in_scope(self, voxels: np.ndarray) -> np.ndarray:
        v = np.asarray(voxels).reshape(-1, 3)
        return np.all((v >= self.lo) & (v < self.hi), axis=1)

    def scope_slices(self) -> tuple[slice, ...]:
        return tuple(slice(int(a), int(b)) for a, b in zip(self.lo, self.hi))


def gold_label(candidate: Candidate, gold: GoldIndex) -> int | None:
    """1: the edit is right, 0: it is wrong, None: gold cannot tell (ambiguous or beyond its scope)."""
    s = gold.s
    vox = np.asarray(candidate.voxels).reshape(-1, 3)
    anchors = np.asarray(candidate.anchors)
    if not len(vox):
        return None
    if not gold.in_scope(vox).all() or not gold.in_scope(anchors).all():
        return None
    share = float(gold.near(vox).mean())
    if candidate.kind == "join":
        ends = bool(gold.near(anchors).all())
        if share >= s.join_true and ends:
            return 1
        return 0 if share <= s.join_false else None
    if share <= s.remove_true:
        return 1
    return 0 if share >= s.remove_false else None


def label_all(candidates: Sequence[Candidate], gold: GoldIndex) -> list[int | None]:
    return [gold_label(c, gold) for c in candidates]


def attached_piece_labels(candidates: Sequence[Candidate], labels: Sequence[int | None], pieces: np.ndarray,
                          main: int, gold: GoldIndex, sample: int = 2000) -> list[int | None]:
    """Join labels that also ask whether the piece a join attaches is neuron (``LabelSettings.join_piece``).

    A join's label reads its gap against the gold; on a stand-in's U-Net masks the judge then learned joins that
    attach a large false piece to the tree through a true gap (precision of a traced volume -16 to -18 points).
    Here a join is right only where at least ``join_piece`` of the attached piece's voxels (each side that is not
    the tree) lie within the gold's tolerance, wrong where at most ``remove_true`` do, ambiguous between.
    ``pieces``: the mask's component labels the candidates were found on; ``main``: the tree's label."""
    from scipy import ndimage as ndi

    share_floor = gold.s.join_piece
    if share_floor is None:
        return list(labels)
    boxes = ndi.find_objects(np.asarray(pieces))
    rng = np.random.default_rng(0)
    cache: dict[int, float] = {}

    def near_share(k: int) -> float:
        if k not in cache:
            box = boxes[k - 1]
            vox = np.argwhere(pieces[box] == k) + np.array([b.start for b in box])
            if len(vox) > sample:
                vox = vox[rng.choice(len(vox), sample, replace=False)]
            cache[k] = float(gold.near(vox).mean()) if len(vox) else 0.0
        return cache[k]

    out: list[int | None] = []
    for c, lab in zip(candidates, labels):
        if c.kind != "join" or lab != 1:
            out.append(lab)
            continue
        shares = [near_share(int(k)) for k in c.pieces if int(k) != main]
        worst = min(shares) if shares else 1.0
        out.append(1 if worst >= share_floor else 0 if worst <= gold.s.remove_true else None)
    return out


def skeleton_lengths(pieces: np.ndarray, box: tuple[slice, ...], k: int, gold: GoldIndex,
                     spacing: Sequence[float]) -> tuple[float, float]:
    """Traced length (um) of piece ``k`` on the gold and off it, inside the gold's scope: its skeleton's voxels
    within ``tol_um`` of the gold and beyond, each worth the mean voxel step. What APP2 would add to the tree's
    trace if the piece were joined, split into what raises recall and what lowers precision."""
    from skimage.morphology import skeletonize

    sub = np.asarray(pieces[box]) == k
    skel = np.argwhere(skeletonize(sub)) + np.array([b.start for b in box])
    skel = skel[gold.in_scope(skel)]
    if not len(skel):
        return 0.0, 0.0
    near = gold.near(skel)
    step = float(np.mean(np.asarray(spacing, float)))
    return float(near.sum() * step), float((~near).sum() * step)


def join_values(candidates: Sequence[Candidate], labels: Sequence[int | None], pieces: np.ndarray, main: int,
                gold: GoldIndex, spacing: Sequence[float]) -> tuple[list[int | None], list[float]]:
    """Join labels and weights valued as the tables' F1 values a join; other kinds keep theirs, weight 1.

    A join whose gap the gold runs through (``labels`` 1) is right only where the piece it attaches (each side
    that is not the tree) adds more skeleton length on the gold than off it; a bright false piece attached through
    a true gap is wrong. Its weight is the length at stake, ``|on - off|`` plus the gap, over the gold's length
    (each volume's F1 counts alike, so a join's worth is its share of its volume's gold). A wrong gap (0) weighs
    its gap plus what it attaches off the gold. The fit scales each class's weights to its count
    (:func:`~neurorefiner.adaptation.judge.model_fit.fit_model`)."""
    from scipy import ndimage as ndi

    boxes = ndi.find_objects(np.asarray(pieces))
    lengths: dict[int, tuple[float, float]] = {}

    def of(k: int) -> tuple[float, float]:
        if k not in lengths:
            box = boxes[k - 1] if 0 < k <= len(boxes) else None
            lengths[k] = skeleton_lengths(pieces, box, k, gold, spacing) if box is not None else (0.0, 0.0)
        return lengths[k]

    total = max(gold.length_um, 1.0)
    out, weights = [], []
    for c, lab in zip(candidates, labels):
        if c.kind != "join" or lab is None:
            out.append(lab)
            weights.append(1.0)
            continue
        sides = [of(int(k)) for k in c.pieces if int(k) != main]
        on, off = sum(a for a, _ in sides), sum(b for _, b in sides)
        gap = float(c.features.get("gap_um", 0.0))
        if lab == 1:
            out.append(1 if on >= off else 0)
            weights.append((abs(on - off) + gap) / total)
        else:
            out.append(0)
            weights.append((off + gap) / total)
    return out, weights
