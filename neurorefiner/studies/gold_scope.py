"""Diagnostic, not the evaluation protocol: how much of the U-Net's DIADEM error is neurite the gold tracing
leaves out because it lies beyond the gold's extent.

On dev, the two weakest out-of-fold cases (OP_3, OP_5) lose precision on a bright trunk that the gold SWC does
not trace: the gold starts at a root inside the stack while the fibre runs on to the image edge, and the
network, which sees a fibre, segments it. :func:`gold_scope` measures that effect for any mask: each mask is
scored as the tables do it (mask -> APP2 -> metrics against the gold SWC) and again after zeroing it outside
the gold's bounding box grown by ``margin`` voxels (then the same component filter again), together with the
share of the full trace's nodes outside that box. The naive floor (Otsu + TEASAR, largest / every component)
gets the same two scores. Dev reads the out-of-fold maps of the single-network cross-validation runs; test the
shipped network's cached masks (``neurorefiner study segmenter-rows``). Writes ``gold_scope_<split>.md``,
``_cases.csv`` and ``.png``. Nothing here chooses anything. Command: ``neurorefiner study gold-scope``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError

CV_SEED_ROOTS = ("cv", "cv_seed1", "cv_seed2")
MARGIN_VOXELS = 10
METRICS = ("PRE", "REC", "F1", "SSD")


def scope_box(gold_zyx: np.ndarray, shape: tuple[int, ...], margin: int) -> tuple[slice, ...]:
    """The gold nodes' bounding box (voxels, ZYX) grown by ``margin`` on every side, clipped to the volume."""
    lo = np.floor(gold_zyx.min(axis=0)).astype(int) - margin
    hi = np.ceil(gold_zyx.max(axis=0)).astype(int) + margin + 1
    return tuple(slice(max(int(a), 0), min(int(b), n)) for a, b, n in zip(lo, hi, shape, strict=True))


def crop_to(mask: np.ndarray, box: tuple[slice, ...], keep_largest: bool) -> np.ndarray:
    """``mask`` zeroed outside ``box`` (same shape, so coordinates stay), then its largest component if asked."""
    import cc3d

    out = np.zeros_like(mask, dtype=bool)
    out[box] = mask[box]
    if keep_largest and out.any():
        out = cc3d.largest_k(out, k=1, connectivity=26, binary_image=True) > 0
    return out


def share_outside(tree_zyx: np.ndarray, box: tuple[slice, ...]) -> float:
    """Share of trace nodes outside ``box`` (0 for an empty trace)."""
    if not len(tree_zyx):
        return 0.0
    inside = np.ones(len(tree_zyx), bool)
    for axis, s in enumerate(box):
        inside &= (tree_zyx[:, axis] >= s.start) & (tree_zyx[:, axis] < s.stop)
    return float(1.0 - inside.mean())


def score_both(gold, mask: np.ndarray, spacing, box, keep_largest: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Protocol scores, scores inside the gold's box, and the share of the protocol trace outside the box."""
    from neurorefiner.metrics import score_mask

    full = score_mask(gold, mask, spacing, return_tree=True)
    inner = score_mask(gold, crop_to(mask, box, keep_largest), spacing)
    return {**{m: float(full[m]) for m in METRICS}, **{f"{m}_in_box": float(inner[m]) for m in METRICS},
            "outside": share_outside(full["tree"].zyx, box)}


def floor_both(gold, otsu: np.ndarray, spacing, box, largest: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The naive floor (Otsu + TEASAR, largest or every component), full and inside the gold's box."""
    from neurorefiner.baselines.naive import teasar_tree
    from neurorefiner.metrics import score_trees

    tree = teasar_tree(otsu, spacing, largest_only=largest)
    full = score_trees(gold, tree, spacing)
    inner = score_trees(gold, teasar_tree(crop_to(otsu, box, False), spacing, largest_only=largest), spacing)
    return {**{k: float(full[k]) for k in METRICS}, **{f"{k}_in_box": float(inner[k]) for k in METRICS},
            "outside": share_outside(tree.zyx, box)}


def _shown(path: Path) -> str:
    from neurorefiner.paths import project_root

    root = project_root()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def unet_masks(split: str, threshold: float, bridge_um: float = 0.0, cv_root: Path | None = None,
               mask_folder: Path | None = None) -> dict[str, list[tuple[str, np.ndarray]]]:
    """Per case, (source, mask) of the U-Net: dev -> the out-of-fold maps of each seed's cross-validation run
    under ``cv_root`` at the shipped setting (``threshold``, ``bridge_um``, keep largest); test -> the shipped
    network's cached masks in ``mask_folder`` (default: segmenter-rows' cache)."""
    from neurorefiner.data import get_dataset
    from neurorefiner.inference.init_masks import mask_dir
    from neurorefiner.io import read_mask
    from neurorefiner.paths import project_root
    from neurorefiner.postprocessing.masks import PostProcess, postprocess_mask

    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    if split == "dev":
        spacings = {c.name: c.spacing for c in get_dataset("diadem").cases("dev")}  # once, not per map
        runs = Path(cv_root) if cv_root else project_root() / "checkpoints" / "runs" / "segment" / "unet3d"
        for root in CV_SEED_ROOTS:
            for path in sorted((runs / root).glob("f*_256/oof_probs/OP_*.npy")):
                probs = np.load(path).astype(np.float32)
                mask = postprocess_mask(probs, PostProcess(threshold, 0, 1, bridge_um), spacings[path.stem])
                out.setdefault(path.stem, []).append((_shown(path.resolve()), mask))
        if not out:
            raise InputError(f"no out-of-fold maps under {runs}/{{{','.join(CV_SEED_ROOTS)}}}: run "
                             "`neurorefiner study segmenter-cv probs` on the cross-validation runs first")
    elif split == "test":
        folder = Path(mask_folder) if mask_folder else mask_dir("diadem", "unet3d_postprocessed")
        for path in sorted(folder.glob("OP_*.tif")):
            out[path.stem] = [(_shown(path.resolve()), read_mask(path).load() > 0)]
        if not out:
            raise InputError("no masks here; run `neurorefiner study segmenter-rows --dataset diadem --segmenter "
                             "unet3d` first", folder)
    else:
        raise InputError(f"--split must be dev or test, got {split!r}")
    return out


def gold_scope(split: str, out: Path, margin: int = MARGIN_VOXELS, threshold: float = 0.8,
               bridge_um: float = 0.0, cv_root: Path | None = None, mask_folder: Path | None = None,
               progress: bool = False) -> str:
    """Score every case (see the module's doc), write the table, its rows and the views; returns the table."""
    from tqdm import tqdm

    from neurorefiner.baselines.naive import otsu_mask
    from neurorefiner.data import get_dataset
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

    if margin < 0:
        raise InputError(f"--margin must be 0 or more voxels, got {margin}")
    masks = unet_masks(split, threshold, bridge_um, cv_root, mask_folder)
    cases = {c.name: c for c in get_dataset("diadem").cases(split)}
    rows, views = [], []
    for name, case in tqdm(cases.items(), desc=f"gold scope, {split}", unit="case", disable=not progress):
        image = case.image().load()
        gold, sp = case.gold(), case.spacing
        box = scope_box(gold.zyx, image.shape, margin)
        otsu = otsu_mask(image)
        for method, largest in (("naive floor, largest component", True), ("naive floor, every component", False)):
            rows.append({"case": name, "method": method, "source": "Otsu + TEASAR",
                         **floor_both(gold, otsu, sp, box, largest)})
        for source, mask in masks.get(name, []):
            rows.append({"case": name, "method": "U-Net (keep largest)", "source": source,
                         **score_both(gold, mask, sp, box, keep_largest=True)})
        if masks.get(name):
            views.append((name, image.max(axis=0), masks[name][0][1].max(axis=0), gold.zyx, box))
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gold_scope_{split}"
    write_rows_csv(out / f"{stem}_cases.csv", rows)
    text = table(rows, split, margin, threshold, bridge_um)
    write_markdown(out / f"{stem}.md", text)
    plot_views(views, out / f"{stem}.png", split)
    return text


def plot_views(views: list[tuple], path: Path, split: str) -> Path:
    """Per case: image MIP with the gold nodes and the gold's box, and the U-Net mask's MIP with the box."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from neurorefiner.io.atomic import save_figure_atomic

    fig, axes = plt.subplots(len(views), 2, figsize=(9, 4.3 * len(views)), squeeze=False)
    for (name, image_mip, mask_mip, gold_zyx, box), (left, right) in zip(views, axes, strict=True):
        left.imshow(np.sqrt(image_mip), cmap="gray")
        left.scatter(gold_zyx[:, 2], gold_zyx[:, 1], s=0.3, c="lime")
        right.imshow(mask_mip, cmap="magma")
        for ax in (left, right):
            ax.add_patch(Rectangle((box[2].start, box[1].start), box[2].stop - box[2].start,
                                   box[1].stop - box[1].start, fill=False, ec="cyan", lw=1))
            ax.set_xticks([]), ax.set_yticks([])
        left.set_title(f"{name}: image (max projection), gold SWC, gold's box", fontsize=9)
        right.set_title(f"{name}: U-Net mask ({'first seed, out of fold' if split == 'dev' else 'shipped'})",
                        fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=60)
    return path


def table(rows: list[dict], split: str, margin: int, threshold: float, bridge_um: float) -> str:
    """Per case and method (several seeds averaged), protocol vs inside the gold's box, then the means."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    cases = list(dict.fromkeys(r["case"] for r in rows))
    head = ("| case | method | F1 | F1 in gold's box | SSD | SSD in gold's box | trace outside the box |\n"
            "|---|---|---|---|---|---|---|")

    def line(case: str, method: str, rs: list[dict], seeds: bool = True) -> str:
        v = {k: float(np.mean([r[k] for r in rs])) for k in ("F1", "F1_in_box", "SSD", "SSD_in_box", "outside")}
        return (f"| {case} | {method}{f' ({len(rs)} seeds)' if seeds and len(rs) > 1 else ''} | {v['F1']:.3f} | "
                f"{v['F1_in_box']:.3f} | {v['SSD']:.1f} | {v['SSD_in_box']:.1f} | {v['outside']:.0%} |")

    body = [line(c, m, rs) for c in cases for m in methods
            if (rs := [r for r in rows if r["case"] == c and r["method"] == m])]
    means = []
    for m in methods:
        per_case = [[r for r in rows if r["case"] == c and r["method"] == m] for c in cases]
        per_case = [rs for rs in per_case if rs]
        mean_rows = [{k: float(np.mean([r[k] for r in rs])) for k in
                      ("F1", "F1_in_box", "SSD", "SSD_in_box", "outside")} for rs in per_case]
        means.append(line("mean", m, mean_rows, seeds=False))
    what = (f"out-of-fold masks of the three single-network CV runs (seeds 0-2, 256 steps), threshold {threshold}, "
            f"gap bridging {bridge_um:g} um, keep largest" if split == "dev"
            else "the shipped network's masks (read after it was fixed; reporting only)")
    return "\n".join([
        f"# DIADEM {split}: error beyond the gold tracing's extent (diagnostic, not the evaluation protocol)", "",
        f"U-Net: {what}. Each mask is scored as the tables do (mask -> APP2 -> metrics, tau 4 voxels, SSD in "
        f"voxels), then again after zeroing it outside the gold nodes' bounding box grown by {margin} voxels "
        "(U-Net: largest component again). 'trace outside the box': share of the full trace's nodes outside "
        "it. Command: `neurorefiner study gold-scope`.", "", head, *body, *means, ""])


