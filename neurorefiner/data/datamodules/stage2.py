"""Stage-2 training data for TopoRefineNet: real defects mined from baseline segmenters' masks.

As the paper's second stage: masks of several segmenters (read from
``data/cache/init_masks/<dataset>/<segmenter>/<case>.tif``, written by ``neurorefiner.inference.init_masks``)
are cut into crops; crops with significant errors are kept, judged by connected components (Betti-0 of
the mask against the gold crop) and a voxel F1 with a small distance tolerance (thin gold tubes and
slightly thicker predictions should not count as errors); each kept crop gets an instruction from an
**instruction writer**, a plain function ``(image_crop, mask_crop, gold_crop) -> Instruction | str |
None`` (None = skip the crop). The default, :func:`difference_writer`, reads the largest error from the
difference with the gold mask; the agents' Refinement Advisor (a VLM in the paper) can be passed instead
without touching this module. The mined list (crop places, scores, instructions) is cached as a
manifest in ``data/cache/stage2_mined/<key>/manifest.json``; the key hashes the settings, the writer
and the mask files, so changing any of them mines again.

Batches follow the same contract as stage 1 (see :mod:`neurorefiner.data.datamodules.stage1`). Crop sizes are
(D, H, W) = (z, y, x).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from scipy import ndimage
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from neurorefiner.data.datamodules.stage1 import (
    DefectSampleDataset,
    ListDataset,
    Stage1DefectDataModule,
    _triple,
    _worker_init,
    check_not_held_out,
    crop_padded,
    resolve_datasets,
    shard_val_items,
    to_item,
    val_loader,
)
from neurorefiner.data.samplers import KeyedCropSampler, key_rng, use_keyed
from neurorefiner.defects.describe import DEFAULT_LONG_GAP, betti0, describe_change
from neurorefiner.errors import InputError
from neurorefiner.io import read_mask
from neurorefiner.io.atomic import atomic_path
from neurorefiner.paths import cache_dir, init_mask_path
from neurorefiner.topology.instructions import Instruction, InstructionParseError, parse_instruction

log = logging.getLogger(__name__)

Triple = tuple[int, int, int]
InstructionWriter = Callable[[np.ndarray, np.ndarray, np.ndarray], "Instruction | str | None"]
MANIFEST_VERSION = 1
_CUBE = np.ones((3, 3, 3), dtype=bool)


# ---------------------------------------------------------------------------------------------- scores
def _dilate(mask: np.ndarray, tolerance: int) -> np.ndarray:
    return ndimage.binary_dilation(mask, _CUBE, iterations=tolerance) if tolerance > 0 else mask


def tolerant_f1(mask: np.ndarray, gold: np.ndarray, tolerance: int = 1) -> float:
    """Voxel F1 where a voxel within ``tolerance`` voxels (26-neighbourhood steps) of the other mask
    counts as matched; tolerance 0 is the Dice coefficient. Both empty -> 1."""
    m, g = mask.sum(), gold.sum()
    if m == 0 and g == 0:
        return 1.0
    if m == 0 or g == 0:
        return 0.0
    precision = (mask & _dilate(gold, tolerance)).sum() / m
    recall = (gold & _dilate(mask, tolerance)).sum() / g
    return float(2 * precision * recall / (precision + recall)) if precision + recall > 0 else 0.0


def error_pieces(mask: np.ndarray, gold: np.ndarray, tolerance: int = 1, min_voxels: int = 10,
                 fp_tolerance: int = 3) -> list[tuple[str, np.ndarray]]:
    """The errors of ``mask`` against ``gold`` that matter for topology, as 26-connected pieces of at
    least ``min_voxels`` voxels, largest first (FN first on ties), each as its flat voxel indices (ascending):

    * ("fn", voxels): gold farther than ``tolerance`` voxels from the mask (missing neurite, breaks);
    * ("fp", voxels): mask components that come no closer than ``tolerance`` to gold (isolated noise),
      and mask voxels farther than ``fp_tolerance`` from gold (spurs, merged foreign fibres). A mask that
      is only thicker than the gold tubes is not an error.

    Indices, not one volume-sized array per piece: a whole segmented stack holds thousands of pieces, and
    their full-size masks filled a 24 GB machine while stage-2 shards were made.
    """
    import cc3d

    mask, gold = np.asarray(mask, bool), np.asarray(gold, bool)
    near_gold = _dilate(gold, tolerance)
    fp = mask & ~_dilate(gold, max(fp_tolerance, tolerance))
    if mask.any():
        labels = cc3d.connected_components(np.ascontiguousarray(mask), connectivity=26)
        touching = np.unique(labels[mask & near_gold])
        fp |= mask & ~np.isin(labels, touching)
    out: list[tuple[int, int, str, np.ndarray]] = []
    for kind, diff in (("fn", gold & ~_dilate(mask, tolerance)), ("fp", fp)):
        if not diff.any():
            continue
        labels, n = cc3d.connected_components(np.ascontiguousarray(diff), connectivity=26, return_N=True)
        flat = labels.ravel()
        voxels = np.flatnonzero(flat)
        owner = flat[voxels]
        order = np.argsort(owner, kind="stable")  # stable: each piece's voxels stay ascending
        voxels, owner = voxels[order], owner[order]
        bounds = np.searchsorted(owner, np.arange(1, n + 2))
        for lab in range(1, n + 1):
            a, b = int(bounds[lab - 1]), int(bounds[lab])
            if b - a >= min_voxels:
                out.append((a - b, 0 if kind == "fn" else 1, kind, voxels[a:b]))
    out.sort(key=lambda t: (t[0], t[1]))
    return [(kind, piece) for _, _, kind, piece in out]


def error_components(mask: np.ndarray, gold: np.ndarray, tolerance: int = 1, min_voxels: int = 10,
                     fp_tolerance: int = 3) -> list[tuple[str, np.ndarray]]:
    """:func:`error_pieces` as boolean masks of ``mask``'s shape (for crops; a whole stack wants the indices)."""
    out = []
    for kind, voxels in error_pieces(mask, gold, tolerance, min_voxels, fp_tolerance):
        comp = np.zeros(np.shape(mask), dtype=bool)
        comp.flat[voxels] = True
        out.append((kind, comp))
    return out


def difference_writer(image_crop: np.ndarray, mask_crop: np.ndarray, gold_crop: np.ndarray,
                      tolerance: int = 1, min_voxels: int = 10, fp_tolerance: int = 3,
                      long_gap: float = DEFAULT_LONG_GAP) -> Instruction | None:
    """Default stage-2 instruction writer: the largest error against gold (see :func:`error_components`),
    named through the grammar.

    Missing gold (FN) -> connect/repair, extra foreground (FP) -> remove, placed and chosen exactly as
    the stage-1 defects are (:func:`~neurorefiner.defects.describe.describe_change`). Deterministic;
    the image is not used (a VLM writer would look at it). None when no error is large enough.
    """
    errors = error_components(mask_crop, gold_crop, tolerance, min_voxels, fp_tolerance)
    if not errors:
        return None
    kind, comp = errors[0]
    return describe_change(comp, kind, long_gap)


# bump when the default writer's output changes: the id is part of the mined-set cache key
difference_writer.writer_id = "neurorefiner.data.datamodules.stage2.difference_writer@2"  # type: ignore[attr-defined]


def writer_id(writer: Callable) -> str:
    """A stable name for a writer (part of the cache key): ``writer_id`` attribute, or the function's
    dotted name with the keywords of a ``functools.partial``."""
    explicit = getattr(writer, "writer_id", None)
    if isinstance(explicit, str):
        return explicit
    if isinstance(writer, functools.partial):
        kw = ",".join(f"{k}={writer.keywords[k]!r}" for k in sorted(writer.keywords))
        return f"{writer_id(writer.func)}({kw})"
    mod = getattr(writer, "__module__", "?")
    name = getattr(writer, "__qualname__", type(writer).__qualname__)
    return f"{mod}.{name}"


def resolve_writer(writer: InstructionWriter | str | None) -> InstructionWriter:
    """A callable, a dotted path ``package.module.function`` (or ``module:function``), or None (default)."""
    if writer is None:
        return difference_writer
    if isinstance(writer, str):
        import importlib

        mod, _, name = writer.replace(":", ".").rpartition(".")
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise ValueError(f"cannot import instruction writer {writer!r}: {exc}") from exc
    if not callable(writer):
        raise ValueError(f"instruction writer must be callable, got {type(writer).__name__}")
    return writer


# ---------------------------------------------------------------------------------------------- mining
@dataclass
class MinedCrop:
    """One mined crop: where it is, how wrong the mask is there, and the instruction written for it."""

    dataset: str
    segmenter: str
    case: str
    start: tuple[int, int, int]  # z, y, x of the crop's first voxel (may be < 0 or overrun: zero-padded)
    f1: float
    betti_mask: int
    betti_gold: int
    instruction: str


@dataclass
class MiningSettings:
    crop_size: Triple = (32, 64, 64)
    stride: Triple | None = None  # None = crop_size (tiles without overlap)
    max_f1: float = 0.9  # keep crops whose tolerant F1 is below this ...
    min_betti_diff: int = 1  # ... or whose component count differs from gold's by at least this
    tolerance: int = 1  # voxels, for the F1
    min_foreground: int = 30  # gold or mask voxels in the crop; emptier crops are skipped
    max_crops: int | None = None  # keep the worst (lowest F1) this many


def _windows(shape: Sequence[int], size: Triple, stride: Triple) -> list[tuple[int, int, int]]:
    """Crop starts tiling the volume (the last window of an axis is moved back to end at the border)."""
    axes = []
    for n, s, st in zip(shape, size, stride, strict=True):
        if n <= s:
            axes.append([(n - s) // 2])
            continue
        starts = list(range(0, n - s + 1, st))
        if starts[-1] != n - s:
            starts.append(n - s)
        axes.append(starts)
    return [(z, y, x) for z in axes[0] for y in axes[1] for x in axes[2]]


def mine_volume(image: np.ndarray, mask: np.ndarray, gold: np.ndarray, settings: MiningSettings,
                writer: InstructionWriter, names: tuple[str, str, str] = ("", "", "")) -> list[MinedCrop]:
    """The crops of one (image, mask, gold) triple with significant errors, each with its instruction."""
    size = settings.crop_size
    stride = settings.stride or size
    out: list[MinedCrop] = []
    for start in _windows(mask.shape, size, stride):
        m, g = crop_padded(mask, start, size), crop_padded(gold, start, size)
        if max(int(m.sum()), int(g.sum())) < settings.min_foreground:
            continue
        f1 = tolerant_f1(m, g, settings.tolerance)
        bm, bg = betti0(m), betti0(g)
        if f1 >= settings.max_f1 and abs(bm - bg) < settings.min_betti_diff:
            continue
        written = writer(crop_padded(image, start, size), m, g)
        if written is None:
            continue
        try:
            instruction = parse_instruction(written)
        except InstructionParseError as exc:
            log.warning("instruction writer gave unreadable text for %s %s: %s", names, start, exc.problem)
            continue
        out.append(MinedCrop(names[0], names[1], names[2], tuple(int(s) for s in start), f1, bm, bg,
                             instruction.format()))
    return out


# ---------------------------------------------------------------------------------------------- module
@dataclass
class _Source:
    dataset: str
    segmenter: str
    case: object  # data.Case
    mask_path: Path


class _Volumes:
    """Image, gold and mask arrays by (dataset, segmenter, case), loaded once."""

    def __init__(self) -> None:
        self.images: dict[tuple[str, str], np.ndarray] = {}
        self.golds: dict[tuple[str, str], np.ndarray] = {}
        self.masks: dict[tuple[str, str, str], np.ndarray] = {}

    def load(self, src: _Source) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = (src.dataset, src.case.name)  # type: ignore[attr-defined]
        if key not in self.images:
            image = src.case.image().normalized()  # type: ignore[attr-defined]
            self.images[key] = image
            self.golds[key] = np.asarray(src.case.label(image.shape)) > 0  # type: ignore[attr-defined]
        mkey = (src.dataset, src.segmenter, src.case.name)  # type: ignore[attr-defined]
        if mkey not in self.masks:
            mask = read_mask(src.mask_path).load()
            if mask.shape != self.images[key].shape:
                raise InputError(f"mask shape {mask.shape} differs from image shape {self.images[key].shape}",
                                 src.mask_path)
            self.masks[mkey] = np.asarray(mask, dtype=bool)
        return self.images[key], self.masks[mkey], self.golds[key]


TARGETS = ("gold", "local", "instructed")


def mined_target(kind: str, mask: np.ndarray, gold: np.ndarray, region: np.ndarray, op: str) -> np.ndarray:
    """What a mined crop should become: ``gold`` the whole gold crop (the paper); ``local`` gold inside
    the named region, the input mask elsewhere; ``instructed`` as ``local`` but only the named operation
    (connect / repair only add gold voxels, remove only deletes non-gold ones), so that the operation word
    decides the edit as it does in stage 1's swapped samples."""
    if kind == "gold":
        return gold
    if kind == "local":
        return np.where(region, gold, mask)
    if kind == "instructed":
        if op == "remove":
            return mask & (gold | ~region)
        return mask | (gold & region)
    raise ValueError(f"target must be one of {TARGETS}, got {kind!r}")


class MinedCropDataset(Dataset):
    """Mined crops as batch items; ``augment`` mirrors the crop along random axes and mirrors the
    instruction's positions with it (left <-> right etc.), so the words still name the right place."""

    def __init__(self, crops: Sequence[MinedCrop], volumes: _Volumes, sources: Mapping, size: Triple,
                 length: int | None = None, augment: bool = False, target: str = "gold"):
        self.crops = list(crops)
        self.volumes = volumes
        self.sources = sources
        self.size = size
        self.length = len(self.crops) if length is None else int(length)
        self.augment = augment
        self.target = target

    def __len__(self) -> int:
        return self.length

    def sample(self, index: int, rng: np.random.Generator | None = None) -> dict:
        c = self.crops[index % len(self.crops)]
        image, mask, gold = self.volumes.load(self.sources[(c.dataset, c.segmenter, c.case)])
        img, m, g = (crop_padded(a, c.start, self.size) for a in (image, mask, gold))
        instruction = parse_instruction(c.instruction)
        if rng is not None:
            axes = [a for a in range(3) if rng.random() < 0.5]
            if axes:
                img, m, g = (np.flip(a, axis=axes) for a in (img, m, g))
                instruction = instruction.flipped(axes)
        region = instruction.region(self.size)
        target = mined_target(self.target, m, g, region, instruction.op)
        return {"image": img, "mask": m, "target": target, "region": region,
                "instruction": instruction.format(), "instruction_obj": instruction}

    def __getitem__(self, index: int | tuple[int, ...]) -> dict:
        keyed = isinstance(index, tuple)  # a KeyedCropSampler key: the same item on any rank, after a resume
        if self.augment:
            rng = key_rng(index) if keyed else np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,)).item()))
            index = int(rng.integers(len(self.crops)))
            return to_item(self.sample(index, rng))
        if keyed:  # crop n of the stream: the n-th place of a fresh permutation of the crops every pass over them
            n, size = int(index[-1]), len(self.crops)
            return to_item(self.sample(int(key_rng((*index[:-1], n // size, 1)).permutation(size)[n % size])))
        return to_item(self.sample(index))


class ReplayDataset(Dataset):
    """Mined crops, with a share ``replay_prob`` of the items drawn from a stage-1 defect dataset instead.

    Why: the mined crops are nearly all removals (segmenter masks are wider than the gold tubes), so
    fine-tuning on them alone unlearns the additions (break repair) that stage 1 taught; replaying
    stage-1 samples keeps them in the mix."""

    def __init__(self, mined: Dataset, replay: Dataset, replay_prob: float):
        if not 0.0 <= replay_prob <= 1.0:
            raise ValueError(f"replay_prob must be in [0, 1], got {replay_prob}")
        self.mined, self.replay, self.replay_prob = mined, replay, float(replay_prob)

    def __len__(self) -> int:
        return len(self.mined)

    def __getitem__(self, index: int | tuple[int, ...]) -> dict:
        if isinstance(index, tuple):  # keyed: the choice and both draws follow from the key alone
            if key_rng((*index, 1)).random() < self.replay_prob:
                return self.replay[(*index, 2)]
            return self.mined[index]
        if float(torch.rand(1)) < self.replay_prob:
            return self.replay[int(torch.randint(0, len(self.replay), (1,)))]
        return self.mined[index]


class Stage2MinedDataModule(L.LightningDataModule):
    """Stage 2: crops of baseline segmenters' masks with significant errors, instructions from a writer.

    ``dataset``: registry name, dataset object or list; ``segmenters``: names of the folders under
    ``init_masks/<dataset>/`` (None = all found); ``split``: where to mine (default ``train``, or
    ``dev`` for DIADEM; test splits are refused). Validation = the crops of the last ``val_cases``
    case(s) when there are more cases than that, else every ``1/val_fraction``-th crop; at most
    ``val_samples`` of them (evenly spaced); fixed.
    ``writer``: the instruction writer (callable, dotted path, or None for :func:`difference_writer`).
    ``replay_prob`` / ``replay``: share of training items that are stage-1 synthetic defects
    (:class:`ReplayDataset`), and the keyword arguments of the :class:`Stage1DefectDataModule` that makes
    them (its ``dataset`` and ``crop_size`` default to this module's); validation stays mined crops only.
    ``target``: see :func:`mined_target` — ``gold`` (the paper: the gold crop), ``instructed`` (only the
    named operation, only inside the named region) or ``local`` (gold inside the instruction's region,
    the input mask elsewhere: teaches to edit only where told).
    ``keyed_sampling``: as :class:`Stage1DefectDataModule` (None = keyed only in a distributed run).
    ``shards``: a folder holding ``train/`` and ``val/`` stage-2 sample shards (``neurorefiner make-shards
    --stage 2``): items are then read from them, no mining; ``replay_shards``: the stage-1 shard folder the
    ``replay_prob`` share of training items comes from (its ``train/``).
    """

    def __init__(self, dataset="tiny", segmenters: Sequence[str] | None = None,  # type: ignore[no-untyped-def]
                 crop_size: Sequence[int] = (32, 64, 64), stride: Sequence[int] | None = None,
                 batch_size: int = 2, num_workers: int = 0, samples_per_epoch: int = 256, seed: int = 0,
                 split: str | None = None, val_cases: int = 1, val_fraction: float = 0.1,
                 val_samples: int | None = 64,
                 max_f1: float = 0.9, min_betti_diff: int = 1, tolerance: int = 1, min_foreground: int = 30,
                 max_crops: int | None = None, writer: InstructionWriter | str | None = None,
                 target: str = "gold", augment: bool = True, init_masks_root: str | Path | None = None,
                 cache_root: str | Path | None = None, progress: bool = True, replay_prob: float = 0.0,
                 replay: Mapping | None = None, keyed_sampling: bool | None = None, shards: str | None = None,
                 replay_shards: str | None = None, redescribe: bool = True):
        super().__init__()
        self.shards = str(shards) if shards else None
        self.replay_shards = str(replay_shards) if replay_shards else None
        self.redescribe = bool(redescribe)
        self.keyed_sampling = keyed_sampling
        if not 0.0 <= replay_prob <= 1.0:
            raise ValueError(f"replay_prob must be in [0, 1], got {replay_prob}")
        self.replay_prob, self.replay = float(replay_prob), dict(replay or {})
        if batch_size < 1 or samples_per_epoch < 1 or num_workers < 0:
            raise ValueError("batch_size and samples_per_epoch must be >= 1, num_workers >= 0")
        if target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {target!r}")
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.dataset = dataset
        self.segmenters = list(segmenters) if segmenters is not None else None
        size = _triple(crop_size, "crop_size")
        self.settings = MiningSettings(size, _triple(stride, "stride") if stride is not None else None,
                                       float(max_f1), int(min_betti_diff), int(tolerance), int(min_foreground),
                                       None if max_crops is None else int(max_crops))
        self.batch_size, self.num_workers = int(batch_size), int(num_workers)
        self.samples_per_epoch, self.seed = int(samples_per_epoch), int(seed)
        self.split, self.val_cases, self.val_fraction = split, int(val_cases), float(val_fraction)
        self.val_samples = None if val_samples is None else int(val_samples)
        self.writer = resolve_writer(writer)
        self.target, self.augment, self.progress = target, bool(augment), bool(progress)
        self.init_masks_root = Path(init_masks_root) if init_masks_root else cache_dir() / "init_masks"
        self.cache_root = Path(cache_root) if cache_root else cache_dir() / "stage2_mined"
        self.volumes = _Volumes()
        self.sources: dict[tuple[str, str, str], _Source] = {}
        self.crops: list[MinedCrop] = []
        self.train_crops: list[MinedCrop] = []
        self.val_crops: list[MinedCrop] = []
        self.manifest_path: Path | None = None
        self._val_items: list[dict] | None = None

    # -------------------------------------------------------------- sources and cache
    def find_sources(self) -> list[_Source]:
        """Every (dataset, segmenter, case) with a mask file; a clear error when there is none."""
        found: list[_Source] = []
        wanted: list[Path] = []
        for ds in resolve_datasets(self.dataset):
            splits = tuple(getattr(ds, "splits", ()))
            split = self.split or ("train" if "train" in splits else "dev")
            if split == "test":
                raise ValueError("mining the test split is not allowed (stage 2 trains on what it mines)")
            root = self.init_masks_root / ds.name
            segs = self.segmenters
            if segs is None:
                segs = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
            for case in ds.cases(split):
                check_not_held_out(case)
                for seg in segs:
                    path = init_mask_path(ds.name, seg, case.name, root=self.init_masks_root)
                    wanted.append(path)
                    if path.exists():
                        found.append(_Source(ds.name, seg, case, path))
        if not found:
            where = wanted[0].parent if wanted else self.init_masks_root
            raise InputError("no initial masks to mine for stage 2; make masks of the training split first "
                             "with `python -m neurorefiner.inference.init_masks dataset=<name> segmenter=<name>` "
                             "(they go to init_masks/<dataset>/<segmenter>/<case>.tif)", where)
        return found

    def cache_key(self, sources: Sequence[_Source]) -> str:
        files = []
        for s in sources:
            st = s.mask_path.stat()
            files.append([s.dataset, s.segmenter, s.case.name, st.st_size, st.st_mtime_ns])  # type: ignore[attr-defined]
        blob = json.dumps({"version": MANIFEST_VERSION, "settings": asdict(self.settings),
                           "writer": writer_id(self.writer), "files": files}, sort_keys=True, default=list)
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    def mine(self) -> list[MinedCrop]:
        """Mine (or read back from the cache) the crops of every source."""
        sources = self.find_sources()
        self.sources = {(s.dataset, s.segmenter, s.case.name): s for s in sources}  # type: ignore[attr-defined]
        key = self.cache_key(sources)
        path = self.cache_root / key / "manifest.json"
        self.manifest_path = path
        if path.exists():
            data = json.loads(path.read_text())
            return [MinedCrop(**{**c, "start": tuple(c["start"])}) for c in data["crops"]]
        crops: list[MinedCrop] = []
        for s in tqdm(sources, desc="mining stage-2 crops", disable=not self.progress):
            image, mask, gold = self.volumes.load(s)
            crops += mine_volume(image, mask, gold, self.settings, self.writer,
                                 (s.dataset, s.segmenter, s.case.name))  # type: ignore[attr-defined]
        if self.settings.max_crops is not None and len(crops) > self.settings.max_crops:
            crops = sorted(crops, key=lambda c: c.f1)[: self.settings.max_crops]
        manifest = {"version": MANIFEST_VERSION, "key": key, "settings": asdict(self.settings),
                    "writer": writer_id(self.writer),
                    "sources": [{"dataset": s.dataset, "segmenter": s.segmenter, "case": s.case.name,  # type: ignore[attr-defined]
                                 "mask": str(s.mask_path)} for s in sources],
                    "n_crops": len(crops), "crops": [asdict(c) for c in crops]}
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(manifest, indent=1))
        return crops

    def setup(self, stage: str | None = None) -> None:
        if self.crops or self.shards:
            return
        self.crops = self.mine()
        for s in self.sources.values():  # load everything now: workers then share it
            self.volumes.load(s)
        if not self.crops:
            raise InputError(f"no crop with significant errors was found (max_f1={self.settings.max_f1}, "
                             f"min_betti_diff={self.settings.min_betti_diff}); loosen the thresholds",
                             self.manifest_path)
        cases = sorted({(c.dataset, c.case) for c in self.crops})
        if len(cases) > self.val_cases >= 1:
            held = set(cases[-self.val_cases:])
            self.val_crops = [c for c in self.crops if (c.dataset, c.case) in held]
            self.train_crops = [c for c in self.crops if (c.dataset, c.case) not in held]
        else:
            step = max(2, int(round(1.0 / self.val_fraction)))
            self.val_crops = self.crops[step - 1::step]
            self.train_crops = [c for i, c in enumerate(self.crops) if (i + 1) % step] or self.val_crops
        if self.val_samples is not None and len(self.val_crops) > self.val_samples:  # evenly spaced, fixed
            keep = np.linspace(0, len(self.val_crops) - 1, self.val_samples).round().astype(int)
            self.val_crops = [self.val_crops[i] for i in np.unique(keep)]

    # -------------------------------------------------------------- loaders
    def _dataset(self, crops: Sequence[MinedCrop], length: int | None, augment: bool) -> MinedCropDataset:
        return MinedCropDataset(crops, self.volumes, self.sources, self.settings.crop_size, length, augment,
                                self.target)

    def val_items(self) -> list[dict]:
        if self._val_items is None and self.shards:
            self._val_items = shard_val_items(self.shards, self.val_samples, self.seed, self.redescribe)
        if self._val_items is None:
            self.setup()
            ds = self._dataset(self.val_crops, None, augment=False)
            self._val_items = [ds[i] for i in range(len(ds))]
        return self._val_items

    def _shard_train(self) -> Dataset:
        from neurorefiner.data.sample_shards import MixedDataset, ShardDataset

        mined = ShardDataset(Path(self.shards) / "train", augment=self.augment,  # type: ignore[arg-type]
                             redescribe=self.redescribe, length=self.samples_per_epoch)
        if self.replay_prob <= 0 or not self.replay_shards:
            return mined
        replay = ShardDataset(Path(self.replay_shards) / "train", augment=True, redescribe=self.redescribe,
                              length=self.samples_per_epoch)
        return MixedDataset([mined, replay], [1.0 - self.replay_prob, self.replay_prob], self.samples_per_epoch)

    def train_dataloader(self) -> DataLoader:
        self.setup()
        if self.shards:
            sampler = KeyedCropSampler(self.samples_per_epoch, self.seed) if use_keyed(self.keyed_sampling) else None
            return DataLoader(self._shard_train(), batch_size=self.batch_size, sampler=sampler,
                              num_workers=self.num_workers, worker_init_fn=_worker_init if self.num_workers else None,
                              persistent_workers=self.num_workers > 0)
        ds = self._dataset(self.train_crops, self.samples_per_epoch, augment=self.augment)
        if not self.augment:  # plain pass over the crops, shuffled
            ds = self._dataset(self.train_crops, None, augment=False)
        if self.replay_prob > 0:
            kw = {"dataset": self.dataset, "crop_size": self.settings.crop_size, **self.replay}
            s1 = Stage1DefectDataModule(**kw)
            s1.setup()
            replay = DefectSampleDataset(s1.train_volumes, s1.crop_size, max(len(ds), 1), s1.defects, seed=None,
                                         min_foreground=s1.min_foreground, distractor_prob=s1.distractor_prob)
            ds = ReplayDataset(ds, replay, self.replay_prob)
        if use_keyed(self.keyed_sampling):  # disjoint across ranks, shuffled per epoch by the sampler itself
            return DataLoader(ds, batch_size=self.batch_size, sampler=KeyedCropSampler(len(ds), self.seed),
                              num_workers=self.num_workers, worker_init_fn=_worker_init if self.num_workers else None,
                              persistent_workers=self.num_workers > 0)
        return DataLoader(ds, batch_size=self.batch_size, shuffle=not self.augment,
                          num_workers=self.num_workers, worker_init_fn=_worker_init if self.num_workers else None,
                          persistent_workers=self.num_workers > 0,
                          generator=torch.Generator().manual_seed(self.seed))

    def val_dataloader(self) -> DataLoader:
        return val_loader(ListDataset(self.val_items()), self.batch_size)
