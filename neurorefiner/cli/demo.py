"""``make demo``: the main job on real data, start to finish, in a few minutes on a laptop.

1. A crop of a real DIADEM test stack (held out from every training and tuning step) and its gold tree.
2. The shipped 3D U-Net segments it (threshold only, every component kept: the breaks and specks are what
   refinement is for).
3. NeuroRefiner refines the mask: the Inspector, Advisor and Validator (Algorithm 1) of refine.py's default
   roles (``agent=learned``: candidates scored by the judge trained on gold) with the shipped TopoRefineNet
   editor; the refined mask (TIFF), its APP2 reconstruction (SWC), the decision trace (JSONL)
   and ``report.html`` are written by the same code as ``python refine.py``.
4. Both masks are traced with APP2 seeded at the gold root (the DIADEM protocol) and scored against the gold
   tree; the before/after table is printed.

Outputs go to ``outputs/demo/``. The crop keeps the stack's errors: breaks along the traced fibres and noise
pieces around them (see ``CROP``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.paths import conf_dir, project_root

CASE = "OP_9"
# z, y, x: the box around the gold tree (its nodes span z 4-67, y 201-364, x 65-426) with a margin: the traced
# fibres with the U-Net's breaks and specks, a quarter of the stack's voxels, so one run stays within a few
# minutes on 2 cores
CROP = (slice(0, 72), slice(176, 384), slice(48, 432))


def crop_tree(tree: Any, box: tuple[slice, ...], shape: tuple[int, ...]) -> Any:
    """Nodes of ``tree`` (voxel xyz) inside ``box`` (ZYX slices of a volume of ``shape``), shifted to the crop's
    origin; a node whose parent falls outside becomes a root."""
    lo = np.array([s.indices(n)[0] for s, n in zip(box, shape)], dtype=float)
    hi = np.array([s.indices(n)[1] for s, n in zip(box, shape)], dtype=float)
    zyx = tree.zyx
    keep = np.all((zyx >= lo - 0.5) & (zyx < hi - 0.5), axis=1)
    return tree.subset(keep).offset((-lo[2], -lo[1], -lo[0])).reindexed()


def refine_cfg(image: Path, mask: Path, out: Path, spacing: tuple[float, ...], extra: Sequence[str] = ()) -> Any:
    """The refine config of the demo's run (``extra``: more overrides, e.g. a test's stand-in editor).

    The demo reruns from scratch into its own folder (``resume=false``) and that folder holds only demo runs,
    whose inputs change with the crop, the shipped U-Net or the code: an older run's outputs there are
    replaced (``overwrite=true``), where refine.py would refuse them (exit 2) to protect a user's results."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    overrides = [f"image={image}", f"mask={mask}", f"out={out}", f"paths.output_dir={out}",
                 f"spacing=[{','.join(str(s) for s in spacing)}]", "resume=false", "overwrite=true", *extra]
    if GlobalHydra.instance().is_initialized():
        from hydra import compose as _compose

        return _compose(config_name="refine", overrides=overrides)
    with initialize_config_dir(version_base="1.3", config_dir=str(conf_dir())):
        return compose(config_name="refine", overrides=overrides)


def method_label(cfg: Any) -> str:
    """The refined row's name in the printed table, from the roles the run used (``cfg.agent.backend``)."""
    return f"NeuroRefiner ({cfg.agent.backend} agents)"


def main(out_dir: Path | None = None, case_name: str = CASE, crop: tuple[slice, ...] = CROP) -> int:
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from neurorefiner.data import get_dataset
    from neurorefiner.evaluation.tables import markdown_table
    from neurorefiner.inference.init_masks import shipped_checkpoint
    from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess, segment_array
    from neurorefiner.io import read_mask, read_volume, write_swc, write_volume
    from neurorefiner.refine.local import refine_volume
    from neurorefiner.tracing.seeding import marker_nearest_root

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    out = Path(out_dir) if out_dir else project_root() / "outputs" / "demo"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    case = next(c for c in get_dataset("diadem").cases("test") if c.name == case_name)
    vol = case.image()
    spacing = tuple(float(s) for s in (case.spacing or vol.spacing))
    raw = np.asarray(vol.load())[crop]
    gold = crop_tree(case.gold(), crop, vol.shape)
    print(f"[demo] {case.name}: real DIADEM test stack (held out), crop (Z, Y, X) {raw.shape} of {vol.shape}, "
          f"spacing (z, y, x) {spacing} um; gold tree in the crop: {len(gold)} nodes")
    image_path = write_volume(out / f"{case.name}_crop.tif", raw, spacing=spacing)

    t1 = time.perf_counter()
    seg = load_segmenter(shipped_checkpoint("unet3d", "diadem"), expected_arch="unet3d")
    post = dataclasses.replace(recorded_postprocess(seg), keep_largest=0, bridge_um=0.0)
    mask, _ = segment_array(seg, raw, post=post, spacing=spacing)
    mask_path = write_volume(out / f"{case.name}_crop_unet3d_mask.tif", mask, spacing=spacing)
    print(f"[demo] shipped 3D U-Net mask: {int(mask.sum())} voxels in {time.perf_counter() - t1:.1f} s -> {mask_path}")

    # the soma, as a lab marks it: APP2 starts there and the Inspector grows the piece there (tracing.marker)
    soma = marker_nearest_root(mask, gold, spacing)
    cfg = refine_cfg(image_path, mask_path, out, spacing,
                     extra=[] if soma is None else ["tracing.marker=[" + ",".join(f"{v:g}" for v in soma) + "]"])
    summary = refine_volume(read_volume(image_path), read_mask(mask_path), cfg)
    refined = np.asarray(read_mask(out / "refined_mask.tif").load(), dtype=bool)

    tracer = instantiate(cfg.tracing)  # the project's APP2 and metric settings, as evaluate.py uses them
    scorer = instantiate(OmegaConf.load(conf_dir() / "metrics" / "default.yaml"))
    rows = []
    for name, m in (("3D U-Net (initial)", mask), (method_label(cfg), refined)):
        tree = tracer(m, spacing, marker=marker_nearest_root(m, gold, spacing))
        stem = "unet3d_mask" if name.startswith("3D") else "refined_mask"
        swc = write_swc(out / f"{stem}_root_seeded.swc", tree,
                        extra_comments=[f"APP2 seeded at the gold root; {name}; spacing z,y,x = {spacing} um"])
        rows.append({"method": name, "n": 1, **{k: float(v) for k, v in scorer(gold, tree, spacing).items()}})
    print(f"\n{case.name} crop, APP2 seeded at the gold root (real data; PRE/REC/F1/MES in %, SD/SSD in voxels):\n")
    print(markdown_table(rows))
    print(f"[demo] edits: {summary.get('accepted', 0)} accepted, {summary.get('rejected', 0)} rejected, "
          f"{summary.get('escalated', 0)} escalated, {summary.get('rounds', 0)} round(s)")
    print(f"[demo] refined mask: {out / 'refined_mask.tif'}")
    print(f"[demo] SWC (root-seeded APP2 of the refined mask): {swc}")
    print(f"[demo] SWC (as refine.py writes it, from the soma marker): {out / 'refined_mask.swc'}")
    print(f"[demo] decisions: {out / 'trace.jsonl'}")
    print(f"[demo] report: {out / 'report.html'}")
    print(f"[demo] done in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
