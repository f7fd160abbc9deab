"""The SYNTHETIC stand-ins' calibration table: test rows beside the paper's Tables 1-2 initial-mask rows. Every
row is a generated stand-in, never a BigNeuron/CWMBS/ZBFWB result; the paper columns are there for calibration
only. (The shipped stand-in segmenters' cards: :mod:`neurorefiner.training.segmenter_cards`.)"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import summarize, write_rows_csv
from neurorefiner.io.atomic import atomic_path
from neurorefiner.paths import project_root

PRESETS = ("synthetic_cwmbs_weak", "synthetic_cwmbs_noise", "synthetic_bigneuron", "synthetic_zbfwb")
# the paper's Tables 1-2: F1 (%) of each segmenter's masks on the real benchmark each preset stands in for (Table 2
# has no SwinUNETR row)
PAPER_SEGMENTER_F1 = {
    "synthetic_cwmbs_weak": {"unet3d": 74.94, "swinunetr": 76.93, "nnunet_style": 79.83, "vnet": 80.82,
                             "sgsnet_style": 69.46, "gbpnet_style": 88.91, "adtlnet_style": 75.07},
    "synthetic_cwmbs_noise": {"unet3d": 79.23, "swinunetr": 80.98, "nnunet_style": 73.14, "vnet": 68.75,
                              "sgsnet_style": 82.56, "gbpnet_style": 83.77, "adtlnet_style": 74.13},
    "synthetic_bigneuron": {"unet3d": 86.33, "nnunet_style": 87.10, "vnet": 86.27, "sgsnet_style": 88.20,
                            "gbpnet_style": 89.03, "adtlnet_style": 87.69},
    "synthetic_zbfwb": {"unet3d": 72.94, "nnunet_style": 75.85, "vnet": 68.82, "sgsnet_style": 66.27,
                        "gbpnet_style": 83.11, "adtlnet_style": 64.38},
}
BENCHMARKS = {"synthetic_cwmbs_weak": "CWMBS weak", "synthetic_cwmbs_noise": "CWMBS noise",
              "synthetic_bigneuron": "BigNeuron", "synthetic_zbfwb": "ZBFWB"}
# per preset: the benchmark, the paper's 3D U-Net F1 and its nnU-Net F1 (the calibration table's columns)
PAPER = {p: (BENCHMARKS[p], f1["unet3d"], f1["nnunet_style"]) for p, f1 in PAPER_SEGMENTER_F1.items()}
N_TEST = {"synthetic_cwmbs_weak": 8, "synthetic_cwmbs_noise": 4, "synthetic_bigneuron": 8, "synthetic_zbfwb": 4}
SEGMENTERS = {"unet3d": "3D U-Net (shipped CPU checkpoint)",
              "nnunet_style": "nnU-Net-style (shipped CPU checkpoint, the U-Net's recipe and budget)",
              "otsu": "naive floor (Otsu)"}
PROTOCOLS = ("root_seeded", "full_volume")
KEYS = ("PRE", "REC", "F1", "SD", "SSD")


def _scored(row: dict) -> str:
    """``3 of 8`` for a preset's test split; ``8`` for fresh volumes (as many drawn as scored)."""
    return str(row["n"]) if row["n_test"] is None else f"{row['n']} of {row['n_test']}"


def standins_table(rows_dir: Path, out: Path, fresh_seed: int | None = None) -> str:
    """Collect the rows ``python evaluate.py ... out_dir=<rows_dir>/<preset>_<segmenter>`` wrote into
    ``standins.md`` and ``standins.csv`` under ``out`` (with date and commit); returns the Markdown.
    ``fresh_seed``: the rows are of volumes rendered with that dataset seed (run.sh step ``fresh``), not of
    the preset's test split, and the header says so."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=project_root()).stdout.strip()
    table = []
    for preset in PRESETS:
        bench, unet, nnunet = PAPER[preset]
        for seg in SEGMENTERS:
            # one JSON per (case, protocol), written as each is scored: a run cut short still counts what it scored
            rows = [json.loads(f.read_text()) for f in
                    sorted((rows_dir / f"{preset}_{seg}" / "rows").glob(f"*/test/{seg}/initial-*.json"))]
            for protocol in PROTOCOLS:
                sel = [r for r in rows if r["protocol"] == protocol]
                if not sel:
                    continue
                # the evaluation tables' means: an empty trace (SD = inf) is counted apart, not averaged in
                means = summarize(sel, group="protocol", metrics=KEYS)[0]
                row = {"preset": preset, "stands_in_for": bench, "segmenter": seg, "protocol": protocol,
                       # fresh volumes are drawn as many as scored (run.sh step fresh), not the preset's split
                       "n": len(sel), "n_test": N_TEST[preset] if fresh_seed is None else None,
                       "cases": " ".join(sorted(r["case"][-3:] for r in sel)),
                       **{k: float(means[k]) for k in KEYS},
                       "paper_unet3d_F1": unet, "paper_nnunet_F1": nnunet}
                row["F1_minus_paper_unet3d"] = 100 * row["F1"] - unet
                table.append(row)
    out.mkdir(parents=True, exist_ok=True)
    if not table:
        raise InputError("no stand-in rows found (run experiments/standins/run.sh steps masks and eval "
                         "first)", rows_dir)
    write_rows_csv(out / "standins.csv", table)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    volumes = (f"test volumes rendered with dataset seed {fresh_seed} (never used by the project: a new user's first "
               "stacks)" if fresh_seed is not None else "the test split")
    lines = ["# SYNTHETIC stand-ins vs the paper's initial-mask rows ("
             + (f"fresh volumes, seed {fresh_seed}" if fresh_seed is not None else "test splits") + ")", "",
             f"Made {stamp} at commit {commit} by `bash experiments/standins/run.sh` (step "
             f"`{'fresh' if fresh_seed is not None else 'table'}`). Every row "
             "is a generated SYNTHETIC stand-in, never a BigNeuron/CWMBS/ZBFWB result; the paper columns are "
             f"its Tables 1-2 on the real benchmarks, for calibration only. Initial masks of {volumes} "
             "(threshold chosen on the val split, every component kept), traced by APP2: root_seeded (from the "
             "mask voxel nearest the gold root, the headline, as for DIADEM) and full_volume (APP2's own root). "
             "PRE/REC/F1 in %, SD/SSD in voxels, means over the test volumes (SD/SSD over those with a non-empty "
             "trace: a root-seeded APP2 that traces nothing has SD = inf).", "",
             "| preset (SYNTHETIC) | stands in for | segmenter | protocol | test volumes scored | PRE | REC | F1 | SD "
             "| SSD | paper 3D U-Net F1 | F1 - paper U-Net | paper nnU-Net F1 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['preset']} | {r['stands_in_for']} | {SEGMENTERS[r['segmenter']]} | {r['protocol']} | "
                     f"{_scored(r)} ({r['cases']}) | {100 * r['PRE']:.2f} | {100 * r['REC']:.2f} | "
                     f"{100 * r['F1']:.2f} | "
                     f"{r['SD']:.2f} | {r['SSD']:.2f} | {r['paper_unet3d_F1']:.2f} | "
                     f"{r['F1_minus_paper_unet3d']:+.2f} | {r['paper_nnunet_F1']:.2f} |")
    with atomic_path(out / "standins.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    return "\n".join(lines) + "\n"
