"""``make demo``: the main job on built-in data, growing with every capability that lands.

Today: read the real DIADEM OP_1 stack and its gold reconstruction, rasterise the gold tree into a
mask, write it (TIFF, opens in Fiji/napari), and print a summary; then trace the mask with APP2 and
score it against the gold tree when the tracing and metrics pieces are installed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import cc3d
import numpy as np

from neurorefiner.data import get_dataset
from neurorefiner.io import write_volume
from neurorefiner.paths import project_root
from neurorefiner.topology.components import betti0


def main(out_dir: Path | None = None) -> int:
    out_dir = out_dir or project_root() / "outputs" / "demo"
    t0 = time.perf_counter()
    case = get_dataset("diadem").cases("dev")[0]
    image = case.image()
    gold = case.gold()
    data = image.load()
    print(f"[demo] {case.name} (real DIADEM stack, dev split): shape (Z, Y, X) {image.shape}, {image.dtype}, "
          f"spacing (z, y, x) {image.spacing} um")
    print(f"[demo] gold SWC: {len(gold)} nodes, {int((gold.n_children() > 1).sum())} branch points, "
          f"{int((gold.n_children() == 0).sum())} tips, length {gold.total_length(image.spacing):.1f} um")
    gold.check_within(image.shape)
    mask = case.label(image.shape)
    n_comp = int(cc3d.connected_components(mask, connectivity=26).max())
    print(f"[demo] gold mask: {int(mask.sum())} voxels ({100 * mask.mean():.3f} % of the stack), "
          f"{n_comp} connected component(s); mean intensity on/off the mask "
          f"{data[mask].mean():.1f} / {data[~mask].mean():.2f}")
    path = write_volume(out_dir / f"{case.name}_gold_mask.tif", mask, image.spacing)
    print(f"[demo] wrote {path}")
    _trace_and_score(case.name, mask, gold, image.spacing, out_dir)
    _instructed_edit(out_dir)
    print(f"[demo] done in {time.perf_counter() - t0:.1f} s")
    return 0


def _trace_and_score(name: str, mask: np.ndarray, gold, spacing, out_dir: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        from neurorefiner.metrics.reconstruction import score_trees
        from neurorefiner.tracing.app2 import trace_mask
    except ImportError:
        print("[demo] APP2 tracing and metrics are not installed yet (issue 4): skipping the score")
        return
    from neurorefiner.io import write_swc

    t0 = time.perf_counter()
    tree = trace_mask(mask, spacing)
    swc = write_swc(out_dir / f"{name}_gold_mask_app2.swc", tree)
    scores = score_trees(gold, tree, spacing)
    print(f"[demo] APP2 on the gold mask: {len(tree)} nodes in {time.perf_counter() - t0:.1f} s -> {swc}")
    print("[demo] " + "  ".join(f"{k} {v:.3f}" for k, v in scores.items()))


# z, y, x: the crop the shipped CPU TopoRefineNet was trained on (checkpoints/toporefinenet.md); with
# 64 x 128 x 128 blocks the same four breaks were repaired 0 of 4 (edits added fragments), so the demo
# shows the model at the block size it knows
BLOCK = (32, 64, 64)


def _instructed_edit(out_dir: Path, n: int = 4) -> None:
    """Cut synthetic breaks into blocks of OP_6 (the validation stack TopoRefineNet never trained on) and
    let the shipped TopoRefineNet repair each from the instruction the defect implies."""
    try:
        from neurorefiner.data.datamodules.stage1 import make_stage1_sample
        from neurorefiner.inference.refiner import TopoRefiner
    except ImportError:
        print("[demo] TopoRefineNet is not installed yet (issue 6): skipping the instructed edits")
        return
    from neurorefiner.metrics.voxel import dice

    case = get_dataset("diadem").cases("dev")[5]
    image = case.image()
    data = image.normalized()
    gold = case.label(image.shape)
    refiner = TopoRefiner.load()
    print(f"[demo] TopoRefineNet ({refiner.source or 'shipped checkpoint'}) on {n} synthetic breaks in "
          f"{' x '.join(map(str, BLOCK))} blocks of {case.name}:")
    repaired = 0
    for seed in range(n):
        sample = make_stage1_sample(data, gold, np.random.default_rng(seed), BLOCK,
                                    defects={"probs": {"break": 1.0}})
        t0 = time.perf_counter()
        edited = refiner.edit(sample["image"], sample["mask"], sample["instruction"])
        target = sample["target"]
        fixed = betti0(edited) <= betti0(target) < betti0(sample["mask"])
        repaired += fixed
        print(f"[demo]   \"{sample['instruction']}\" ({time.perf_counter() - t0:.1f} s): components "
              f"{betti0(sample['mask'])} -> {betti0(edited)} (gold {betti0(target)}), Dice to gold "
              f"{dice(sample['mask'], target):.3f} -> {dice(edited, target):.3f}{'  repaired' if fixed else ''}")
        if seed == 0:
            for name, block in (("image", sample["image"]), ("broken", sample["mask"]), ("edited", edited)):
                write_volume(out_dir / f"{case.name}_edit_{name}.tif", block, image.spacing)
    print(f"[demo] breaks repaired: {repaired} of {n}; first block written as "
          f"{case.name}_edit_{{image,broken,edited}}.tif in {out_dir}")


if __name__ == "__main__":
    sys.exit(main())
