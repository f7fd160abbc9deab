"""How much of a break's gap does TopoRefineNet fill, as a function of its output threshold? Synthetic
breaks (the stage-1 generator, breaks only) cut into the gold mask of DIADEM OP_6 (a development stack),
edited with the correct instruction and confined as ``TopoRefiner.edit`` confines them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.defects.describe import betti0
from neurorefiner.evaluation.tables import write_markdown

THRESHOLDS = (0.5, 0.3, 0.2, 0.1, 0.05)


def break_samples(n: int, crop: tuple[int, int, int] = (32, 64, 64), case_name: str = "OP_6") -> list[dict]:
    """``n`` synthetic breaks (seeds 100 .. 100 + n - 1) in crops of a DIADEM dev stack."""
    from neurorefiner.data import get_dataset
    from neurorefiner.data.datamodules.stage1 import make_stage1_sample

    case = next(c for c in get_dataset("diadem").cases("dev") if c.name == case_name)
    image = case.image()
    data, gold = image.normalized(), case.label(image.shape)
    return [make_stage1_sample(data, gold, np.random.default_rng(100 + i), tuple(crop),
                               defects={"probs": {"break": 1.0}}) for i in range(n)]


def probe_rows(checkpoints: Sequence[str | Path], labels: Sequence[str], samples: Sequence[dict],
               thresholds: Sequence[float] = THRESHOLDS) -> list[dict]:
    """Per checkpoint and threshold: mean share of the gap filled, and how many breaks were reconnected
    (the edit's component count drops to the gold crop's)."""
    from neurorefiner.inference.refiner import TopoRefiner

    if len(labels) != len(checkpoints):
        raise ValueError("give one label per checkpoint")
    rows = []
    for label, ckpt in zip(labels, checkpoints, strict=True):
        refiner = TopoRefiner.load(ckpt)
        probs = [refiner.probabilities(s["image"], s["mask"], s["instruction"]) for s in samples]
        for thr in thresholds:
            fixed, joined = [], 0
            for s, p in zip(samples, probs, strict=True):
                edited = np.where(refiner.allowed_region(s["instruction"], s["mask"].shape), p >= thr, s["mask"])
                gap = s["mask"] ^ s["target"]
                fixed.append(float((gap & (edited == s["target"])).sum() / max(int(gap.sum()), 1)))
                joined += betti0(edited) <= betti0(s["target"]) < betti0(s["mask"])
            rows.append({"checkpoint": label, "threshold": thr, "fixed": float(np.mean(fixed)),
                         "reconnected": int(joined), "n": len(samples)})
    return rows


def probe_markdown(rows: Sequence[dict], n: int, crop: tuple[int, int, int]) -> str:
    lines = [f"{n} synthetic breaks in {tuple(crop)} crops of OP_6, correct instruction, confined edit. "
             "fixed = share of the gap voxels filled; reconnected = edits whose component count drops to the gold "
             "crop's.", "", "| checkpoint | threshold | fixed | reconnected |", "|---|---|---|---|"]
    lines += [f"| {r['checkpoint']} | {r['threshold']} | {r['fixed']:.3f} | {r['reconnected']} of {r['n']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def run(checkpoints: Sequence[str | Path], out: Path, labels: Sequence[str] | None = None, n: int = 16,
        crop: tuple[int, int, int] = (32, 64, 64)) -> str:
    """Probe every checkpoint on the same breaks; writes ``out/break_probe.md`` and returns it."""
    labels = list(labels) if labels else [Path(c).name for c in checkpoints]
    samples = break_samples(n, crop)
    table = probe_markdown(probe_rows(checkpoints, labels, samples), n, crop)
    out.mkdir(parents=True, exist_ok=True)
    write_markdown(out / "break_probe.md", table)
    return table
