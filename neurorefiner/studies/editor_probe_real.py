"""The editor probe's real defects: the shipped segmenter's own errors on the DIADEM development stacks (its
cached initial masks against gold, as the stage-2 miner finds them), each put into the gold block alone.

A real break is a stretch of gold the segmenter's mask misses where its mask is in two pieces (the gold block
minus those voxels falls apart, and no one mask component covers both sides); a real noise defect is a piece
of the mask away from gold (isolated components and voxels more than 3 voxels from gold). Their shapes, sizes
and places are the segmenter's, which is what the generated defects of :mod:`.editor_probe` cannot give; kept
apart from them because they need the cached masks and the stage-2 miner.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cc3d
import numpy as np

from neurorefiner.defects import betti0, describe_change
from neurorefiner.defects.describe import crop_start
from neurorefiner.studies.editor_probe import HELD_OUT, REAL, ProbeItem, ProbeVolume, Triple, crop


def load_segmenter_masks(volumes: Sequence[ProbeVolume], segmenter: str = "unet3d",
                         root: str | Path | None = None) -> dict[str, np.ndarray]:
    """The segmenter's cached initial masks of the DIADEM volumes (``neurorefiner init-masks --dataset
    diadem --split dev --segmenter <segmenter>`` writes them), by volume name; volumes without one are
    left out (the caller says so)."""
    from neurorefiner.io import read_mask
    from neurorefiner.paths import init_mask_dir

    folder = init_mask_dir("diadem", segmenter, root)
    out = {}
    for vol in volumes:
        if vol.name in HELD_OUT:
            raise ValueError(f"{vol.name} is a held-out test stack: never probe or tune on it")
        path = folder / f"{vol.name}.tif"
        if path.exists():
            mask = np.asarray(read_mask(path).load(), dtype=bool)
            if mask.shape == vol.gold.shape:
                out[vol.name] = mask
    return out


def _mask_parted(mask: np.ndarray, gold: np.ndarray, piece: np.ndarray) -> bool:
    """Does ``mask`` leave the gold on the two sides of ``piece`` (gold voxels it misses) in different
    mask components: the gold pieces next to ``piece`` do not all meet one mask component (within one
    voxel), or one of them meets none."""
    from scipy import ndimage as ndi

    rest = gold & ~piece
    sides = cc3d.connected_components(np.ascontiguousarray(rest), connectivity=26)
    near = ndi.binary_dilation(piece, np.ones((3, 3, 3), bool), iterations=2)
    ends = [k for k in np.unique(sides[near & rest]) if k > 0]
    if len(ends) < 2:
        return False
    mlab = cc3d.connected_components(np.ascontiguousarray(mask), connectivity=26)
    grown = ndi.grey_dilation(mlab, size=(3, 3, 3))
    sets = [set(np.unique(grown[(sides == k) & near]).tolist()) - {0} for k in ends]
    if any(not s for s in sets):
        return True
    return not set.intersection(*sets)


def find_real_defects(vol: ProbeVolume, mask: np.ndarray, min_break: int = 4, min_noise: int = 10,
                      pad: int = 6) -> list[tuple[str, np.ndarray]]:
    """The segmenter's breaks and noise in one volume: (kind, flat voxel indices), breaks first."""
    from neurorefiner.data.datamodules.stage2 import error_components

    out: list[tuple[str, np.ndarray]] = []
    missed = vol.gold & ~mask
    labels, n = cc3d.connected_components(np.ascontiguousarray(missed), connectivity=26, return_N=True)
    boxes = cc3d.statistics(labels)["bounding_boxes"]
    for k in range(1, n + 1):
        box = tuple(slice(max(0, b.start - pad), b.stop + pad) for b in boxes[k])
        piece = labels[box] == k
        if int(piece.sum()) < min_break:
            continue
        gold = vol.gold[box]
        if betti0(gold & ~piece) > betti0(gold) and _mask_parted(mask[box], gold, piece):
            local = np.nonzero(piece)
            at = tuple(ix + b.start for ix, b in zip(local, box, strict=True))
            out.append(("real_break", np.ravel_multi_index(at, labels.shape)))
    for kind, comp in error_components(mask, vol.gold, tolerance=1, min_voxels=min_noise, fp_tolerance=3):
        if kind == "fp":
            out.append(("real_noise", np.flatnonzero(comp)))
    return out


def real_item(vol: ProbeVolume, kind: str, voxels: np.ndarray, rng: np.random.Generator, size: Triple,
              halo: int = 2, min_inside: float = 0.9) -> ProbeItem | None:
    """A block of ``size`` holding one real defect as the editor's frames hold an edit (its centre at least a
    quarter of the block from the border: :func:`~neurorefiner.defects.describe.crop_start`), the defect put
    into the gold block alone; None when the block cannot hold most of it or the break does not part the gold
    block."""

    coords = np.stack(np.unravel_index(voxels, vol.gold.shape), axis=1)
    start = crop_start(coords.mean(axis=0), size, vol.gold.shape, rng)
    inside = np.all((coords >= start) & (coords < np.add(start, size)), axis=1)
    if inside.mean() < min_inside:
        return None
    defect = np.zeros(size, dtype=bool)
    defect[tuple((coords[inside] - start).T)] = True
    gold = crop(vol.gold, start, size)
    if kind == "real_break":
        mask = gold & ~defect
        if not (gold & defect).any() or betti0(mask) <= betti0(gold):
            return None
        ins = describe_change(gold & defect, "fn")
    else:
        defect &= ~gold
        if defect.sum() < 1:
            return None
        mask = gold | defect
        ins = describe_change(defect, "fp")
    context = crop(vol.gold, [s - halo for s in start], [s + 2 * halo for s in size])
    context[halo:-halo, halo:-halo, halo:-halo] = mask
    return ProbeItem(vol.name, kind, tuple(start), crop(vol.image, start, size), gold, mask, ins, context)


def real_items(volumes: Sequence[ProbeVolume], masks: dict[str, np.ndarray], n_per_kind: int = 50,
               kinds: Sequence[str] = REAL, size: Triple = (32, 64, 64), seed: int = 0) -> list[ProbeItem]:
    """Up to ``n_per_kind`` real defects of each kind from the segmenter's ``masks``, drawn round-robin
    over the volumes in a seeded order (fewer when the masks hold fewer)."""
    found: dict[str, list[list[np.ndarray]]] = {k: [] for k in kinds}
    for vol in volumes:
        if vol.name not in masks:
            continue
        defects = find_real_defects(vol, masks[vol.name])
        for kind in kinds:
            found[kind].append([v for k, v in defects if k == kind])
    items: list[ProbeItem] = []
    names = [v for v in volumes if v.name in masks]
    for ki, kind in enumerate(kinds):
        rng = np.random.default_rng([seed, 101, ki])
        queues = [list(rng.permutation(len(lst))) for lst in found[kind]]
        made, turn = 0, 0
        while made < n_per_kind and any(queues):
            qi = turn % len(queues)
            turn += 1
            if not queues[qi]:
                continue
            j = int(queues[qi].pop(0))
            item = real_item(names[qi], kind, found[kind][qi][j], rng, size)
            if item is not None:
                items.append(item)
                made += 1
    return items
