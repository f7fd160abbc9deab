"""Labelled candidates at scale: every candidate edit of many masks, labelled from gold, stored once with the
crop around it, so a judge trains and is compared without recomputing candidates.

A *source* is one dataset split and one kind of mask:

* a segmenter's initial masks (``unet3d``, ``nnunet_style``: :mod:`neurorefiner.inference.init_masks`, cached
  as ``evaluate.py`` makes them), each with ``augment`` defect-cut copies
  (:func:`neurorefiner.adaptation.judge.augment.augmented_masks`: breaks cut on the gold's path, structure
  pasted touching the tree, specks, bright off-gold pieces);
* ``gold``: a synthetic volume's defect-free gold mask (the generator renders it), of which only the
  ``augment`` defect-cut copies are mined (the gold itself has nothing to edit).

Per mask the candidates of each kind are capped (``cap``, a seeded random subset; joins, the scarce kind,
are capped highest) and the unlabelled ones (ambiguous, beyond the gold's scope) left out. One ``.npz`` per
(case, source) under ``root/<dataset>/<split>/``: a rerun skips the files it has (same settings), so new
masks (a re-shipped segmenter) are mined by deleting that source's files and running again. DIADEM's test
stacks (OP_7-OP_9) and every test split are refused: a judge never learns from them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurorefiner.adaptation.judge.gold_labels import GoldIndex, LabelSettings, label_all
from neurorefiner.agents.candidates import KINDS, CandidateSettings, feature_names, find_candidates
from neurorefiner.agents.learned.crops import CROP_SHAPE, CROP_SPACING_UM, candidate_crops
from neurorefiner.agents.learned.judge import feature_matrix

MINE_VERSION = 1
DEFAULT_CAP = {"join": 600, "remove": 150, "prune": 150}
GOLD_STRENGTH = 3  # a defect-free gold mask gets three times the defects per copy


def family(dataset: str) -> str:
    """The dataset a held-out fold names: ``synthetic_cwmbs_noise`` -> ``cwmbs_noise``, ``diadem`` -> itself."""
    return dataset.removeprefix("synthetic_")


@dataclass(frozen=True)
class MineSettings:
    augment: int = 2
    cap: tuple[tuple[str, int], ...] = tuple(DEFAULT_CAP.items())

    def header(self) -> dict:
        return {"version": MINE_VERSION, "augment": self.augment, "cap": dict(self.cap), "gold_strength": GOLD_STRENGTH,
                "crop_shape": list(CROP_SHAPE), "crop_spacing_um": list(CROP_SPACING_UM),
                "features": {k: feature_names(k) for k in KINDS}}


def check_source(dataset: str, split: str) -> None:
    from neurorefiner.errors import InputError

    if split == "test":
        raise InputError(f"{dataset}: never mine a test split for the judge (split {split})")
    if dataset == "diadem" and split != "dev":
        raise InputError("diadem: the judge learns from dev (OP_1-OP_6) only")


def _case_masks(dataset: str, split: str, source: str, cases: Sequence) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """Case name -> the source's mask of it."""
    from neurorefiner.io.stacks import read_mask

    if source == "gold":
        return {c.name: np.asarray(c.label()) > 0 for c in cases}
    from neurorefiner.inference.init_masks import write_init_masks

    paths = {p.stem: p for p in write_init_masks(dataset, source, None, split, None, False,
                                                 only=[c.name for c in cases], progress=False)}
    return {c.name: read_mask(paths[c.name]).load() > 0 for c in cases}


def mine_mask(image: np.ndarray, mask: np.ndarray, index: GoldIndex, spacing: Sequence[float],
              rng: np.random.Generator, cap: dict[str, int],
              candidate_settings: CandidateSettings | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Labelled candidates of one mask, per kind: features ``x``, labels ``y``, ``crops`` (uint8)."""
    cs = find_candidates(image, mask, spacing, candidate_settings)
    labels = label_all(cs.candidates, index)
    out = {}
    for kind in KINDS:
        keep = [(c, y) for c, y in zip(cs.candidates, labels) if c.kind == kind and y is not None]
        if len(keep) > cap.get(kind, 10**9):
            pick = np.sort(rng.choice(len(keep), size=cap[kind], replace=False))
            keep = [keep[i] for i in pick]
        cands = [c for c, _ in keep]
        out[kind] = {
            "x": feature_matrix(cands, kind).astype(np.float32),
            "y": np.array([y for _, y in keep], np.int8),
            "crops": candidate_crops(image, mask, cands, spacing, cs.levels),
        }
    return out


def mine_case(case, mask: np.ndarray, source: str, settings: MineSettings  # type: ignore[no-untyped-def]
              ) -> dict[str, np.ndarray]:
    """Arrays of one (case, source): for each kind ``x_<kind>``, ``y_<kind>``, ``crops_<kind>`` and
    ``variant_<kind>`` (0: the mask itself, i: its i-th defect-cut copy)."""
    from neurorefiner.adaptation.judge.augment import GoldCase, augmented_masks

    img = case.image()
    spacing = tuple(float(v) for v in (case.spacing or img.spacing))
    image = img.normalized()
    gc = GoldCase(case.name, source, image, mask, case.gold(), spacing)  # type: ignore[arg-type]
    index = GoldIndex(gc.gold, spacing, mask.shape, LabelSettings())
    cap = dict(settings.cap)
    variants = [] if source == "gold" else [(0, mask)]
    strength = GOLD_STRENGTH if source == "gold" else 1
    variants += [(i + 1, m) for i, m in enumerate(augmented_masks(gc, settings.augment, index, strength))]
    parts: dict[str, list] = {f"{a}_{k}": [] for k in KINDS for a in ("x", "y", "crops", "variant")}
    for v, m in variants:
        rng = np.random.default_rng(zlib.crc32(f"{case.dataset}/{case.name}/{source}/{v}".encode()))
        got = mine_mask(image, m, index, spacing, rng, cap)
        for k in KINDS:
            for a in ("x", "y", "crops"):
                parts[f"{a}_{k}"].append(got[k][a])
            parts[f"variant_{k}"].append(np.full(len(got[k]["y"]), v, np.int8))
    out = {}
    for k in KINDS:
        out[f"x_{k}"] = np.concatenate(parts[f"x_{k}"]) if parts[f"x_{k}"] else np.zeros((0, len(feature_names(k))),
                                                                                        np.float32)
        out[f"y_{k}"] = np.concatenate(parts[f"y_{k}"]) if parts[f"y_{k}"] else np.zeros(0, np.int8)
        out[f"crops_{k}"] = (np.concatenate(parts[f"crops_{k}"]) if parts[f"crops_{k}"]
                             else np.zeros((0, 3, *CROP_SHAPE), np.uint8))
        out[f"variant_{k}"] = np.concatenate(parts[f"variant_{k}"]) if parts[f"variant_{k}"] else np.zeros(0, np.int8)
    return out


def _file(root: Path, dataset: str, split: str, case: str, source: str) -> Path:
    return Path(root) / dataset / split / f"{case}__{source}.npz"


def _header_of(path: Path) -> dict | None:
    try:
        with np.load(path) as z:
            return json.loads(str(z["header"]))
    except Exception:  # noqa: BLE001 - an unreadable or old file is simply mined again
        return None


def dataset_cases(dataset: str, split: str, limit: int | None = None) -> list:  # type: ignore[type-arg]
    """The first ``limit`` cases of a split; a synthetic split is generated only that far."""
    from neurorefiner.data.registry import get_dataset

    ds = get_dataset(dataset)
    if limit and getattr(ds, "synthetic", False) and hasattr(ds, "counts"):
        ds = get_dataset(dataset, **{f"n_{split}": min(int(limit), ds.counts[split])})
    return ds.cases(split)[: limit or None]


def mine(dataset: str, split: str, sources: Sequence[str], root: Path, settings: MineSettings | None = None,
         limit: int | None = None, progress: bool = True, jobs: int = 1) -> list[Path]:
    """Mine ``sources`` (segmenter names or ``gold``) of a dataset split into ``root``; returns the files.
    ``jobs`` > 1 mines cases in parallel processes (joblib), one thread each."""
    from neurorefiner.errors import InputError

    check_source(dataset, split)
    settings = settings or MineSettings()
    header = dict(settings.header(), dataset=dataset, split=split)
    cases = dataset_cases(dataset, split, limit)
    if "gold" in sources and any(c.label_path is None for c in cases):
        raise InputError(f"{dataset}: mask source 'gold' needs a rendered gold mask (synthetic datasets only)")
    todo, files = [], []
    for source in sources:
        for c in cases:
            f = _file(root, dataset, split, c.name, source)
            files.append(f)
            if not (f.exists() and _header_of(f) == dict(header, case=c.name, source=source)):
                todo.append((source, c))
    if todo:
        masks: dict[str, dict[str, np.ndarray]] = {}
        for source in sorted({s for s, _ in todo}):
            masks[source] = _case_masks(dataset, split, source, [c for s, c in todo if s == source])
        work = [(c, masks[s][c.name], s, settings, _file(root, dataset, split, c.name, s),
                 dict(header, case=c.name, source=s)) for s, c in todo]
        if jobs > 1:
            from joblib import Parallel, delayed

            Parallel(n_jobs=jobs)(delayed(_mine_one)(*w) for w in work)
        else:
            from tqdm import tqdm

            for w in tqdm(work, desc=f"mining {dataset}/{split}", unit="mask", disable=not progress):
                _mine_one(*w)
    return files


def _mine_one(case, mask: np.ndarray, source: str, settings: MineSettings, path: Path,  # type: ignore[no-untyped-def]
              header: dict) -> Path:
    from neurorefiner.io.atomic import atomic_path

    arrays = mine_case(case, mask, source, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, header=np.array(json.dumps(header)), **arrays)
    return path


# ------------------------------------------------------------------------------------------------ the table
@dataclass
class CandidateTable:
    """Every mined candidate of one kind: features, labels, crops and where each came from."""

    kind: str
    x: np.ndarray
    y: np.ndarray
    crops: np.ndarray
    dataset: np.ndarray
    group: np.ndarray
    source: np.ndarray
    variant: np.ndarray
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, keep: np.ndarray) -> CandidateTable:
        return CandidateTable(self.kind, self.x[keep], self.y[keep], self.crops[keep], self.dataset[keep],
                              self.group[keep], self.source[keep], self.variant[keep], self.files)

    @property
    def families(self) -> np.ndarray:
        return np.array([family(d) for d in self.dataset], dtype=object)


def load_table(root: Path, kind: str, datasets: Sequence[str] | None = None) -> CandidateTable:
    """All mined files under ``root`` (optionally only ``datasets``) for one kind, concatenated."""
    from neurorefiner.errors import InputError

    files = sorted(Path(root).glob("*/*/*.npz"))
    if datasets:
        files = [f for f in files if f.parent.parent.name in set(datasets)]
    if not files:
        raise InputError(f"{root}: no mined candidates (run `neurorefiner make judge-candidates` first)")
    xs, ys, cs, ds, gs, ss, vs = [], [], [], [], [], [], []
    want = feature_names(kind)
    for f in files:
        with np.load(f) as z:
            h = json.loads(str(z["header"]))
            if h.get("features", {}).get(kind) != want:
                raise InputError(f"{f}: mined with other {kind} features; mine again")
            y = z[f"y_{kind}"]
            xs.append(z[f"x_{kind}"])
            ys.append(y)
            cs.append(z[f"crops_{kind}"])
            vs.append(z[f"variant_{kind}"])
        ds.append(np.full(len(y), h["dataset"], dtype=object))
        gs.append(np.full(len(y), f"{h['dataset']}/{h['case']}", dtype=object))
        ss.append(np.full(len(y), h["source"], dtype=object))
    return CandidateTable(kind, np.concatenate(xs).astype(np.float64), np.concatenate(ys).astype(int),
                          np.concatenate(cs), np.concatenate(ds), np.concatenate(gs), np.concatenate(ss),
                          np.concatenate(vs).astype(int), [str(f) for f in files])
