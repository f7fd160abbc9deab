"""More labelled candidates from the same stacks: breaks cut into the mask on the gold's path, and patches of
the mask's own structure pasted touching the tree.

Labelled candidates of real masks are few and lopsided: on DIADEM dev one noisy stack holds nine in ten of
the wrong joins, and the true ones are a handful per stack, so a judge held out on one stack has learned from
the others almost only one class. Defects made on every stack give every stack both classes:

* a **cut** (:func:`neurorefiner.defects.breaks.cut_break`, a cube of side 5-20 voxels eroded away) centred
  on a mask voxel within the gold's tolerance leaves a break whose bridge gold runs through, with the image's
  real signal in the gap: a true join;
* a **touching paste** (a patch of the mask's own foreground, mirrored, placed so it touches the tree where the
  image is dark) is false structure attached to the neuron: a true prune or removal, and its joins are false.

Labels still come from the gold (:mod:`neurorefiner.adaptation.judge.gold_labels`), never from what was done:
a cut that took a gold-free spur simply yields no true join. Training only; nothing here touches a
reported mask.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex
from neurorefiner.agents.candidates import CandidateSettings
from neurorefiner.defects.breaks import cut_break
from neurorefiner.topology.tree_root import TREE_ROOTS


def cut_on_gold(mask: np.ndarray, gold: GoldIndex, rng: np.random.Generator, n: int,
                k_range: tuple[int, int] = (5, 20), z_scale: float = 0.34) -> np.ndarray:
    """``mask`` with ``n`` cubes cut out, each centred on a mask voxel near the gold and inside its scope."""
    out = np.asarray(mask, dtype=bool).copy()
    fg = np.argwhere(out)
    if not len(fg):
        return out
    pick = rng.choice(len(fg), size=min(len(fg), 4000), replace=False)
    cand = fg[pick]
    cand = cand[gold.near(cand) & gold.in_scope(cand)]
    if not len(cand):
        return out
    for centre in cand[rng.choice(len(cand), size=min(n, len(cand)), replace=False)]:
        k = int(rng.integers(k_range[0], k_range[1] + 1))
        out = cut_break(out, centre, k, max(1, int(round(k * z_scale))))
    return out


def paste_touching(mask: np.ndarray, image: np.ndarray, rng: np.random.Generator, n: int,
                   size: tuple[int, int, int] = (8, 24, 24), dark: float = 0.2, tries: int = 40) -> np.ndarray:
    """``mask`` with ``n`` patches of its own foreground pasted so that each touches the foreground at one side
    and lies where the image is dark (mean below ``dark``): structure the image does not support, merged in."""
    from scipy import ndimage as ndi

    out = np.asarray(mask, dtype=bool).copy()
    fg = np.argwhere(out)
    if len(fg) < 50:
        return out
    shell = ndi.binary_dilation(out, iterations=2) & ~out
    shell_pts = np.argwhere(shell)
    done = 0
    for _ in range(tries):
        if done >= n or not len(shell_pts):
            break
        src_c = fg[rng.integers(len(fg))]
        lo = [int(np.clip(c - s // 2, 0, d - s)) for c, s, d in zip(src_c, size, out.shape)]
        patch = np.asarray(mask)[tuple(slice(a, a + s) for a, s in zip(lo, size))].copy()
        if patch.sum() < 20:
            continue
        patch = patch[:, ::-1] if rng.random() < 0.5 else patch
        patch = patch[:, :, ::-1] if rng.random() < 0.5 else patch
        anchor = shell_pts[rng.integers(len(shell_pts))]
        # place the patch so that its foreground voxel nearest its own centre lands on the anchor
        pf = np.argwhere(patch)
        first = pf[int(np.argmin(np.linalg.norm(pf - np.array(patch.shape) / 2, axis=1)))]
        # shift along a random direction away from the anchor so that the patch mostly lies outside the mask
        direction = rng.normal(size=3)
        direction /= max(np.linalg.norm(direction), 1e-6)
        offset = anchor - first + np.rint(direction * np.array(size) / 3).astype(int)
        dst = pf + offset
        ok = np.all((dst >= 0) & (dst < np.array(out.shape)), axis=1)
        dst = dst[ok]
        if len(dst) < 20 or out[tuple(dst.T)].mean() > 0.2:
            continue
        if float(np.asarray(image)[tuple(dst.T)].mean()) > dark:
            continue
        trial = out.copy()
        trial[tuple(dst.T)] = True
        # it must touch: joined to the tree through the anchor's neighbourhood
        bridge = np.linspace(anchor, dst[int(np.argmin(np.linalg.norm(dst - anchor, axis=1)))], 6)
        trial[tuple(np.rint(bridge).astype(int).T)] = True
        out = trial
        done += 1
    return out


def paste_specks_near(mask: np.ndarray, image: np.ndarray, rng: np.random.Generator, n: int,
                      spacing: tuple[float, float, float], step_um: tuple[float, float] = (2.0, 5.0),
                      radius: tuple[float, float] = (1.0, 3.0), dark: float = 0.2, tries: int = 60) -> np.ndarray:
    """``mask`` with ``n`` chains of 2-4 small blobs starting next to the foreground and stepping away from it
    where the image is dark: loose pieces within a join's reach of the tree and of each other, whose bridges
    gold does not run through (the wrong joins a noisy stack is full of)."""
    from scipy import ndimage as ndi

    out = np.asarray(mask, dtype=bool).copy()
    sp = np.asarray(spacing, float)
    shell = np.argwhere(ndi.binary_dilation(out, iterations=3) & ~out)
    if not len(shell):
        return out
    shape = np.array(out.shape)
    done = 0
    for _ in range(tries):
        if done >= n:
            break
        point = shell[rng.integers(len(shell))].astype(float)
        direction = rng.normal(size=3) / sp
        direction /= max(np.linalg.norm(direction * sp), 1e-6)      # a unit step in micrometres
        blobs = []
        for _ in range(int(rng.integers(2, 5))):
            point = point + direction * rng.uniform(*step_um)
            r = rng.uniform(*radius)
            lo = np.maximum(np.floor(point - r / sp * sp.min()).astype(int), 0)
            hi = np.minimum(np.ceil(point + r / sp * sp.min()).astype(int) + 1, shape)
            if np.any(hi <= lo):
                break
            grid = np.stack(np.meshgrid(*[np.arange(a, b) for a, b in zip(lo, hi)], indexing="ij"), -1).reshape(-1, 3)
            inside = grid[np.linalg.norm((grid - point) * sp, axis=1) <= r * sp.min()]
            if len(inside):
                blobs.append(inside)
        if not blobs:
            continue
        vox = np.concatenate(blobs)
        if out[tuple(vox.T)].any() or float(np.asarray(image)[tuple(vox.T)].mean()) > dark:
            continue
        out[tuple(vox.T)] = True
        done += 1
    return out


def add_bright_off_gold(mask: np.ndarray, image: np.ndarray, gold: GoldIndex, rng: np.random.Generator, n: int,
                        reach_um: float, spacing: tuple[float, float, float], min_voxels: int = 10,
                        max_voxels: int = 400) -> np.ndarray:
    """``mask`` with up to ``n`` bright pieces the gold does not trace added near the tree: the image's bright
    structure (above half way from the mask's background to its foreground) that lies away from the mask, away
    from the gold, within a join's reach of the mask. What a segmenter run a little more permissively adds on a
    stack with other fibres beside the traced neuron; the joins to them are the wrong joins of a noisy stack,
    bright like true ones, so brightness alone cannot tell them apart."""
    import cc3d
    from scipy import ndimage as ndi

    from neurorefiner.agents.pieces import intensity_levels

    out = np.asarray(mask, dtype=bool).copy()
    if not out.any():
        return out
    bg, fg = intensity_levels(np.asarray(image, np.float32), out)
    bright = (np.asarray(image) > bg + 0.5 * (fg - bg)) & ~ndi.binary_dilation(out, iterations=2)
    labels, k = cc3d.connected_components(bright, connectivity=26, return_N=True)
    if k == 0:
        return out
    sizes = np.bincount(labels.ravel())
    ids = [i for i in range(1, k + 1) if min_voxels <= sizes[i] <= max_voxels]
    rng.shuffle(ids)
    sp = np.asarray(spacing, float)
    reach = np.ceil(reach_um / sp).astype(int)
    objects = ndi.find_objects(labels)
    added = 0
    for i in ids:
        if added >= n:
            break
        sl = objects[i - 1]
        vox = np.argwhere(labels[sl] == i) + np.array([s.start for s in sl])
        if gold.near(vox).any():
            continue
        box = tuple(slice(max(s.start - r, 0), s.stop + r) for s, r in zip(sl, reach))
        if not out[box].any():
            continue
        out[tuple(vox.T)] = True
        added += 1
    return out


@dataclass
class GoldCase:
    """A stack with one segmenter's initial mask and the gold: what the judge learns from."""

    case: str
    segmenter: str
    image: np.ndarray
    mask: np.ndarray
    gold: object
    spacing: tuple[float, float, float]

    @property
    def group(self) -> str:
        return self.case

    def root(self, tree_root: str) -> tuple[float, float, float] | None:
        """The soma the loop is told for ``tree_root`` (see :data:`TREE_ROOTS`): the gold's root or none."""
        from neurorefiner.tracing.seeding import gold_root_zyx

        if tree_root not in TREE_ROOTS:
            raise ValueError(f"tree_root must be one of {TREE_ROOTS}, got {tree_root!r}")
        return gold_root_zyx(self.gold) if tree_root == "gold" else None  # type: ignore[arg-type]


def augmented_masks(gc: GoldCase, n: int, index: GoldIndex, strength: int = 1) -> list[np.ndarray]:
    """``n`` copies of the case's mask with breaks cut on the gold's path and structure pasted touching it
    (the functions above), seeded by the case so a rerun gives the same set.
    ``strength`` multiplies the number of defects per copy (a defect-free gold mask takes more)."""
    out = []
    for i in range(n):
        rng = np.random.default_rng(zlib.crc32(f"{gc.case}/{gc.segmenter}/{i}".encode()))
        k = max(int(strength), 1)
        mask = paste_touching(cut_on_gold(gc.mask, index, rng, 8 * k), gc.image, rng, 4 * k)
        mask = paste_specks_near(mask, gc.image, rng, 8 * k, gc.spacing)
        out.append(add_bright_off_gold(mask, gc.image, index, rng, 12 * k, CandidateSettings().reach_um,
                                       gc.spacing))
    return out
