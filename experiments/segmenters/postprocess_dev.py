"""Choose the post-processing (threshold, dust removal, largest components) and the inference window of a
segmenter on a DIADEM *dev* case (the validation case OP_6), scored the way the tables are: mask -> APP2
-> F1/SSD against the gold SWC. Test cases are refused: nothing is tuned on OP_7-OP_9.

Writes postprocess_dev_<case>.md (every setting, best first) and postprocess_dev_<case>.csv.

    .venv/bin/python experiments/segmenters/postprocess_dev.py \
        --model checkpoints/segmenters/unet3d_diadem_cpu.pt --cases OP_6 --threads 1

    # OP_6 could not tell the component filters apart: break its ties on the training cases (in-sample)
    .venv/bin/python experiments/segmenters/postprocess_dev.py \
        --model checkpoints/segmenters/unet3d_diadem_cpu.pt --cases OP_6 --windows wide \
        --tiebreak-cases OP_1 OP_2 OP_3 OP_4 OP_5 --threads 1

Rule: the highest F1 on --cases; ties (within 0.005) go to the higher mean F1 on --tiebreak-cases (if
given), then to the lower SSD on --cases, then to the simpler setting.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from neurorefiner.data import get_dataset
from neurorefiner.data.transforms import normalize_image
from neurorefiner.inference.segmenter import default_window, load_segmenter, max_input_of
from neurorefiner.models.sliding_window import sliding_window_probs
from neurorefiner.postprocessing.choose import score_settings, settings_grid

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
DUST = (0, 100, 1000)
KEEP = (0, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--cases", nargs="+", default=["OP_6"], help="dev cases to choose on")
    p.add_argument("--tiebreak-cases", nargs="*", default=[], help="dev cases that break ties (see the rule)")
    p.add_argument("--windows", nargs="+", default=["train", "wide"], choices=["train", "wide"])
    p.add_argument("--thresholds", nargs="+", type=float, default=list(THRESHOLDS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent))
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    ds = get_dataset("diadem")
    dev = {c.name: c for c in ds.cases("dev")}
    unknown = [n for n in a.cases + a.tiebreak_cases if n not in dev]
    if unknown:
        raise SystemExit(f"{unknown}: not DIADEM dev cases (test cases OP_7-OP_9 are never used for choices)")
    seg = load_segmenter(a.model)
    rows = []
    for name in a.cases + a.tiebreak_cases:
        case = dev[name]
        raw = case.image().load()
        img = normalize_image(raw, str(case.image_path), seg.normalization)
        gold, sp = case.gold(), case.spacing
        windows = {"train": ("training patch", seg.patch_size),
                   "wide": ("wide", default_window(seg.patch_size, raw.shape, max_input=max_input_of(seg.net)))}
        for wname, window in (windows[w] for w in a.windows):
            t = time.perf_counter()
            probs = sliding_window_probs(seg.net, img, window, overlap=0.25, mode="gaussian")
            infer_s = time.perf_counter() - t
            print(f"{name} window {wname} {window}: {infer_s:.1f} s")
            for post, s in score_settings(probs, gold, sp, settings_grid(a.thresholds, DUST, KEEP)):
                rows.append({"case": name, "window": f"{wname} {'x'.join(map(str, window))}",
                             "infer_s": round(infer_s, 1), **post.as_dict(), **s})
                print(rows[-1])
    keys = ["window", "threshold", "dust_voxels", "keep_largest"]
    groups: dict[tuple, list[dict]] = {}
    tie: dict[tuple, list[float]] = {}
    for r in rows:
        k = (r["window"].split(" ")[0], *(r[x] for x in keys[1:]))
        if r["case"] in a.tiebreak_cases:
            tie.setdefault(k, []).append(r["F1"])
        else:
            groups.setdefault(tuple(r[x] for x in keys), []).append(r)
    metrics = ("PRE", "REC", "F1", "SD", "SSD", "infer_s")
    summary = [{**dict(zip(keys, k, strict=True)), **{m: float(np.mean([r[m] for r in rs])) for m in metrics}}
               for k, rs in groups.items()]
    for sm in summary:
        vals = tie.get((sm["window"].split(" ")[0], sm["threshold"], sm["dust_voxels"], sm["keep_largest"]))
        sm["tiebreak_F1"] = float(np.mean(vals)) if vals else float("nan")
    best_f1 = max(s["F1"] for s in summary)
    summary.sort(key=lambda s: (-round(s["F1"], 3), s["SSD"]))
    near = [s for s in summary if s["F1"] >= best_f1 - 0.005]
    chosen = min(near, key=lambda s: (-np.nan_to_num(round(s["tiebreak_F1"], 3), nan=0.0), s["SSD"],
                                      s["dust_voxels"] > 0, s["keep_largest"] > 0, abs(s["threshold"] - 0.5)))
    stem = f"postprocess_dev_{'_'.join(a.cases)}" + ("_tiebreak" if a.tiebreak_cases else "")
    out = Path(a.out)
    with open(out / f"{stem}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Post-processing and inference window chosen on DIADEM dev ({', '.join(a.cases)})", "",
             f"Model `{a.model}`; mask -> APP2 -> PRE/REC/F1 (tau 4 voxels), SD/SSD in voxels; means over "
             f"{', '.join(a.cases)}. Rule: highest F1; ties within 0.005 to the higher mean F1 on the tie-break cases "
             f"({', '.join(a.tiebreak_cases) or 'none'}; training cases of the network, so in-sample), then the "
             "lower SSD, then the simpler setting.", "",
             f"**Chosen: window {chosen['window']}, threshold {chosen['threshold']}, dust {chosen['dust_voxels']} "
             f"voxels, keep_largest {chosen['keep_largest']}** (F1 {chosen['F1']:.3f}, SSD {chosen['SSD']:.2f})", "",
             "| window | threshold | dust | keep_largest | PRE | REC | F1 | SD | SSD | inference s | tie-break F1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['window']} | {s['threshold']} | {s['dust_voxels']} | {s['keep_largest']} | "
                     f"{s['PRE']:.3f} | {s['REC']:.3f} | {s['F1']:.3f} | {s['SD']:.2f} | {s['SSD']:.2f} | "
                     f"{s['infer_s']:.1f} | {s['tiebreak_F1']:.3f} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    main()
