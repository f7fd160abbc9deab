"""TopoRefineNet training samples written once to disk shards, read back by the stage datamodules.

Why: making a stage-1 defect or a stage-2 mined crop costs about as much CPU as a training step of the
CPU-size network, so a run that synthesises as it trains spends half its budget on data. Here the samples
are made once, in parallel worker processes, and training only reads them (memory-mapped ``.npy``).

What a sample holds (crop (D, H, W) = (z, y, x)): the image (uint8, 0-255 of the [0, 1] crop), the input
mask, the corrected mask, and the **change** -- the voxels of the one defect the instruction names -- with
its side (``fn`` missing foreground / ``fp`` extra) and whether an extra piece is attached to the neuron.
The instruction is *not* fixed in the shard: the reader writes it again from the change with the
project's describing functions (:mod:`neurorefiner.defects.describe`), in the crop's own frame, after the
random flips. So a change of the instruction writer (the Advisor's sentences) needs no new shards; the
text written at generation time and the writer's version (:func:`writer_version`) are still stored, so a
reader can tell (``redescribe=False`` reads the stored text).

Balance: every sample is drawn for one **operation** -- ``connect`` (missing foreground: break, gap),
``remove`` (a loose false piece) or ``cut`` (a false branch attached to the neuron) -- in set shares, and
for one **variant**: ``correct``, ``wrong_place`` (the same operation named where there is nothing to do)
or ``opposite`` (the opposite operation at the defect). The last two are hard negatives: their target is
the input mask, unchanged, which is what the editor probe asks of them.

This module is the format and the reader (what the datamodules import); :mod:`neurorefiner.data.shard_makers`
makes the samples (stage 1: synthetic defects in gold; stage 2: the segmenters' own errors) and writes them
with :func:`write_shards`.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import ndimage
from torch.utils.data import Dataset

from neurorefiner.data.shard_folder import (  # noqa: F401 - the folder's settings, re-exported for readers
    MANIFEST,
    OPS,
    SETTINGS,
    VARIANTS,
    ShardSettings,
    Triple,
    claim_folder,
    folder_record,
    writer_version,
)
from neurorefiner.errors import InputError

STAGE1_KINDS = {"connect": ("break",), "remove": ("paste", "noise"), "cut": ("touch",)}
FORMAT_VERSION = 1
_CUBE = np.ones((3, 3, 3), dtype=bool)


def _draw(rng: np.random.Generator, shares: Mapping[str, float]) -> str:
    names = list(shares)
    p = np.array([float(shares[k]) for k in names])
    return names[int(rng.choice(len(names), p=p / p.sum()))]


# ------------------------------------------------------------------------------------------- describing
def branch_ends(change: np.ndarray, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tip, junction) of an attached false branch ``change``: the junction is the mean of its voxels
    touching ``kept`` (the structure that stays), the tip its voxel farthest from there."""
    coords = np.argwhere(change)
    lo = np.maximum(coords.min(axis=0) - 1, 0)
    box = tuple(slice(a, b) for a, b in zip(lo, coords.max(axis=0) + 2, strict=True))  # the branch, grown by one
    touching = change[box] & ndimage.binary_dilation(kept[box], _CUBE)
    junction = np.argwhere(touching).mean(axis=0) + lo if touching.any() else coords.mean(axis=0)
    tip = coords[int(np.argmax(((coords - junction) ** 2).sum(axis=1)))]
    return tip.astype(float), junction


def describe_sample(change: np.ndarray, side: str, attached: bool, target: np.ndarray):  # type: ignore[no-untyped-def]
    """The instruction for undoing ``change`` in this crop, written by the project's describing functions:
    missing foreground -> connect/repair, a loose piece -> remove, an attached branch -> remove from its
    tip to its junction (falling back to the loose-piece form when both ends share a cell)."""
    from neurorefiner.defects.describe import describe_branch, describe_change

    if side == "fp" and attached:
        tip, junction = branch_ends(change, target & ~change)
        ins = describe_branch(tip, junction, change.shape)
        if ins is not None:
            return ins
    return describe_change(change, side)


def wrong_place(ins, avoid: np.ndarray, rng: np.random.Generator, tries: int = 40):  # type: ignore[no-untyped-def]
    """The same operation (and form: one cell or from-to) named at a random place whose region holds none
    of ``avoid`` (every voxel the crop's edits touch, grown); None when no such place was found."""
    from neurorefiner.topology.instructions import Instruction
    from neurorefiner.topology.positions import all_positions, cell_index

    shape = avoid.shape
    cells = {tuple(c) for c in cell_index(np.argwhere(avoid), shape)} if avoid.any() else set()
    positions = all_positions()
    for _ in range(tries):
        a = positions[int(rng.integers(len(positions)))]
        b = None
        if ins.end is not None:
            b = positions[int(rng.integers(len(positions)))]
            if b == a:
                continue
        ps = [a] if b is None else [a, b]
        lo = np.min([p.cell for p in ps], axis=0)
        hi = np.max([p.cell for p in ps], axis=0)
        if any(all(lo[i] <= c[i] <= hi[i] for i in range(3)) for c in cells):
            continue
        cand = Instruction(ins.op, a, b)
        if not (cand.region(shape) & avoid).any():
            return cand
    return None


def opposite_of(correct: Any, rng: np.random.Generator, mixed: bool = False) -> Any:
    """The opposite-operation hard negative of ``correct``. ``mixed``: a two-place instruction's opposite is,
    half the time, the one-place form at one of its two places ("Remove noise from A to B" -> "Repair break at
    A"). The describing functions write most removals with two places, so the one-place "Repair break at ..."
    was almost never a negative (1% of samples against 13% as a correct instruction): a network learned that
    it always means "add here", and filled next to the noise it was told to repair (probe: opposite instructions
    on noise left the block unchanged 5-20% of the time)."""
    from neurorefiner.topology.instructions import Instruction

    opposite = correct.opposite()
    if not mixed or opposite.end is None or rng.random() < 0.5:
        return opposite
    at = opposite.start if rng.random() < 0.5 else opposite.end
    return Instruction("repair" if opposite.op == "connect" else opposite.op, at)


def instruction_for(sample: Mapping[str, Any], variant: str, rng: np.random.Generator, redescribe: bool = True,
                    mixed_opposites: bool = False):  # type: ignore[no-untyped-def]
    """(instruction, target) of one stored sample under ``variant``; the target of a hard negative is the
    input mask. A wrong place that cannot be found leaves the sample correct. ``mixed_opposites``: see
    :func:`opposite_of`."""
    from neurorefiner.topology.instructions import parse_instruction

    mask, target, change = sample["mask"], sample["target"], sample["change"]
    if redescribe or not sample.get("instruction"):
        correct = describe_sample(change, sample["side"], bool(sample["attached"]), target)
    else:
        correct = parse_instruction(sample["instruction"])
    if variant == "opposite":
        return opposite_of(correct, rng, mixed_opposites), mask
    if variant == "wrong_place":
        avoid = ndimage.binary_dilation(mask ^ target, _CUBE, iterations=2)
        other = wrong_place(correct, avoid, rng)
        if other is not None:
            return other, mask
    return correct, target


# ------------------------------------------------------------------------------------------- writing
def _pack(a: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(a, dtype=bool).ravel())


def write_shard(folder: Path, records: Sequence[Mapping[str, Any]], size: Triple) -> None:
    """One shard: ``image.npy`` uint8 (N, D, H, W), ``mask/target/change.npy`` packed bits (N, bytes),
    ``samples.json`` the rest; written to a temporary folder, then renamed (never half-written)."""
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    img = np.stack([np.clip(np.rint(np.asarray(r["image"], np.float32) * 255), 0, 255).astype(np.uint8)
                    for r in records])
    np.save(tmp / "image.npy", img)
    for key in ("mask", "target", "change"):
        np.save(tmp / f"{key}.npy", np.stack([_pack(r[key]) for r in records]))
    meta = [{k: r[k] for k in ("side", "attached", "op", "kind", "variant", "source", "start", "instruction",
                               "distractor")} for r in records]
    (tmp / "samples.json").write_text(json.dumps(meta))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


_WORKER: dict[str, Any] = {}


def _init_worker(load: Callable[[], list], settings: ShardSettings, maker: Callable) -> None:
    torch.set_num_threads(1)
    _WORKER.update(items=load(), settings=settings, maker=maker)


def _make_shard(job: tuple[Path, int, int]) -> tuple[str, dict]:
    folder, index, n = job
    settings: ShardSettings = _WORKER["settings"]
    rng = np.random.default_rng([settings.seed, settings.stage, index])
    records, failures = [], 0
    while len(records) < n:
        try:
            rec = _WORKER["maker"](_WORKER["items"], rng, settings)
        except ValueError:
            failures += 1
            if failures > 20 * n:
                raise
            continue
        rec["variant"] = _draw(rng, settings.variant_shares)
        records.append(rec)
    write_shard(folder, records, settings.crop_size)
    counts: dict[str, int] = {}
    for r in records:
        for key in (f"op:{r['op']}", f"variant:{r['variant']}", f"kind:{r['kind']}"):
            counts[key] = counts.get(key, 0) + 1
    return folder.name, counts


def _run_pool(ctx: Any, workers: int, todo: list, initargs: tuple, bar: Any) -> None:
    """Make the ``todo`` shards in ``workers`` processes. A process pool that loses a worker (the system killed it,
    most often for memory) stops with that said: ``multiprocessing.Pool`` started a new worker in its place, which
    loaded the volumes again and was killed again, and the command hung with no word."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from neurorefiner.errors import InputError

    try:
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=initargs) as pool:
            for done in as_completed([pool.submit(_make_shard, job) for job in todo]):
                done.result()
                bar.update(1)
    except BrokenProcessPool:
        raise InputError(f"a shard worker was killed (most often: out of memory with {workers} workers each holding "
                         "every volume); run again with fewer workers (--workers 1): finished shards are kept",
                         todo[0][0].parent) from None
    finally:
        bar.close()


def write_shards(out: Path, load: Callable[[], list], maker: Callable, settings: ShardSettings, n_samples: int,
                 shard_size: int = 256, workers: int = 2, sources: Sequence[str] = (), progress: bool = True,
                 recipe: Mapping[str, Any] | None = None) -> dict:
    """Write ``n_samples`` samples in shards of ``shard_size`` under ``out`` with ``workers`` processes
    (each loads its volumes once with ``load``, a picklable callable), then ``manifest.json``. Shards
    already there are kept when the folder was made by the same run (:func:`claim_folder`: every setting that
    shapes the samples, ``recipe``'s datasets, part and segmenters among them): an interrupted run continues, a
    run with other settings is refused before anything is written."""
    from tqdm import tqdm

    out = Path(out)
    if n_samples < 1 or shard_size < 1 or workers < 1:
        raise ValueError("n_samples, shard_size and workers must be >= 1")
    claim_folder(out, folder_record(settings, n_samples, shard_size, sources, recipe))
    sizes = [min(shard_size, n_samples - i) for i in range(0, n_samples, shard_size)]
    jobs = [(out / f"shard-{i:05d}", i, n) for i, n in enumerate(sizes)]
    todo = [j for j in jobs if not (j[0] / "samples.json").exists()]
    t0 = time.time()
    if todo:
        ctx = mp.get_context("fork" if hasattr(os, "fork") else "spawn")
        if workers == 1:
            _init_worker(load, settings, maker)
            results = map(_make_shard, todo)
            bar = tqdm(results, total=len(todo), desc=f"stage-{settings.stage} shards", disable=not progress)
            list(bar)
        else:
            _run_pool(ctx, min(workers, len(todo)), todo, (load, settings, maker),
                      tqdm(total=len(todo), desc=f"stage-{settings.stage} shards", disable=not progress))
    counts: dict[str, int] = {}
    for folder, _, _ in jobs:
        for r in json.loads((folder / "samples.json").read_text()):
            for key in (f"op:{r['op']}", f"variant:{r['variant']}", f"kind:{r['kind']}"):
                counts[key] = counts.get(key, 0) + 1
    manifest = {"format": FORMAT_VERSION, "stage": settings.stage, "n_samples": n_samples,
                "crop_size": list(settings.crop_size), "shards": [j[0].name for j in jobs], "sizes": sizes,
                "writer_version": writer_version(), "settings": settings.stamp(), "sources": list(sources),
                "counts": dict(sorted(counts.items())), "seconds": round(time.time() - t0, 1),
                "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    from neurorefiner.io.atomic import atomic_path

    with atomic_path(out / MANIFEST) as tmp:
        Path(tmp).write_text(json.dumps(manifest, indent=1))
    return manifest


# ------------------------------------------------------------------------------------------- reading
def to_item(sample: Mapping) -> dict:
    """Numpy sample -> the batch contract's tensors (channel axis added)."""
    def t(a: np.ndarray, dtype: type) -> torch.Tensor:
        # convert in numpy: torch's bool -> float cast is ~100x slower on small CPU tensors
        return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))[None]

    return {"image": t(sample["image"], np.float32), "mask": t(sample["mask"], np.float32),
            "target": t(sample["target"], np.float32), "instruction": str(sample["instruction"]),
            "region": t(sample["region"], np.bool_)}


class ShardDataset(Dataset):
    """The samples of one shard folder as batch items (the stage datamodules' contract).

    ``augment``: random flips along each axis, drawn per item (fresh every epoch); ``redescribe``: write
    each instruction anew from the stored change with today's describing functions (default), else read
    the stored text (mirrored with the flips). ``variants``: None = the stored variant of each sample, else
    the variants to keep (e.g. ``["correct"]``). ``length``: items per epoch (None = every sample once).
    ``fresh_variants``: draw each read's variant anew with the shares the shards were made with, so one image
    is seen over the epochs with its correct instruction and with its hard negatives: only the text then tells
    an edit from none (a stored variant lets the network tie "no change" to the image). ``mixed_opposites``:
    see :func:`opposite_of`.
    """

    def __init__(self, root: str | Path, augment: bool = True, redescribe: bool = True,
                 variants: Sequence[str] | None = None, length: int | None = None, seed: int | None = None,
                 fresh_variants: bool = False, mixed_opposites: bool = False):
        root = Path(root)
        path = root / MANIFEST
        if not path.exists():
            raise InputError("no sample shards here (make them with `neurorefiner make-shards`)", root)
        self.manifest = json.loads(path.read_text())
        if self.manifest.get("format") != FORMAT_VERSION:
            raise InputError(f"shard format {self.manifest.get('format')} is not {FORMAT_VERSION}", path)
        self.root, self.augment, self.redescribe, self.seed = root, bool(augment), bool(redescribe), seed
        self.size: Triple = tuple(self.manifest["crop_size"])  # type: ignore[assignment]
        self.stale = self.manifest.get("writer_version") != writer_version()
        self._arrays: dict[str, dict[str, np.ndarray]] = {}
        self.index: list[tuple[str, int]] = []
        self.meta: list[dict] = []
        keep = set(variants) if variants is not None else None
        for name in self.manifest["shards"]:
            for row, m in enumerate(json.loads((root / name / "samples.json").read_text())):
                if keep is None or m["variant"] in keep:
                    self.index.append((name, row))
                    self.meta.append(m)
        if not self.index:
            raise InputError(f"no samples of variants {sorted(keep or [])} in these shards", root)
        self.length = len(self.index) if length is None else int(length)
        self.mixed_opposites = bool(mixed_opposites)
        self.variant_shares: dict[str, float] | None = None
        if fresh_variants:
            made = root / "settings.json"
            shares = json.loads(made.read_text()).get("variant_shares") if made.exists() else None
            self.variant_shares = dict(shares or ShardSettings().variant_shares)

    def __len__(self) -> int:
        return self.length

    def _shard(self, name: str) -> dict[str, np.ndarray]:
        if name not in self._arrays:  # memory-mapped: the page cache, not each worker, holds the data
            self._arrays[name] = {k: np.load(self.root / name / f"{k}.npy", mmap_mode="r")
                                  for k in ("image", "mask", "target", "change")}
        return self._arrays[name]

    def record(self, i: int) -> dict[str, Any]:
        """Sample ``i`` as stored: image float32 [0, 1], masks bool (D, H, W), and its metadata."""
        name, row = self.index[i]
        arrays = self._shard(name)
        n = int(np.prod(self.size))
        out = dict(self.meta[i])
        out["image"] = np.asarray(arrays["image"][row], dtype=np.float32) / 255.0
        for k in ("mask", "target", "change"):
            out[k] = np.unpackbits(np.asarray(arrays[k][row]), count=n).astype(bool).reshape(self.size)
        return out

    def sample(self, index: int, rng: np.random.Generator | None = None) -> dict[str, Any]:
        """The training sample (numpy): flipped, instruction written, target set by the variant."""
        from neurorefiner.topology.instructions import parse_instruction

        rng = rng if rng is not None else np.random.default_rng()
        i = int(rng.integers(len(self.index))) if self.length != len(self.index) else int(index)
        rec = self.record(i)
        if self.augment:
            axes = [a for a in range(3) if rng.random() < 0.5]
            if axes:
                for k in ("image", "mask", "target", "change"):
                    rec[k] = np.ascontiguousarray(np.flip(rec[k], axis=axes))
                if not self.redescribe and rec.get("instruction"):
                    rec["instruction"] = parse_instruction(rec["instruction"]).flipped(axes).format()
        if self.variant_shares is not None:
            rec["variant"] = _draw(rng, self.variant_shares)
        ins, target = instruction_for(rec, rec["variant"], rng, self.redescribe, self.mixed_opposites)
        return {"image": rec["image"], "mask": rec["mask"], "target": target, "region": ins.region(self.size),
                "instruction": ins.format(), "variant": rec["variant"], "op": rec["op"], "kind": rec["kind"]}

    def __getitem__(self, index: int | tuple[int, ...]) -> dict:
        from neurorefiner.data.samplers import key_rng

        if isinstance(index, tuple):  # a KeyedCropSampler key: the same item on any rank and after a resume
            rng = key_rng(index)
            index = int(rng.integers(len(self.index)))
        elif self.seed is not None:  # fixed items (validation)
            rng = np.random.default_rng([int(self.seed), int(index)])
        else:
            rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,)).item()))
        return to_item(self.sample(int(index), rng))


class MixedDataset(Dataset):
    """Items drawn from several datasets in set shares (e.g. stage-2 mined shards with stage-1 replay)."""

    def __init__(self, parts: Sequence[Dataset], shares: Sequence[float], length: int):
        if len(parts) != len(shares) or not parts or min(shares) < 0 or sum(shares) <= 0:
            raise ValueError("one share >= 0 per dataset, not all 0")
        self.parts, self.length = list(parts), int(length)
        self.p = np.asarray(shares, dtype=np.float64) / float(sum(shares))

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int | tuple[int, ...]) -> dict:
        from neurorefiner.data.samplers import key_rng

        rng = key_rng((*index, 7)) if isinstance(index, tuple) else np.random.default_rng(
            int(torch.randint(0, 2**31 - 1, (1,)).item()))
        part = self.parts[int(rng.choice(len(self.parts), p=self.p))]
        return part[(*index, 8)] if isinstance(index, tuple) else part[int(rng.integers(len(part)))]


