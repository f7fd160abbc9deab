"""Stage-1 training data for TopoRefineNet: synthetic defects cut into gold masks (paper, Sec. 3.3/4.1).

Each sample is a crop around a random gold foreground voxel, one defect drawn from
:mod:`neurorefiner.defects` (break / pasted foreign annotation / Gaussian blobs / a fibre pasted touching
the neuron, off by default), the defective mask as input, the gold crop as target, and the instruction
that names the defect's type and place.

Distractors (``distractor_prob``, beyond the paper): a share of the samples get a second defect away
from the named place that the instruction does not mention, and the target keeps it. With one defect
per crop the defect is visible in the image, so a network can fix it without reading where the
instruction points; real blocks hold several errors and the agents name one at a time.

Batches (the contract with :class:`~neurorefiner.models.refine_module`): a dict with
``image`` float32 (B, 1, D, H, W) in [0, 1], ``mask`` float32 (B, 1, D, H, W) {0, 1} (defective input),
``target`` float32 (B, 1, D, H, W) {0, 1}, ``instruction`` list of B strings (``Instruction.format()``),
``region`` bool (B, 1, D, H, W) (the sub-region the instruction names). D = z.
Crop sizes are (D, H, W) = (z, y, x), the order of the arrays: the paper's 128 x 128 x 64 (H x W x D)
is ``[64, 128, 128]`` here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from neurorefiner.data.cases import Case
from neurorefiner.data.registry import get_dataset
from neurorefiner.data.sample_shards import to_item  # the batch contract (stage 2 reads it from here too)
from neurorefiner.data.samplers import KeyedCropSampler, ShardSampler, key_rng, rank_and_world, use_keyed
from neurorefiner.defects.generate import SOURCE_KINDS, DefectConfig, draw_kind, make_one
from neurorefiner.errors import InputError

Triple = tuple[int, int, int]
HELD_OUT = {"diadem": {"OP_7", "OP_8", "OP_9"}}  # never train, tune or pick on these
BATCH_KEYS = ("image", "mask", "target", "instruction", "region")


# ---------------------------------------------------------------------------------------------- cases
@dataclass
class GoldVolume:
    """A case in memory: normalised image, gold mask, and where the gold foreground is."""

    name: str
    image: np.ndarray  # float32 ZYX in [0, 1]
    gold: np.ndarray  # bool ZYX
    fg: np.ndarray  # flat indices of gold foreground voxels


def check_not_held_out(case: Case) -> None:
    if case.name in HELD_OUT.get(case.dataset, ()) or case.split == "test":
        raise ValueError(f"{case.dataset}/{case.name} is a held-out test case: never train or tune on it")


def load_gold_volume(case: Case) -> GoldVolume:
    """Image min-max normalised to [0, 1] (as :meth:`Volume.normalized`), gold mask from the label file
    or the rasterised gold SWC."""
    check_not_held_out(case)
    image = case.image().normalized()
    gold = np.asarray(case.label(image.shape)) > 0
    if gold.shape != image.shape:
        raise InputError(f"label shape {gold.shape} differs from image shape {image.shape}",
                         case.label_path or case.swc_path)
    return GoldVolume(case.name, image, gold, np.flatnonzero(gold))


def resolve_datasets(dataset) -> list:  # type: ignore[no-untyped-def]
    """A dataset object, a registry name, or a list of either -> list of dataset objects."""
    items = dataset if isinstance(dataset, (list, tuple)) or _is_listconfig(dataset) else [dataset]
    out = []
    for d in items:
        out.append(get_dataset(d) if isinstance(d, str) else d)
    if not out:
        raise ValueError("no dataset given")
    return out


def _is_listconfig(x) -> bool:  # type: ignore[no-untyped-def]
    return type(x).__name__ == "ListConfig"


def split_cases(dataset, train_split: str | None, val_split: str | None,  # type: ignore[no-untyped-def]
                val_cases: int) -> tuple[list[Case], list[Case]]:
    """Training and validation cases of one dataset. Without a ``val`` split (DIADEM: dev/test), the last
    ``val_cases`` cases of the training split are held out for validation."""
    splits = tuple(getattr(dataset, "splits", ()))
    train_split = train_split or ("train" if "train" in splits else "dev")
    if train_split == "test":
        raise ValueError("training on the test split is not allowed")
    train = list(dataset.cases(train_split))
    if val_split is None and "val" in splits:
        val_split = "val"
    if val_split is not None and val_split != train_split:
        if val_split == "test":
            raise ValueError("validating on the test split is not allowed (it picks checkpoints)")
        val = list(dataset.cases(val_split))
    else:
        n = min(int(val_cases), max(len(train) - 1, 0))
        train, val = (train[:-n], train[-n:]) if n > 0 else (train, list(train))
    for c in train + val:
        check_not_held_out(c)
    return train, val


# ---------------------------------------------------------------------------------------------- samples
def crop_padded(array: np.ndarray, start: Sequence[int], size: Triple) -> np.ndarray:
    """``array[start:start+size]`` with zero padding where the crop leaves the volume."""
    src = tuple(slice(max(0, s), min(n, s + c)) for s, c, n in zip(start, size, array.shape, strict=True))
    out = np.zeros(size, dtype=array.dtype)
    dst = tuple(slice(a.start - s, a.stop - s) for a, s in zip(src, start, strict=True))
    out[dst] = array[src]
    return out


def _crop_start(centre: Sequence[int], size: Triple, shape: Sequence[int],
                rng: np.random.Generator) -> list[int]:
    """A crop start that keeps ``centre`` inside, away from the border by a quarter of the crop, and
    inside the volume where the volume is large enough."""
    out = []
    for c, s, n in zip(centre, size, shape, strict=True):
        lo, hi = c - s + max(1, s // 4), c - max(1, s // 4)
        start = int(rng.integers(lo, hi + 1)) if hi >= lo else c - s // 2
        out.append(int(np.clip(start, 0, n - s)) if n >= s else (n - s) // 2)
    return out


def _foreign_crop(mask: np.ndarray, fg: np.ndarray, rng: np.random.Generator, size: Triple) -> np.ndarray:
    """A crop of another neuron's mask around one of its foreground voxels (the copy-paste source)."""
    centre = np.unravel_index(int(fg[rng.integers(fg.size)]), mask.shape)
    start = [int(np.clip(c - s // 2, 0, max(n - s, 0))) for c, s, n in zip(centre, size, mask.shape, strict=True)]
    return crop_padded(mask, start, size)


def add_distractor(gold: np.ndarray, named: np.ndarray, changed: np.ndarray, rng: np.random.Generator,
                   cfg: DefectConfig, sources: Sequence[np.ndarray] | None, margin: int = 4,
                   tries: int = 8) -> tuple[np.ndarray, str] | None:
    """Voxels (bool) that a second, unnamed defect flips, and its kind: drawn like the first, kept only
    if it stays ``margin`` voxels clear of the named region ``named`` and of the first defect's voxels
    ``changed``; None when no such defect was found in ``tries`` draws."""
    from scipy import ndimage as ndi

    keep_out = ndi.binary_dilation(named | changed, iterations=margin) if margin > 0 else named | changed
    for _ in range(tries):
        kind = draw_kind(rng, cfg)
        extra = make_one(kind, gold, rng, cfg, sources if kind in SOURCE_KINDS else None)
        if extra is None:
            continue
        flip = extra.mask ^ gold
        if flip.any() and not (flip & keep_out).any():
            return flip, kind
    return None


def make_stage1_sample(image: np.ndarray, gold_mask: np.ndarray, rng: np.random.Generator,
                       crop_size: Sequence[int], other_masks: Sequence[np.ndarray] | None = None,
                       defects: DefectConfig | Mapping | None = None, min_foreground: int = 20,
                       fg: np.ndarray | None = None, other_fg: Sequence[np.ndarray] | None = None,
                       max_tries: int = 50, distractor_prob: float = 0.0) -> dict:
    """One stage-1 training sample as numpy arrays (no Lightning needed).

    ``image`` float ZYX in [0, 1] and ``gold_mask`` bool ZYX of the same shape (a whole volume or a
    block); ``crop_size`` (D, H, W); ``other_masks``: other neurons' gold masks for the copy-paste FPs
    (``paste`` and ``touch``; default: this volume's own mask elsewhere). ``fg`` / ``other_fg`` may pass
    ``np.flatnonzero`` of ``gold_mask`` / each of ``other_masks`` (saves a scan of large volumes per sample).
    With probability ``distractor_prob`` a second defect the instruction does not name is added away
    from the named region (:func:`add_distractor`); it is in both ``mask`` and ``target``.
    Returns ``image`` float32, ``mask`` (defective) / ``target`` / ``region`` bool, all (D, H, W),
    ``instruction`` (str), ``instruction_obj``, ``kind`` (break | paste | noise | touch), ``start`` (crop
    origin), ``distractor`` (kind of the unnamed defect, or ""), ``change`` (bool: the named defect's voxels,
    what the instruction was written from; the sample shards keep it to write the instruction again).
    """
    if not 0.0 <= distractor_prob <= 1.0:
        raise ValueError(f"distractor_prob must be in [0, 1], got {distractor_prob}")
    image = np.asarray(image)
    gold_mask = np.asarray(gold_mask, dtype=bool)
    if image.shape != gold_mask.shape or image.ndim != 3:
        raise ValueError(f"image {image.shape} and gold mask {gold_mask.shape} must be equal 3D shapes")
    size: Triple = tuple(int(s) for s in crop_size)  # type: ignore[assignment]
    if len(size) != 3 or min(size) < 3:
        raise ValueError(f"crop_size must be three sizes >= 3 (D, H, W), got {tuple(crop_size)}")
    cfg = DefectConfig.build(defects)
    fg = np.flatnonzero(gold_mask) if fg is None else fg
    if fg.size == 0:
        raise ValueError("the gold mask is empty: nothing to cut defects into")
    if other_masks:
        others = [np.asarray(m, dtype=bool) for m in other_masks]
        others_fg = list(other_fg) if other_fg is not None else [np.flatnonzero(m) for m in others]
    else:
        others, others_fg = [gold_mask], [fg]
    pool = [i for i, f in enumerate(others_fg) if f.size]
    for _ in range(max_tries):
        centre = np.unravel_index(int(fg[rng.integers(fg.size)]), gold_mask.shape)
        start = _crop_start(centre, size, gold_mask.shape, rng)
        gold = crop_padded(gold_mask, start, size)
        if gold.sum() < min_foreground:
            continue
        kind = draw_kind(rng, cfg)
        sources = None
        if kind in SOURCE_KINDS:  # paste and touch copy a piece of another neuron's mask
            if not pool:
                continue
            j = pool[int(rng.integers(len(pool)))]
            sources = [_foreign_crop(others[j], others_fg[j], rng, size)]
        defect = make_one(kind, gold, rng, cfg, sources)
        if defect is None:
            continue
        img = crop_padded(image.astype(np.float32, copy=False), start, size)
        region = defect.instruction.region(size)
        mask, target, distractor = defect.mask, defect.target, ""
        if distractor_prob > 0 and rng.random() < distractor_prob:
            extra = add_distractor(gold, region, defect.changed, rng, cfg, sources)
            if extra is not None:
                mask, target, distractor = mask ^ extra[0], target ^ extra[0], extra[1]
        return {"image": img, "mask": mask, "target": target,
                "region": region, "instruction": defect.instruction.format(),
                "instruction_obj": defect.instruction, "kind": defect.kind, "start": tuple(start),
                "distractor": distractor, "change": defect.changed}
    raise ValueError(f"no defect could be made in {max_tries} crops of size {size}: the gold mask has too "
                     f"little foreground (fewer than {min_foreground} voxels per crop) or no breakable neurite")


# ---------------------------------------------------------------------------------------------- datasets
class DefectSampleDataset(Dataset):
    """``length`` random samples from the volumes; ``seed`` None = a fresh seed per item from torch's
    generator (different every epoch and worker, reproducible under ``seed_everything``), else item i is
    always the same sample (validation)."""

    def __init__(self, volumes: Sequence[GoldVolume], crop_size: Triple, length: int,
                 defects: DefectConfig, seed: int | None = None, min_foreground: int = 20,
                 distractor_prob: float = 0.0):
        if not volumes:
            raise ValueError("no volumes to sample from")
        self.volumes = list(volumes)
        self.crop_size = crop_size
        self.length = int(length)
        self.defects = defects
        self.seed = seed
        self.min_foreground = min_foreground
        self.distractor_prob = float(distractor_prob)
        w = np.array([max(v.fg.size, 1) for v in self.volumes], dtype=np.float64)
        self.weights = w / w.sum()  # by foreground: every neurite voxel is equally likely

    def __len__(self) -> int:
        return self.length

    def sample(self, index: int | tuple[int, ...]) -> dict:
        if isinstance(index, tuple):  # a KeyedCropSampler key: the same crop on any rank and after a resume
            rng = key_rng(index)
        elif self.seed is None:
            rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,)).item()))
        else:
            rng = np.random.default_rng([int(self.seed), int(index)])
        i = int(rng.choice(len(self.volumes), p=self.weights))
        vol = self.volumes[i]
        others = [v for j, v in enumerate(self.volumes) if j != i]
        return make_stage1_sample(vol.image, vol.gold, rng, self.crop_size, [v.gold for v in others],
                                  self.defects, self.min_foreground, fg=vol.fg, other_fg=[v.fg for v in others],
                                  distractor_prob=self.distractor_prob)

    def __getitem__(self, index: int | tuple[int, ...]) -> dict:
        return to_item(self.sample(index))


class ListDataset(Dataset):
    def __init__(self, items: Sequence[dict]):
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)  # the trainer owns the other core


def _triple(value: Sequence[int], name: str) -> Triple:
    out = tuple(int(v) for v in value)
    if len(out) != 3 or min(out) < 3:
        raise ValueError(f"{name} must be three sizes >= 3 (D, H, W), got {tuple(value)}")
    return out  # type: ignore[return-value]


class Stage1DefectDataModule(L.LightningDataModule):
    """Stage 1: synthetic FN/FP defects cut into gold masks, with the instruction each implies.

    ``dataset``: a registry name, a dataset object (Hydra builds it from ``conf/dataset``) or a list of
    them. Training cases come from ``train_split`` (default ``train``, or ``dev`` for DIADEM);
    validation from ``val_split`` (default ``val``), or the last ``val_cases`` training cases when the
    dataset has no val split. The validation set is ``val_samples`` fixed samples (same every epoch and
    run for one ``seed``); training draws fresh defects every epoch. Test splits are refused.
    ``distractor_prob``: share of samples with a second, unnamed defect (see the module docstring).
    ``keyed_sampling``: draw training crops by key (:class:`~neurorefiner.data.samplers.KeyedCropSampler`:
    disjoint across ranks, the same after a resume); None = only in a distributed run.
    ``shards``: a folder holding ``train/`` and ``val/`` sample shards (``neurorefiner make-shards``): training
    and validation items are then read from them (no volume is loaded, nothing is synthesised per step);
    ``redescribe`` writes their instructions anew with today's describing functions; ``fresh_variants`` and
    ``mixed_opposites`` choose the hard negatives per read (:class:`~neurorefiner.data.sample_shards.ShardDataset`).
    """

    def __init__(self, dataset="tiny", crop_size: Sequence[int] = (32, 64, 64),  # type: ignore[no-untyped-def]
                 batch_size: int = 2, num_workers: int = 0, samples_per_epoch: int = 256,
                 val_samples: int = 32, seed: int = 0, train_split: str | None = None,
                 val_split: str | None = None, val_cases: int = 1, max_cases: int | None = None,
                 defects: DefectConfig | Mapping | None = None, min_foreground: int = 20,
                 distractor_prob: float = 0.0, keyed_sampling: bool | None = None, shards: str | None = None,
                 redescribe: bool = True, fresh_variants: bool = False, mixed_opposites: bool = False):
        super().__init__()
        self.shards, self.redescribe = (str(shards) if shards else None), bool(redescribe)
        self.fresh_variants, self.mixed_opposites = bool(fresh_variants), bool(mixed_opposites)
        if not 0.0 <= distractor_prob <= 1.0:
            raise ValueError(f"distractor_prob must be in [0, 1], got {distractor_prob}")
        self.keyed_sampling = keyed_sampling
        if batch_size < 1 or samples_per_epoch < 1 or val_samples < 0 or num_workers < 0:
            raise ValueError("batch_size and samples_per_epoch must be >= 1, val_samples and num_workers >= 0")
        self.dataset = dataset
        self.crop_size = _triple(crop_size, "crop_size")
        self.batch_size = int(batch_size)
        self.num_workers = int(num_workers)
        self.samples_per_epoch = int(samples_per_epoch)
        self.val_samples = int(val_samples)
        self.seed = int(seed)
        self.train_split, self.val_split, self.val_cases = train_split, val_split, int(val_cases)
        self.max_cases = max_cases
        self.defects = DefectConfig.build(defects)
        self.min_foreground = int(min_foreground)
        self.distractor_prob = float(distractor_prob)
        self.train_volumes: list[GoldVolume] = []
        self.val_volumes: list[GoldVolume] = []
        self._val_items: list[dict] | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_volumes or self.shards:
            return
        train_cases: list[Case] = []
        val_cases: list[Case] = []
        for ds in resolve_datasets(self.dataset):
            tr, va = split_cases(ds, self.train_split, self.val_split, self.val_cases)
            train_cases += tr
            val_cases += va
        if self.max_cases is not None:
            train_cases = train_cases[: int(self.max_cases)]
        if not train_cases:
            raise ValueError(f"dataset {self.dataset!r} has no training cases")
        self.train_volumes = [load_gold_volume(c) for c in train_cases]
        self.val_volumes = [load_gold_volume(c) for c in val_cases] or self.train_volumes

    def val_items(self) -> list[dict]:
        """The fixed validation samples (made once: the same every epoch)."""
        if self._val_items is None and self.shards:
            self._val_items = shard_val_items(self.shards, self.val_samples, self.seed, self.redescribe)
        if self._val_items is None:
            self.setup()
            ds = DefectSampleDataset(self.val_volumes, self.crop_size, self.val_samples, self.defects,
                                     seed=self.seed + 1_000_003, min_foreground=self.min_foreground,
                                     distractor_prob=self.distractor_prob)
            self._val_items = [ds[i] for i in range(len(ds))]
        return self._val_items

    def train_dataloader(self) -> DataLoader:
        self.setup()
        if self.shards:
            from neurorefiner.data.sample_shards import ShardDataset

            ds: Dataset = ShardDataset(Path(self.shards) / "train", augment=True, redescribe=self.redescribe,
                                       length=self.samples_per_epoch, fresh_variants=self.fresh_variants,
                                       mixed_opposites=self.mixed_opposites)
        else:
            ds = DefectSampleDataset(self.train_volumes, self.crop_size, self.samples_per_epoch, self.defects,
                                     seed=None, min_foreground=self.min_foreground,
                                     distractor_prob=self.distractor_prob)
        sampler = KeyedCropSampler(len(ds), self.seed) if use_keyed(self.keyed_sampling) else None
        return DataLoader(ds, batch_size=self.batch_size, shuffle=False, num_workers=self.num_workers,
                          worker_init_fn=_worker_init if self.num_workers else None, sampler=sampler,
                          persistent_workers=self.num_workers > 0, drop_last=False)

    def val_dataloader(self) -> DataLoader:
        return val_loader(ListDataset(self.val_items()), self.batch_size)


def shard_val_items(shards: str | Path, n: int | None, seed: int, redescribe: bool = True) -> list[dict]:
    """The fixed validation items of a shard folder's ``val/`` set: its first ``n`` samples (all when None),
    unflipped, each variant's instruction and wrong place drawn from ``seed`` (the same every epoch)."""
    from neurorefiner.data.sample_shards import ShardDataset

    ds = ShardDataset(Path(shards) / "val", augment=False, redescribe=redescribe, seed=seed + 1_000_003)
    return [ds[i] for i in range(len(ds) if n is None else min(int(n), len(ds)))]


def val_loader(dataset: Dataset, batch_size: int, **kwargs) -> DataLoader:  # type: ignore[no-untyped-def]
    """The validation loader: in a distributed run each rank gets its own share of the items, each item once
    (:class:`~neurorefiner.data.samplers.ShardSampler`), so reduced validation metrics equal one device's."""
    sampler = ShardSampler(len(dataset)) if rank_and_world()[1] > 1 else None  # type: ignore[arg-type]
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=0, sampler=sampler, **kwargs)
