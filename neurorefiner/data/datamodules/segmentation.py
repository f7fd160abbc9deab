"""Data for training the baseline segmenters: random crops (with foreground oversampling) of any registry
dataset, augmented with MONAI transforms, and whole validation volumes for sliding-window validation.

Labels come from ``case.label(shape)``: a label file where the dataset has one, else the gold SWC
rasterised into the image grid (DIADEM). Volumes are loaded once and kept in memory (DIADEM dev is
~120 MB as float32), so a single loader worker keeps up on a 2-core machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from neurorefiner.data.cases import Case
from neurorefiner.data.samplers import KeyedCropSampler, ShardSampler, key_rng, rank_and_world, use_keyed
from neurorefiner.data.transforms import DEFAULT_PERCENTILES, normalize_image
from neurorefiner.errors import InputError

Triple = tuple[int, int, int]


LABEL_MODES = ("gold", "adaptive")


def adaptive_label(image: np.ndarray, centreline: np.ndarray, tube: np.ndarray,
                   spacing: Sequence[float] = (1.0, 1.0, 1.0), band: float = 4.0, rel: float = 0.5,
                   sigma: float = 1.0) -> np.ndarray:
    """Gold tube UNION the voxels near the gold centreline that are as bright as the fibre there.

    The fixed-radius tube (1.5 x-voxels on DIADEM) is thinner than the imaged fibres (their intensity is
    still about half the centre value 3 x-voxels away), so a network trained on it learns "thin bright
    core only" and breaks fibres apart. Here a voxel within ``band`` (in x-voxel units, physical
    distance via ``spacing``) of the centreline is foreground when its smoothed intensity (Gaussian,
    ``sigma`` x-voxels) is at least ``rel`` times the brightest smoothed centreline voxel within ``band``
    (the fibre's half-maximum width for rel 0.5) and above the stack's 99th percentile (the background:
    neurites fill well under 1 % of a stack), so dark gaps in the fibre keep just the tube.
    """
    import edt
    from scipy import ndimage as ndi

    if band < 0 or not 0.0 < rel <= 1.0:
        raise ValueError(f"need band >= 0 and 0 < rel <= 1, got band={band}, rel={rel}")
    img = np.asarray(image, dtype=np.float32)
    cl = np.asarray(centreline, dtype=bool)
    out = np.asarray(tube, dtype=bool).copy()
    if img.shape != cl.shape or img.shape != out.shape:
        raise ValueError(f"shapes differ: image {img.shape}, centreline {cl.shape}, tube {out.shape}")
    if not cl.any() or band == 0:
        return out
    rel_sp = np.asarray(spacing, dtype=np.float64) / float(spacing[2])  # axis length in x-voxel units
    smooth = ndi.gaussian_filter(img, sigma=[sigma / r for r in rel_sp]) if sigma > 0 else img
    dist = edt.edt(~cl, anisotropy=tuple(float(r) for r in rel_sp))
    size = [2 * int(np.ceil(band / r)) + 1 for r in rel_sp]
    ref = ndi.maximum_filter(np.where(cl, smooth, 0.0).astype(np.float32), size=size)
    floor = float(np.percentile(smooth, 99.0))
    out |= (dist <= band) & (smooth >= rel * ref) & (smooth > floor)
    return out


@dataclass
class LoadedCase:
    name: str
    image: np.ndarray  # float32 ZYX in [0, 1]
    label: np.ndarray  # uint8 ZYX {0, 1}
    fg: np.ndarray  # flat indices of foreground voxels (for oversampling)
    gold: Any = None  # the gold Tree (voxel coordinates of ``image``) where the case has one: validation traces
    spacing: tuple[float, float, float] | None = None


def load_case(case: Case, percentiles: Sequence[float] | None = DEFAULT_PERCENTILES, labels: str = "gold",
              label_band: float = 4.0, label_rel: float = 0.5, with_gold: bool = False) -> LoadedCase:
    """A case in memory: normalised image and binary label. ``labels`` 'gold' is ``case.label`` (label
    file, or gold SWC rasterised with the dataset's radius); 'adaptive' widens that to the imaged fibre
    (:func:`adaptive_label`; needs the gold SWC). ``with_gold`` keeps the gold tree (validation traces it)."""
    if labels not in LABEL_MODES:
        raise ValueError(f"labels must be one of {LABEL_MODES}, got {labels!r}")
    vol = case.image()
    image = normalize_image(vol.load(), str(case.image_path), percentiles)
    label = np.asarray(case.label(image.shape)).astype(bool)
    if label.shape != image.shape:
        raise InputError(f"label shape {label.shape} differs from image shape {image.shape}",
                         case.label_path or case.swc_path)
    if labels == "adaptive":
        if case.swc_path is None:
            raise InputError("adaptive labels need the gold SWC, and this case has none", case.image_path)
        spacing = case.spacing or (1.0, 1.0, 1.0)
        centreline = case.gold().rasterize(image.shape, spacing, radius=0.5, min_radius=0.0, strict=False)
        label = adaptive_label(image, centreline, label, spacing, label_band, label_rel)
    label_u8 = label.astype(np.uint8)
    gold = case.gold() if with_gold and case.swc_path is not None else None
    spacing = tuple(float(v) for v in case.spacing) if case.spacing else None
    return LoadedCase(case.name, image, label_u8, np.flatnonzero(label_u8), gold, spacing)  # type: ignore[arg-type]


def _pad_to(array: np.ndarray, size: Triple) -> np.ndarray:
    pads = [(0, max(0, s - n)) for n, s in zip(array.shape, size, strict=True)]
    return np.pad(array, pads) if any(p[1] for p in pads) else array


def random_crop(case: LoadedCase, patch: Triple, rng: np.random.Generator,
                foreground: bool) -> tuple[np.ndarray, np.ndarray]:
    """A ``patch``-sized crop; when ``foreground``, one that contains a random foreground voxel at a random
    position inside it. Volumes smaller than the patch are zero-padded."""
    image, label = _pad_to(case.image, patch), _pad_to(case.label, patch)
    shape = image.shape
    if foreground and case.fg.size:
        centre = np.unravel_index(int(case.fg[rng.integers(case.fg.size)]), case.image.shape)
        start = [int(np.clip(c - rng.integers(p), 0, n - p)) for c, p, n in zip(centre, patch, shape, strict=True)]
    else:
        start = [int(rng.integers(n - p + 1)) for p, n in zip(patch, shape, strict=True)]
    sl = tuple(slice(s, s + p) for s, p in zip(start, patch, strict=True))
    return image[sl], label[sl]


def build_augmentation(patch: Triple, rotate: bool = True):  # type: ignore[no-untyped-def]
    """Flips on every axis, in-plane 90-degree turns (square yx patches only), small in-plane rotations,
    and intensity scale/shift/gamma/noise. z is left unrotated: confocal stacks are anisotropic."""
    from monai import transforms as T

    keys = ["image", "label"]
    ts = [T.RandFlipd(keys, prob=0.5, spatial_axis=a) for a in (0, 1, 2)]
    if rotate and patch[1] == patch[2]:
        ts.append(T.RandRotate90d(keys, prob=0.5, spatial_axes=(1, 2)))
    if rotate:
        ts.append(T.RandRotated(keys, range_x=0.3, prob=0.2, mode=("bilinear", "nearest"),
                                padding_mode="zeros", keep_size=True))
    ts += [T.RandScaleIntensityd("image", factors=0.3, prob=0.5),
           T.RandShiftIntensityd("image", offsets=0.05, prob=0.3),
           T.RandAdjustContrastd("image", gamma=(0.7, 1.5), prob=0.3),
           T.RandGaussianNoised("image", std=0.02, prob=0.3)]
    return T.Compose(ts)


def _plain(t) -> torch.Tensor:  # type: ignore[no-untyped-def]
    t = t.as_tensor() if hasattr(t, "as_tensor") else torch.as_tensor(t)
    return t


class RandomPatchDataset(Dataset):
    """``samples_per_epoch`` random crops from the loaded cases; a fraction ``fg_prob`` are centred near
    foreground (neurites fill ~0.03 % of a DIADEM stack: uniform crops would be almost all background)."""

    def __init__(self, cases: Sequence[LoadedCase], patch_size: Triple, samples_per_epoch: int = 64,
                 fg_prob: float = 0.67, augment: bool = True):
        if not cases:
            raise ValueError("no training cases")
        if not 0.0 <= fg_prob <= 1.0:
            raise ValueError(f"fg_prob must be in [0, 1], got {fg_prob}")
        self.cases = list(cases)
        self.patch = tuple(int(p) for p in patch_size)
        self.samples_per_epoch = int(samples_per_epoch)
        self.fg_prob = fg_prob
        sizes = np.array([c.image.size for c in self.cases], dtype=np.float64)
        self.weights = sizes / sizes.sum()
        self.transform = build_augmentation(self.patch) if augment else None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return self.samples_per_epoch

    def __getitem__(self, index: int | tuple[int, ...]) -> dict[str, torch.Tensor]:
        if isinstance(index, tuple):  # a KeyedCropSampler key: the same crop on any rank and after a resume
            rng = key_rng(index)
        else:  # a fresh seed from torch's generator: differs per epoch and per worker, reproducible under a seed
            rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,)).item()))
        case = self.cases[int(rng.choice(len(self.cases), p=self.weights))]
        image, label = random_crop(case, self.patch, rng, rng.random() < self.fg_prob)  # type: ignore[arg-type]
        item = {"image": torch.from_numpy(np.ascontiguousarray(image))[None],
                "label": torch.from_numpy(np.ascontiguousarray(label).astype(np.float32))[None]}
        if self.transform is not None:
            self.transform.set_random_state(seed=int(rng.integers(2**31 - 1)))
            item = self.transform(item)
        # plain tensors: MONAI's MetaTensor would track metadata through every op of the training step
        image_t = _plain(item["image"]).float().clamp_(0.0, 1.0)
        label_t = (_plain(item["label"]) > 0.5).long()
        return {"image": image_t.contiguous(), "label": label_t.contiguous()}


def centre_crop_on_label(case: LoadedCase, size: Sequence[int] | None) -> LoadedCase:
    """The ``size`` sub-volume centred on the label's bounding box (whole volume when it fits), so that
    validation by sliding window stays within seconds on a CPU and still sees the neurites."""
    if size is None or all(n <= s for n, s in zip(case.image.shape, size, strict=True)):
        return case
    if case.fg.size:
        idx = np.unravel_index(case.fg, case.image.shape)
        centre = [(int(i.min()) + int(i.max())) // 2 for i in idx]
    else:
        centre = [n // 2 for n in case.image.shape]
    sl = []
    for c, s, n in zip(centre, size, case.image.shape, strict=True):
        s = min(int(s), n)
        lo = int(np.clip(c - s // 2, 0, n - s))
        sl.append(slice(lo, lo + s))
    sl_t = tuple(sl)
    label = case.label[sl_t]
    return LoadedCase(case.name, case.image[sl_t], label, np.flatnonzero(label), crop_tree(case.gold, sl_t),
                      case.spacing)


def crop_tree(tree, box: tuple[slice, ...]):  # type: ignore[no-untyped-def]
    """The nodes of ``tree`` (voxel coordinates) inside ``box`` (z, y, x slices), shifted into it; a node whose
    parent falls outside becomes a root. None stays None."""
    if tree is None:
        return None
    lo = np.array([b.start for b in box], dtype=np.float64)
    hi = np.array([b.stop for b in box], dtype=np.float64)
    zyx = tree.zyx
    inside = np.all((zyx >= lo - 0.5) & (zyx <= hi - 0.5), axis=1)
    return tree.subset(inside).offset(-lo[::-1])


class VolumeDataset(Dataset):
    """Whole (or centre-cropped) volumes for sliding-window validation, one per item."""

    def __init__(self, cases: Sequence[LoadedCase], max_size: Sequence[int] | None = None):
        self.cases = [centre_crop_on_label(c, max_size) for c in cases]

    def __len__(self) -> int:
        return len(self.cases)

    def __getitem__(self, index: int) -> dict:
        c = self.cases[index]
        return {"image": torch.from_numpy(np.ascontiguousarray(c.image))[None],
                "label": torch.from_numpy(c.label.astype(np.int64))[None], "name": c.name,
                "gold": c.gold, "spacing": c.spacing}


def collate_volumes(items: list[dict]) -> dict:
    """Batch whole volumes (tensors stacked); the gold tree and spacing pass through as lists."""
    from torch.utils.data import default_collate

    tensors = default_collate([{k: it[k] for k in ("image", "label", "name")} for it in items])
    tensors["gold"] = [it["gold"] for it in items]
    tensors["spacing"] = [it["spacing"] for it in items]
    return tensors


def _worker_init(_: int) -> None:
    torch.set_num_threads(1)  # the trainer owns the other core


class SegmentationDataModule(L.LightningDataModule):
    """Crops for training, whole volumes for validation, from any dataset of the registry.

    Args:
        dataset: an object with ``cases(split)`` (``get_dataset(name)`` or a Hydra-built dataset).
        train_split: split to train on; None picks ``train`` if the dataset has one (synthetic presets),
            else ``dev`` (DIADEM). Never a test split.
        val_split: a separate validation split; None picks ``val`` where the dataset has one. Otherwise
            ``val_cases`` (names) or the last ``n_val`` cases of the training split are held out for
            validation and checkpoint selection.
        val_max_size: validation volumes larger than this are centre-cropped on their label (CPU time).
        patch_size: training crop (z, y, x).
        batch_size, samples_per_epoch, fg_prob, augment: crop sampling.
        num_workers: loader workers; 1 suits 2 cores (the training step uses the other).
        max_train_cases: use only the first N training cases (tests, smoke runs).
        normalization: (low, high) percentiles mapped to [0, 1] (:func:`normalize_image`); None: min-max.
        labels: 'gold' (``case.label``) or 'adaptive' (gold tube widened to the imaged fibre,
            :func:`adaptive_label` with ``label_band`` and ``label_rel``). Validation uses the same labels.
        keyed_sampling: draw training crops by key (:class:`~neurorefiner.data.samplers.KeyedCropSampler`,
            disjoint across ranks and the same after a resume); None = only in a distributed run, so a
            one-device run draws exactly as before. ``seed`` keys the draws (None: Lightning's global seed).
    """

    def __init__(self, dataset, train_split: str | None = None, val_split: str | None = None,  # type: ignore[no-untyped-def]
                 val_cases: Sequence[str] | None = None, n_val: int = 1,
                 val_max_size: Sequence[int] | None = (64, 256, 256),
                 patch_size: Sequence[int] = (32, 96, 96), batch_size: int = 2, samples_per_epoch: int = 64,
                 fg_prob: float = 0.67, augment: bool = True, num_workers: int = 1,
                 max_train_cases: int | None = None,
                 normalization: Sequence[float] | None = DEFAULT_PERCENTILES, labels: str = "gold",
                 label_band: float = 4.0, label_rel: float = 0.5, keyed_sampling: bool | None = None,
                 seed: int | None = None):
        super().__init__()
        self.keyed_sampling, self.seed = keyed_sampling, seed
        if labels not in LABEL_MODES:
            raise ValueError(f"labels must be one of {LABEL_MODES}, got {labels!r}")
        if normalization is not None and len(tuple(normalization)) != 2:
            raise ValueError(f"normalization must be two percentiles (low, high) or None, got {normalization!r}")
        self.normalization = None if normalization is None else tuple(float(p) for p in normalization)
        self.labels, self.label_band, self.label_rel = labels, float(label_band), float(label_rel)
        if train_split == "test":
            raise InputError("refusing to train on a test split (held out for reporting only)")
        if len(tuple(patch_size)) != 3 or min(patch_size) < 1:
            raise ValueError(f"patch_size must be three positive ints, got {patch_size!r}")
        self.dataset = dataset
        splits = tuple(getattr(dataset, "splits", ()))
        if train_split is None:
            train_split = "train" if "train" in splits else "dev"
        if val_split is None and "val" in splits and not val_cases:
            val_split = "val"
        self.train_split, self.val_split = train_split, val_split
        self.val_max_size = tuple(val_max_size) if val_max_size else None
        self.val_names = list(val_cases) if val_cases else None
        self.n_val = int(n_val)
        self.patch_size = tuple(int(p) for p in patch_size)
        self.batch_size, self.samples_per_epoch = int(batch_size), int(samples_per_epoch)
        self.fg_prob, self.augment = fg_prob, augment
        self.num_workers = int(num_workers)
        self.max_train_cases = max_train_cases
        self.train_cases: list[LoadedCase] = []
        self.val_cases: list[LoadedCase] = []

    def split_cases(self) -> tuple[list[Case], list[Case]]:
        """(train, validation) cases; validation never overlaps training and never comes from 'test'."""
        train = list(self.dataset.cases(self.train_split))
        if self.val_split is not None:
            if self.val_split == "test":
                raise InputError("validation picks checkpoints: it may not use the test split")
            val = list(self.dataset.cases(self.val_split))
        elif self.val_names:
            unknown = set(self.val_names) - {c.name for c in train}
            if unknown:
                raise InputError(f"val_cases {sorted(unknown)} are not in split {self.train_split!r}")
            val = [c for c in train if c.name in self.val_names]
            train = [c for c in train if c.name not in self.val_names]
        else:
            n_val = min(self.n_val, len(train) - 1)
            val, train = (train[len(train) - n_val:], train[: len(train) - n_val]) if n_val > 0 else ([], train)
        if self.max_train_cases:
            train = train[: self.max_train_cases]
        if not train:
            raise InputError(f"split {self.train_split!r} leaves no training cases")
        return train, val

    def setup(self, stage: str | None = None) -> None:
        if self.train_cases:
            return
        train, val = self.split_cases()
        kw = {"percentiles": self.normalization, "labels": self.labels, "label_band": self.label_band,
              "label_rel": self.label_rel}
        self.train_cases = [load_case(c, **kw) for c in train]
        self.val_cases = [load_case(c, **kw, with_gold=True) for c in val]

    def train_dataloader(self) -> DataLoader:
        ds = RandomPatchDataset(self.train_cases, self.patch_size, self.samples_per_epoch, self.fg_prob,
                                self.augment)  # type: ignore[arg-type]
        sampler = None
        if use_keyed(self.keyed_sampling):
            seed = self.seed if self.seed is not None else int(os.environ.get("PL_GLOBAL_SEED", 0))
            sampler = KeyedCropSampler(len(ds), seed)
        return DataLoader(ds, batch_size=self.batch_size, num_workers=self.num_workers, sampler=sampler,
                          persistent_workers=self.num_workers > 0, worker_init_fn=_worker_init,
                          drop_last=False)

    def val_dataloader(self) -> DataLoader:
        ds = VolumeDataset(self.val_cases, self.val_max_size)
        # distributed: each rank validates its own cases, each case once (no padding repeats)
        sampler = ShardSampler(len(ds)) if rank_and_world()[1] > 1 else None
        return DataLoader(ds, batch_size=1, num_workers=0, collate_fn=collate_volumes, sampler=sampler)
