"""Choose a segmenter's post-processing on a SYNTHETIC preset's validation split (never its test split), the
way cv_dev.py chooses the DIADEM U-Net's: mask -> APP2 -> F1/SSD against the gold SWC, the highest mean F1,
settings within 0.01 of it to the lower mean SSD, then the simpler setting (no gap bridging, threshold nearest
0.5). The grid: thresholds x gap bridging (um), keep the largest component (as on DIADEM), no dust removal.

Until the sixth round the synthetic rows used the DIADEM U-Net's setting (threshold 0.6, keep largest), which
the zbfwb diagnosis showed sits above almost every probability that network gives; this replaces it with one
chosen on each preset's own validation volumes. Writes <preset>_<arch>_postprocess_val.{md,csv,json} next to
this file; ``--record`` stores the choice in the checkpoint (synthetic_rows.sh STEP=choose does both).

    .venv/bin/python experiments/segmenters/synthetic/choose_postprocess.py --dataset synthetic_cwmbs_weak \
        --arch unet3d --model checkpoints/runs/segment/unet3d/synthetic_cwmbs_weak_r3/segmenter.pt --record
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
BRIDGE = (0.0, 3.0)


def summarise(rows: list[dict]) -> list[dict]:
    """Mean PRE/REC/F1/SD/SSD per (threshold, bridge_um) over the validation volumes, best F1 first."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["threshold"], r["bridge_um"]), []).append(r)
    summary = [{"threshold": t, "bridge_um": b, "volumes": len(rs),
                **{m: float(np.mean([r[m] for r in rs])) for m in ("PRE", "REC", "F1", "SD", "SSD")}}
               for (t, b), rs in groups.items()]
    return sorted(summary, key=lambda s: (-s["F1"], s["SSD"]))


def main() -> None:
    import torch

    from neurorefiner.data import get_dataset
    from neurorefiner.inference.segmenter import load_segmenter, record_postprocess, segment_array
    from neurorefiner.io.atomic import atomic_path, write_text_atomic
    from neurorefiner.postprocessing.choose import TIE_F1, choose_setting, score_settings, settings_grid
    from neurorefiner.postprocessing.masks import PostProcess

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="a synthetic preset (its val split is used)")
    p.add_argument("--arch", required=True, help="the network the checkpoint must hold")
    p.add_argument("--name", help="names the output files (default: --arch); a variant's, e.g. unet3d_prior")
    p.add_argument("--model", required=True, type=Path)
    p.add_argument("--thresholds", nargs="+", type=float, default=list(THRESHOLDS))
    p.add_argument("--bridge", nargs="+", type=float, default=list(BRIDGE))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--record", action="store_true", help="store the choice in the checkpoint")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cases = get_dataset(a.dataset).cases("val")
    if not cases or not cases[0].info.get("synthetic"):
        raise SystemExit(f"{a.dataset}: this chooser is for the synthetic presets' val splits")
    seg = load_segmenter(a.model, expected_arch=a.arch)
    grid = settings_grid(a.thresholds, (0,), (1,), a.bridge)
    rows = []
    for case in cases:
        _, probs = segment_array(seg, case.image().load(), source=str(case.image_path), post=PostProcess(0.5),
                                 spacing=case.spacing)
        for post, s in score_settings(probs, case.gold(), case.spacing, grid):
            rows.append({"case": case.name, "threshold": post.threshold, "bridge_um": post.bridge_um, **s})
        best = max((r for r in rows if r["case"] == case.name), key=lambda r: r["F1"])
        print(f"{case.name}: max probability {probs.max():.2f}; best F1 {best['F1']:.3f} at threshold "
              f"{best['threshold']}, bridging {best['bridge_um']:g} um")
    summary = summarise(rows)
    chosen = choose_setting(summary)
    stem = HERE / f"{a.dataset}_{a.name or a.arch}_postprocess_val"
    with atomic_path(stem.with_suffix(".csv")) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# {a.name or a.arch} on {a.dataset} (SYNTHETIC): post-processing chosen on the val split", "",
             f"Model `{a.model}`; {len(cases)} val volumes; mask -> APP2 -> PRE/REC/F1 (tau 4 voxels), SD/SSD in "
             "voxels, means over the volumes; keep the largest component, no dust removal. Rule: the highest mean "
             f"F1; within {TIE_F1} the lower mean SSD, then no bridging, then the threshold nearest 0.5. The test "
             "split is not used. Command: `experiments/segmenters/synthetic/choose_postprocess.py`.", "",
             f"**Chosen: threshold {chosen['threshold']}, gap bridging {chosen['bridge_um']:g} um, keep largest** "
             f"(F1 {chosen['F1']:.3f}, SSD {chosen['SSD']:.2f})", "",
             "| threshold | bridge um | PRE | REC | F1 | SD | SSD |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {s['threshold']} | {s['bridge_um']:g} | {s['PRE']:.3f} | {s['REC']:.3f} | {s['F1']:.3f} | "
              f"{s['SD']:.2f} | {s['SSD']:.2f} |" for s in summary]
    write_text_atomic(stem.with_suffix(".md"), "\n".join(lines) + "\n")
    post = PostProcess(chosen["threshold"], 0, 1, chosen["bridge_um"])
    write_text_atomic(stem.with_suffix(".json"), json.dumps(post.as_dict(), indent=1) + "\n")
    if a.record:
        where = stem.with_suffix(".md").relative_to(HERE.parents[2])
        record_postprocess(a.model, post, f"{a.dataset} val split: {where}")
    print("\n".join(lines[4:8]))


if __name__ == "__main__":
    main()
