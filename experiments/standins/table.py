"""Collect the SYNTHETIC stand-in rows (python evaluate.py ... out_dir=experiments/standins/rows/<preset>_<seg>)
beside the paper's 3D U-Net and nnU-Net rows: standins.md and standins.csv, with date and commit.

    .venv/bin/python experiments/standins/table.py --rows experiments/standins/rows --out experiments/standins
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
from pathlib import Path

import numpy as np

PRESETS = ("synthetic_cwmbs_weak", "synthetic_cwmbs_noise", "synthetic_bigneuron", "synthetic_zbfwb")
# the paper's Tables 1-2, F1 (%) of the initial masks of its baselines on the real benchmark each preset stands in for
PAPER = {"synthetic_cwmbs_weak": ("CWMBS weak", 74.94, 79.83), "synthetic_cwmbs_noise": ("CWMBS noise", 79.23, 73.14),
         "synthetic_bigneuron": ("BigNeuron", 86.33, 87.10), "synthetic_zbfwb": ("ZBFWB", 72.94, 75.85)}
N_TEST = {"synthetic_cwmbs_weak": 8, "synthetic_cwmbs_noise": 4, "synthetic_bigneuron": 8, "synthetic_zbfwb": 4}
SEGMENTERS = {"unet3d": "3D U-Net (shipped CPU checkpoint)", "otsu": "naive floor (Otsu)"}
PROTOCOLS = ("root_seeded", "full_volume")
KEYS = ("PRE", "REC", "F1", "SD", "SSD")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    table = []
    for preset in PRESETS:
        bench, unet, nnunet = PAPER[preset]
        for seg in SEGMENTERS:
            # one JSON per (case, protocol), written as each is scored: a run cut short still counts what it scored
            rows = [json.loads(f.read_text()) for f in
                    sorted((args.rows / f"{preset}_{seg}" / "rows").glob(f"*/test/{seg}/initial-*.json"))]
            for protocol in PROTOCOLS:
                sel = [r for r in rows if r["protocol"] == protocol]
                if not sel:
                    continue
                row = {"preset": preset, "stands_in_for": bench, "segmenter": seg, "protocol": protocol,
                       "n": len(sel), "n_test": N_TEST[preset], "cases": " ".join(sorted(r["case"][-3:] for r in sel)),
                       **{k: float(np.mean([float(r[k]) for r in sel])) for k in KEYS},
                       "paper_unet3d_F1": unet, "paper_nnunet_F1": nnunet}
                row["F1_minus_paper_unet3d"] = 100 * row["F1"] - unet
                table.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "standins.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# SYNTHETIC stand-ins vs the paper's initial-mask rows (test splits)", "",
             f"Made {stamp} at commit {commit} by `bash experiments/standins/run.sh` (step `table`). Every row "
             "is a generated SYNTHETIC stand-in, never a BigNeuron/CWMBS/ZBFWB result; the paper columns are "
             "its Tables 1-2 on the real benchmarks, for calibration only. Initial masks of the test split "
             "(threshold chosen on the val split, every component kept), traced by APP2: root_seeded (from the "
             "mask voxel nearest the gold root, the headline, as for DIADEM) and full_volume (APP2's own root). "
             "PRE/REC/F1 in %, SD/SSD in voxels, means over the test volumes.", "",
             "| preset (SYNTHETIC) | stands in for | segmenter | protocol | test volumes scored | PRE | REC | F1 | SD "
             "| SSD | paper 3D U-Net F1 | F1 - paper U-Net | paper nnU-Net F1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['preset']} | {r['stands_in_for']} | {SEGMENTERS[r['segmenter']]} | {r['protocol']} | "
                     f"{r['n']} of {r['n_test']} ({r['cases']}) | {100 * r['PRE']:.2f} | {100 * r['REC']:.2f} | "
                     f"{100 * r['F1']:.2f} | "
                     f"{r['SD']:.2f} | {r['SSD']:.2f} | {r['paper_unet3d_F1']:.2f} | "
                     f"{r['F1_minus_paper_unet3d']:+.2f} | {r['paper_nnunet_F1']:.2f} |")
    (args.out / "standins.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
