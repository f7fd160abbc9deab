"""Rows for the segmenter tables: per segmenter, masks -> APP2 -> reconstruction metrics on a dataset split,
plus the naive floor (Otsu + dust removal + TEASAR skeleton, largest component / every component) and voxel
figures of each mask against the gold mask (Dice, clDice, Betti-0 excess = components in the mask minus
components in the gold mask: the fragments and noise blobs refinement has to fix).

:func:`segmenter_rows` writes ``<out>/<stem>_cases.csv`` (one row per case and method) and ``<out>/<stem>.md``
(means). Masks of learned segmenters are written through :mod:`neurorefiner.inference.init_masks`: the
segmenter's row uses the post-processing its checkpoint records (cached under
``data/cache/init_masks/<dataset>/<segmenter>_postprocessed/``); ``raw`` adds the masks refinement starts from
(threshold only, every component kept; ``data/cache/init_masks/<dataset>/<segmenter>/``). Rows of earlier
runs (``include``) merge into the table without recomputation; where two hold a row of the same method and
case the first wins. Command: ``neurorefiner make segmenter-rows``.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurorefiner.data import get_dataset
from neurorefiner.errors import InputError

COLS = ["method", "case", "SD", "SSD", "pSSD", "PRE", "REC", "F1", "MES", "Dice", "clDice", "b0_mask", "b0_gold",
        "b0_excess", "seconds"]
FLOOR_LARGEST = "naive floor: Otsu+TEASAR, largest component"
FLOOR_EVERY = "naive floor: Otsu+TEASAR, every component"
FLOOR_APP2 = "naive floor: Otsu -> APP2"
PROTOCOLS = ("full_volume", "root_seeded")
#: how each protocol's rows end: APP2's own root, or the mask voxel nearest the gold root (the synthetic Tables 1-2
#: and DIADEM's protocol). The protocol is in the label so that rows of two protocols never merge as one.
APP2_BY_PROTOCOL = {"full_volume": "-> APP2", "root_seeded": "-> APP2 from the gold root"}


@dataclass(frozen=True)
class SegmenterSpec:
    """One ``arch[:variant]=checkpoint`` argument: the network, an optional variant that tells two checkpoints
    of one network apart (rows ``arch:variant``, masks in their own folder), and the checkpoint (``None``: the
    shipped one for the dataset)."""

    name: str
    arch: str
    checkpoint: str | None

    @property
    def folder(self) -> str:
        """Mask cache folder: the plain name's folder holds refinement's initial masks."""
        arch, _, variant = self.name.partition(":")
        return f"{arch}_{variant}" if variant else arch


def parse_segmenter(text: str) -> SegmenterSpec:
    """``'vnet=ck.pt'``, ``'vnet:prior=ck.pt'`` or ``'unet3d'`` (the shipped checkpoint)."""
    name, _, ckpt = text.partition("=")
    arch, _, variant = name.partition(":")
    if not arch or (":" in name and not variant):
        raise InputError(f"--segmenter takes arch[:variant]=checkpoint, got {text!r}")
    return SegmenterSpec(name, arch, ckpt or None)


def dataset_cases(dataset: str, split: str) -> list:
    """The cases of a registry dataset's split; an unknown dataset or split is an :class:`InputError`."""
    try:
        return get_dataset(dataset).cases(split)
    except (KeyError, ValueError) as exc:
        raise InputError(str(exc.args[0] if exc.args else exc)) from None


def voxel_row(mask: np.ndarray, gold_mask: np.ndarray) -> dict[str, float]:
    from neurorefiner.metrics.voxel import betti_numbers, cldice, dice

    b0m, b0g = betti_numbers(mask)[0], betti_numbers(gold_mask)[0]
    return {"Dice": dice(mask, gold_mask), "clDice": cldice(mask, gold_mask), "b0_mask": b0m, "b0_gold": b0g,
            "b0_excess": b0m - b0g}


def own_label(name: str, post: dict) -> str:
    """The table label of a segmenter's own row: its recorded post-processing (``PostProcess.as_dict()``).
    The summary finds rows by this label, so it is built in one place."""
    return (f"{name} (threshold {post['threshold']}, "
            + (f"gaps bridged up to {post['bridge_um']:g} um, " if post.get("bridge_um") else "")
            + f"dust {post['dust_voxels']}, keep largest {post['keep_largest'] or 'all'})")


def raw_label(name: str, post: dict) -> str:
    """The label of the threshold-only masks (what refinement starts from)."""
    return f"{name} (threshold {post['threshold']} only, no component filter)"


def first_of_each(rows: list[dict]) -> list[dict]:
    """One row per (method, case), the first seen: an earlier run merged by ``include`` may carry rows this
    run made afresh (the naive floor), and a duplicate would count twice in the means and the plot."""
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        key = (r["method"], r["case"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a ``*_cases.csv`` written by :func:`write_tables` (numbers back to floats)."""
    path = Path(path)
    if not path.exists():
        raise InputError("rows file not found", path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or set(rows[0]) != set(COLS):
        raise InputError(f"not a rows file (expected columns {COLS})", path)
    return [{k: (v if k in ("method", "case") else float(v)) for k, v in r.items()} for r in rows]


def write_tables(rows: list[dict], out: Path, stem: str, title: str) -> str:
    """``<stem>_cases.csv`` (every row) and ``<stem>.md`` (means per method, in first-seen order), atomically;
    returns the markdown."""
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

    out.mkdir(parents=True, exist_ok=True)
    formatted = [{k: (f"{r[k]:.4f}" if isinstance(r.get(k), float) else r.get(k)) for k in COLS} for r in rows]
    write_rows_csv(out / f"{stem}_cases.csv", formatted, COLS)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    keys = ["PRE", "REC", "F1", "SD", "SSD", "MES", "Dice", "clDice", "b0_excess"]
    lines = [f"# {title}", "",
             "Means over cases; SD/SSD in voxels (V3D neuron_distance), PRE/REC/F1/MES with tau = 4 voxels; "
             "b0_excess = connected components of the mask minus those of the gold mask.", "",
             "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for mth in methods:
        rs = [r for r in rows if r["method"] == mth]
        vals = [float(np.mean([r[k] for r in rs])) for k in keys]
        lines.append(f"| {mth} | " + " | ".join(f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}" for v in vals) + " |")
    text = "\n".join(lines) + "\n"
    write_markdown(out / f"{stem}.md", text)
    return text


def plot_rows(rows: list[dict], path: Path, title: str) -> Path:
    """Per-case F1 and SSD of every method side by side (dots = cases, bar = mean), atomically: a spread
    over three test stacks says more than a mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(methods) + 1.5), sharey=True)
    for ax, key, xlabel in ((axes[0], "F1", "F1 (tau 4 voxels), higher is better"),
                            (axes[1], "SSD", "SSD (voxels), lower is better")):
        for i, mth in enumerate(methods):
            vals = [r[key] for r in rows if r["method"] == mth]
            ax.barh(i, float(np.mean(vals)), color="0.8")
            ax.plot(vals, [i] * len(vals), "o", color="k", ms=3)
        ax.set_xlabel(xlabel)
    seeded = f" {APP2_BY_PROTOCOL['root_seeded']}"
    short = [m.replace(seeded, " (root-seeded)").replace(" -> APP2", "") for m in methods]
    axes[0].set_yticks(range(len(methods)), short, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path)
    return path


def _scored(method: str, case: str, gold, mask: np.ndarray, spacing, gold_mask: np.ndarray,  # type: ignore[no-untyped-def]
            started: float, protocol: str = "full_volume") -> dict:
    return {"method": method, "case": case, **_traced(gold, mask, spacing, protocol),
            **voxel_row(mask, gold_mask), "seconds": time.perf_counter() - started}


def _traced(gold, mask: np.ndarray, spacing, protocol: str) -> dict:  # type: ignore[no-untyped-def]
    """APP2 on ``mask`` (from the mask voxel nearest the gold root for ``root_seeded``), scored on the gold."""
    from neurorefiner.metrics import score_mask
    from neurorefiner.tracing.seeding import marker_nearest_root

    kwargs = {"marker": marker_nearest_root(mask, gold, spacing)} if protocol == "root_seeded" else {}
    return {k: v for k, v in score_mask(gold, mask, spacing, app2_kwargs=kwargs).items() if k in COLS}


def floor_rows(case, image: np.ndarray, gold_mask: np.ndarray,  # type: ignore[no-untyped-def]
               protocol: str = "full_volume") -> list[dict]:
    """The naive floor on one case: Otsu + TEASAR (largest / every component) and Otsu -> APP2."""
    from neurorefiner.baselines.naive import otsu_mask, teasar_tree
    from neurorefiner.metrics import score_trees

    gold, sp = case.gold(), case.spacing or (1.0, 1.0, 1.0)
    t = time.perf_counter()
    m = otsu_mask(image)
    seg_s = time.perf_counter() - t
    vox = voxel_row(m, gold_mask)
    rows = []
    for label, largest in ((FLOOR_LARGEST, True), (FLOOR_EVERY, False)):
        t = time.perf_counter()
        tree = teasar_tree(m, sp, largest_only=largest)
        rows.append({"method": label, "case": case.name, **score_trees(gold, tree, sp), **vox,
                     "seconds": seg_s + time.perf_counter() - t})
    t = time.perf_counter()
    rows.append({"method": FLOOR_APP2.replace("-> APP2", APP2_BY_PROTOCOL[protocol]), "case": case.name,
                 **_traced(gold, m, sp, protocol), **vox,
                 "seconds": seg_s + time.perf_counter() - t})
    return rows


def segmenter_masks(dataset: str, split: str, specs: Sequence[SegmenterSpec], names: list[str],
                    only: list[str] | None, raw: bool) -> dict[str, dict[str, Path]]:
    """Per table label, per case, the mask file: each segmenter with its recorded post-processing (and, with
    ``raw``, threshold only), written through init_masks and cached."""
    from neurorefiner.inference.init_masks import mask_dir, shipped_checkpoint, write_init_masks
    from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess

    masks: dict[str, dict[str, Path]] = {}
    for spec in specs:
        post = recorded_postprocess(load_segmenter(spec.checkpoint or shipped_checkpoint(spec.arch, dataset)))
        paths = write_init_masks(dataset, spec.arch, spec.checkpoint, split, only=only, post=post,
                                 out_dir=mask_dir(dataset, f"{spec.folder}_postprocessed"), cache_probs=True)
        p = post.as_dict()
        masks[own_label(spec.name, p)] = dict(zip(names, paths, strict=True))
        if raw:  # the masks refinement starts from (init_masks' default: every component kept, no bridging)
            masks[raw_label(spec.name, p)] = dict(zip(
                names, write_init_masks(dataset, spec.arch, spec.checkpoint, split, only=only, cache_probs=True,
                                        out_dir=mask_dir(dataset, spec.folder)), strict=True))
    return masks


def segmenter_rows(dataset: str, split: str, out: Path, segmenters: Sequence[str] = (), naive: bool = True,
                   dust: int = 0, raw: bool = False, cases: Sequence[str] | None = None,
                   include: Sequence[str | Path] = (), stem: str | None = None, plot: bool = False,
                   threads: int = 1, progress: bool = False, protocol: str = "full_volume") -> str:
    """Score, merge and write one table (see the module's doc); returns its markdown.

    ``segmenters``: ``arch[:variant]=checkpoint`` strings. ``protocol``: ``full_volume`` (APP2 picks its root)
    or ``root_seeded`` (APP2 from the mask voxel nearest the gold root; named in each row's label). ``dust`` > 0
    adds each segmenter's mask after removing components under that many voxels. With ``naive=False`` and no
    segmenter the call only merges ``include`` (no volume is loaded)."""
    if dust < 0:
        raise InputError(f"--dust must be 0 (off) or a number of voxels, got {dust}")
    if protocol not in PROTOCOLS:
        raise InputError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    specs = [parse_segmenter(s) for s in segmenters]
    for path in include:
        if not Path(path).exists():
            raise InputError("rows file not found", Path(path))
    all_cases = dataset_cases(dataset, split)
    wanted = list(cases or ())
    unknown = sorted(set(wanted) - {c.name for c in all_cases})
    if unknown:
        raise InputError(f"{dataset} {split} split has no case {', '.join(unknown)}")
    keep = [c for c in all_cases if not wanted or c.name in wanted]
    names = [c.name for c in keep]
    synthetic = bool(all_cases and all_cases[0].info.get("synthetic"))
    rows: list[dict] = []
    if specs or naive:  # a pure merge loads no volume
        import torch

        torch.set_num_threads(threads)
        masks = segmenter_masks(dataset, split, specs, names, wanted or None, raw)
        rows = _score_cases(keep, masks, naive, dust, progress, protocol)
    for path in include:
        rows.extend(r for r in read_rows(path) if r["case"] in names)
    rows = first_of_each(rows)
    stem = stem or f"{dataset}_{split}" + (f"_{'_'.join(wanted)}" if wanted else "")
    title = f"{dataset} {split} split ({', '.join(names)}{', SYNTHETIC data' if synthetic else ''})"
    text = write_tables(rows, Path(out), stem, title)
    if plot:
        plot_rows(rows, Path(out) / f"{stem}.png", title)
    return text


def _score_cases(cases: list, masks: dict[str, dict[str, Path]], naive: bool, dust: int,
                 progress: bool, protocol: str = "full_volume") -> list[dict]:
    from tqdm import tqdm

    from neurorefiner.io import read_mask

    rows: list[dict] = []
    for case in tqdm(cases, desc="scoring cases", unit="case", disable=not progress):
        image = case.image().load()
        gold = case.gold()
        gold_mask = case.label(image.shape)
        sp = case.spacing or (1.0, 1.0, 1.0)
        if naive:
            rows += floor_rows(case, image, gold_mask, protocol)
        app2 = APP2_BY_PROTOCOL[protocol]
        for name, paths in masks.items():
            m = read_mask(paths[case.name]).load() > 0
            rows.append(_scored(f"{name} {app2}", case.name, gold, m, sp, gold_mask, time.perf_counter(), protocol))
            if dust > 0:
                import cc3d

                t = time.perf_counter()
                md = cc3d.dust(m, threshold=dust, connectivity=26, in_place=False)
                rows.append(_scored(f"{name} + dust removal ({dust} voxels) {app2}", case.name, gold, md, sp,
                                    gold_mask, t, protocol))
    return rows
