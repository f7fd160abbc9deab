"""Making TopoRefineNet's training samples for the sample shards (:mod:`neurorefiner.data.sample_shards`).

Stage 1: synthetic defects cut into gold masks (:func:`~neurorefiner.data.datamodules.stage1.make_stage1_sample`,
distractors included), the kind drawn for the operation (connect: break; remove: paste / noise; cut: touch).
Stage 2: the segmenters' own errors (their initial masks against gold, training splits only) -- a crop placed
around one error as the stage-1 crops hold their defects (:func:`~neurorefiner.defects.describe.crop_start`),
the change the error's voxels grown by two voxels within the mask/gold difference, the target the mask with
that one error undone. :func:`make_shards` is what ``neurorefiner make-shards`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

from neurorefiner.data.sample_shards import STAGE1_KINDS, ShardSettings, _draw, write_shards
from neurorefiner.data.shard_folder import PARTS
from neurorefiner.errors import InputError

_CUBE = np.ones((3, 3, 3), dtype=bool)


# ------------------------------------------------------------------------------------------- stage 1
def stage1_record(volumes: Sequence[Any], rng: np.random.Generator, settings: ShardSettings) -> dict:
    """One stage-1 sample for a drawn operation: a synthetic defect of a kind that asks for it."""
    from neurorefiner.data.datamodules.stage1 import make_stage1_sample
    from neurorefiner.defects.generate import DefectConfig

    op = _draw(rng, settings.op_shares)
    kinds = STAGE1_KINDS[op]
    kind = kinds[int(rng.integers(len(kinds)))]
    w = np.array([max(v.fg.size, 1) for v in volumes], dtype=np.float64)
    for _ in range(20):
        i = int(rng.choice(len(volumes), p=w / w.sum()))
        vol = volumes[i]
        others = [v for j, v in enumerate(volumes) if j != i]
        try:
            s = make_stage1_sample(vol.image, vol.gold, rng, settings.crop_size, [v.gold for v in others],
                                   DefectConfig.build({"probs": {kind: 1.0}}), fg=vol.fg,
                                   other_fg=[v.fg for v in others], distractor_prob=settings.distractor_prob,
                                   max_tries=10)
        except ValueError:
            continue
        if kind == "break" and settings.faint_gap and rng.random() < settings.faint_gap:
            from neurorefiner.defects.breaks import dim_gap

            s["image"] = dim_gap(s["image"], s["target"], s["change"], float(rng.uniform(*settings.faint_contrast)))
        return {"image": s["image"], "mask": s["mask"], "target": s["target"], "change": s["change"],
                "side": "fn" if kind == "break" else "fp", "attached": kind == "touch", "op": op, "kind": kind,
                "source": vol.name, "start": list(s["start"]), "instruction": s["instruction"],
                "distractor": s["distractor"]}
    raise ValueError(f"no {kind} defect could be made in 20 crops")


# ------------------------------------------------------------------------------------------- stage 2
@dataclass
class ErrorPiece:
    """One error of a segmenter's mask against gold: its operation and voxels (flat indices)."""

    op: str  # connect | remove | cut
    voxels: np.ndarray


def find_errors(mask: np.ndarray, gold: np.ndarray, min_voxels: int = 10) -> list[ErrorPiece]:
    """The errors of a whole mask that matter for topology (:func:`~neurorefiner.data.datamodules.stage2.
    error_pieces`): missing gold -> connect; extra foreground -> cut when it touches the mask's
    true structure (a false branch), remove when it lies loose."""
    from neurorefiner.data.datamodules.stage2 import error_pieces

    near = ndimage.binary_dilation(gold, _CUBE)
    true_part = mask & near
    out = []
    for side, voxels in error_pieces(mask, gold, tolerance=1, min_voxels=min_voxels, fp_tolerance=3):
        if side == "fn":
            op = "connect"
        else:
            coords = np.unravel_index(voxels, mask.shape)
            box = tuple(slice(max(0, int(c.min()) - 4), min(n, int(c.max()) + 5)) for c, n in zip(coords, mask.shape))
            comp = np.zeros(tuple(b.stop - b.start for b in box), dtype=bool)
            comp[tuple(c - b.start for c, b in zip(coords, box))] = True
            grown = ndimage.binary_dilation(comp, _CUBE, iterations=4)
            # attached: the piece and the true structure are one mask component within reach of each other
            op = "cut" if (grown & true_part[box] & mask[box]).any() else "remove"
        out.append(ErrorPiece(op, voxels))
    return out


def crop_array(array: np.ndarray, start: Sequence[int], size: Sequence[int]) -> np.ndarray:
    from neurorefiner.data.datamodules.stage1 import crop_padded

    return crop_padded(array, start, tuple(size))  # type: ignore[arg-type]


def stage2_record(sources: Sequence[Any], rng: np.random.Generator, settings: ShardSettings) -> dict:
    """One stage-2 sample: a crop around one of a segmenter's errors of the drawn operation (another
    operation when no source has that one)."""
    from neurorefiner.defects.describe import crop_start

    op = _draw(rng, settings.op_shares)
    have = [s for s in sources if any(e.op == op for e in s.errors)]
    if not have:
        ops = sorted({e.op for s in sources for e in s.errors})
        if not ops:
            raise ValueError("the masks hold no error to learn from")
        op = ops[int(rng.integers(len(ops)))]
        have = [s for s in sources if any(e.op == op for e in s.errors)]
    src = have[int(rng.integers(len(have)))]
    pieces = [e for e in src.errors if e.op == op]
    piece = pieces[int(rng.integers(len(pieces)))]
    size = settings.crop_size
    coords = np.stack(np.unravel_index(piece.voxels, src.gold.shape), axis=1)
    start = crop_start(coords.mean(axis=0), size, src.gold.shape, rng)
    mask, gold = crop_array(src.mask, start, size), crop_array(src.gold, start, size)
    own = np.zeros(size, dtype=bool)
    local = coords - np.asarray(start)
    local = local[np.all((local >= 0) & (local < np.asarray(size)), axis=1)]
    own[tuple(local.T)] = True
    side = "fn" if op == "connect" else "fp"
    wrong = (gold & ~mask) if side == "fn" else (mask & ~gold)
    change = ndimage.binary_dilation(own, _CUBE, iterations=2) & wrong
    if not change.any():
        raise ValueError("the error left the crop")
    return {"image": crop_array(src.image, start, size), "mask": mask, "target": mask ^ change, "change": change,
            "side": side, "attached": op == "cut", "op": op, "kind": f"mined_{op}", "source": src.name,
            "start": [int(s) for s in start], "instruction": "", "distractor": ""}


# ------------------------------------------------------------------------------------------- sources
@dataclass
class MaskSource:
    """A segmenter's mask of one training case, its image and gold, and the errors found in it."""

    name: str
    image: np.ndarray
    mask: np.ndarray
    gold: np.ndarray
    errors: list


@dataclass
class GoldVolumes:
    """Picklable loader of the stage-1 gold volumes: the training (``part="train"``) or validation cases
    of each dataset (:func:`~neurorefiner.data.datamodules.stage1.split_cases`; test splits refused)."""

    datasets: Sequence[str]
    part: str = "train"
    val_cases: int = 1

    def cases(self) -> list:
        from neurorefiner.data.datamodules.stage1 import resolve_datasets, split_cases

        out = []
        for ds in resolve_datasets(list(self.datasets)):
            train, val = split_cases(ds, None, None, self.val_cases)
            out += [(ds.name, c) for c in (train if self.part == "train" else val)]
        return out

    def __call__(self) -> list:
        from neurorefiner.data.datamodules.stage1 import load_gold_volume

        return [load_gold_volume(c) for _, c in self.cases()]


@dataclass
class MaskVolumes(GoldVolumes):
    """Picklable loader of the stage-2 sources: each segmenter's initial mask of each case of ``part``
    (read from ``<init_masks_root>/<dataset>/<segmenter>/<case>.tif``), with its errors."""

    segmenters: Sequence[str] = ("unet3d", "nnunet_style")
    init_masks_root: str | None = None

    def paths(self) -> list[tuple[str, Any, str, Path]]:
        from neurorefiner.paths import init_mask_path

        out = []
        for dataset, case in self.cases():
            for seg in self.segmenters:
                path = init_mask_path(dataset, seg, case.name, root=self.init_masks_root)
                if path.exists():
                    out.append((dataset, case, seg, path))
        return out

    def __call__(self) -> list:
        from neurorefiner.data.datamodules.stage1 import load_gold_volume
        from neurorefiner.io import read_mask

        out, golds = [], {}
        for dataset, case, seg, path in self.paths():
            if (dataset, case.name) not in golds:
                golds[(dataset, case.name)] = load_gold_volume(case)
            vol = golds[(dataset, case.name)]
            mask = np.asarray(read_mask(path).load(), dtype=bool)
            if mask.shape != vol.gold.shape:
                raise InputError(f"mask shape {mask.shape} differs from the image's {vol.gold.shape}", path)
            out.append(MaskSource(f"{dataset}/{seg}/{case.name}", vol.image, mask, vol.gold,
                                  find_errors(mask, vol.gold)))
        return out


def make_shards(out: Path, stage: int, datasets: Sequence[str], n_samples: int, part: str = "train",
                segmenters: Sequence[str] = ("unet3d", "nnunet_style"), init_masks_root: str | None = None,
                settings: ShardSettings | None = None, shard_size: int = 256, workers: int = 2,
                progress: bool = True) -> dict:
    """Stage-1 (synthetic defects in gold) or stage-2 (segmenters' errors) shards of the ``part``
    (train / val) cases of ``datasets``; see the module docstring. The folder records all of it, and a folder
    made with other settings is refused (:func:`~neurorefiner.data.shard_folder.claim_folder`)."""
    if part not in PARTS:
        raise InputError(f"--part {part}: choose {' or '.join(PARTS)} (test cases are never trained on)")
    if stage not in (1, 2):
        raise InputError(f"--stage {stage}: choose 1 (synthetic defects in gold) or 2 (the segmenters' errors)")
    settings = settings or ShardSettings(stage=stage)
    settings.stage = int(stage)
    if stage == 1:
        load: GoldVolumes = GoldVolumes(list(datasets), part)
        names = [f"{d}/{c.name}" for d, c in load.cases()]
        maker: Callable = stage1_record
    elif stage == 2:
        load = MaskVolumes(list(datasets), part, segmenters=list(segmenters), init_masks_root=init_masks_root)
        found = load.paths()
        if not found:
            raise InputError("no initial masks of these cases; make them first with `neurorefiner init-masks "
                             "--dataset <name> --split <train split> --segmenter <name>`",
                             init_masks_root or "data/cache/init_masks")
        names = [f"{d}/{s}/{c.name}" for d, c, s, _ in found]
        maker = stage2_record
    recipe = {"datasets": list(datasets), "part": part, **({"segmenters": list(segmenters)} if stage == 2 else {})}
    return write_shards(Path(out), load, maker, settings, n_samples, shard_size, workers, names, progress, recipe)
