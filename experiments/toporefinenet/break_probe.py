"""How much of a break's gap does TopoRefineNet fill, as a function of the output threshold? Synthetic breaks
(stage-1 generator, breaks only) cut into the gold mask of DIADEM OP_6 (a development stack), edited with
the correct instruction, confined as TopoRefiner.edit does. Writes break_probe.md.

    python experiments/toporefinenet/break_probe.py --ckpt checkpoints/toporefinenet_stage1.ckpt \
        --ckpt checkpoints/toporefinenet.ckpt --n 16 --out experiments/toporefinenet/results/break_probe
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
THRESHOLDS = (0.5, 0.3, 0.2, 0.1, 0.05)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", action="append", required=True)
    ap.add_argument("--label", action="append", help="label per checkpoint (default: file name)")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--crop", type=int, nargs=3, default=(32, 64, 64), metavar=("D", "H", "W"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    labels = args.label or [Path(c).name for c in args.ckpt]
    if len(labels) != len(args.ckpt):
        ap.error("give one --label per --ckpt")

    from neurorefiner.data import get_dataset
    from neurorefiner.data.datamodules.stage1 import make_stage1_sample
    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.io.atomic import write_text_atomic
    from neurorefiner.models.refine_module import betti0

    case = next(c for c in get_dataset("diadem").cases("dev") if c.name == "OP_6")
    image = case.image()
    data, gold = image.normalized(), case.label(image.shape)
    samples = [make_stage1_sample(data, gold, np.random.default_rng(100 + i), tuple(args.crop),
                                  defects={"probs": {"break": 1.0}}) for i in range(args.n)]
    lines = [f"{args.n} synthetic breaks in {tuple(args.crop)} crops of OP_6, correct instruction, confined edit. "
             "fixed = share of the gap voxels filled; reconnected = edits whose component count drops to the gold "
             "crop's.", "", "| checkpoint | threshold | fixed | reconnected |", "|---|---|---|---|"]
    for label, ckpt in zip(labels, args.ckpt, strict=True):
        refiner = TopoRefiner.load(ckpt)
        probs = [refiner.probabilities(s["image"], s["mask"], s["instruction"]) for s in samples]
        for thr in THRESHOLDS:
            fixed, joined = [], 0
            for s, p in zip(samples, probs, strict=True):
                edited = np.where(refiner.allowed_region(s["instruction"], s["mask"].shape), p >= thr, s["mask"])
                gap = s["mask"] ^ s["target"]
                fixed.append(float((gap & (edited == s["target"])).sum() / max(int(gap.sum()), 1)))
                joined += betti0(edited) <= betti0(s["target"]) < betti0(s["mask"])
            lines.append(f"| {label} | {thr} | {np.mean(fixed):.3f} | {joined} of {len(samples)} |")
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out / "break_probe.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
