"""Which SYNTHETIC stand-in U-Net to ship: the crop pick made during training, or the candidate (the shipped file,
a shorter schedule, the long run's snapshots) chosen afterwards with its threshold on the whole val volumes. Both
are scored on fresh volumes (a dataset seed the project never used), root-seeded, beside the issue's target (8 F1
points below the paper's 3D U-Net row) and the paper's row. Generated data: never a BigNeuron/CWMBS/ZBFWB result.

``experiments/standins/run_checkpoint_choice.sh`` writes, per preset, ``<preset>_unet3d_candidates_postprocess_val``
(the choice) and ``fresh/<preset>_{chosen,shipped}/per_volume.csv`` (evaluate.py's rows); this module reads them
and writes ``summary.md``/``.csv``.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import summarize, write_markdown, write_rows_csv
from neurorefiner.paths import git_commit
from neurorefiner.studies.standins import PAPER

TARGET_BELOW_PAPER = 8.0  # the target: within 8 F1 points below the paper's 3D U-Net row
WHICH = {"shipped": "shipped checkpoint (picked on label-centred val crops at threshold 0.5)",
         "chosen": "candidate chosen with its threshold on the whole val volumes"}
KEYS = ("PRE", "REC", "F1", "SSD")


def _choice(folder: Path, preset: str) -> tuple[str, str]:
    """(chosen candidate, its val line) from the chooser's files, or ("", "") when the choice is missing."""
    stem = folder / f"{preset}_unet3d_candidates_postprocess_val"
    if not stem.with_suffix(".json").exists():
        return "", ""
    picked = json.loads(stem.with_suffix(".json").read_text())
    found = re.search(r"\*\*Chosen: (.*)\*\* \((F1 [0-9.]+)", stem.with_suffix(".md").read_text())
    name = re.search(r"\*\*Chosen: checkpoint ([^,]+),", stem.with_suffix(".md").read_text())
    return (name.group(1) if name else Path(picked.get("checkpoint", "")).stem,
            f"{found.group(1)}, val {found.group(2)}" if found else "")


def checkpoint_choice_table(folder: Path, presets: list[str]) -> str:
    """Write ``summary.md`` and ``summary.csv`` in ``folder``; return the Markdown."""
    table = []
    for preset in presets:
        if preset not in PAPER:
            raise InputError(f"{preset}: not a stand-in preset ({', '.join(PAPER)})")
        snapshot, val = _choice(folder, preset)
        for which in WHICH:
            path = folder / "fresh" / f"{preset}_{which}" / "per_volume.csv"
            if not path.exists():
                continue
            with open(path, newline="") as fh:
                rows = [r for r in csv.DictReader(fh) if r["protocol"] == "root_seeded" and r["method"] == "initial"]
            if not rows:
                continue
            means = summarize(rows, group="protocol", metrics=KEYS)[0]
            paper = PAPER[preset][1]
            table.append({"preset": preset, "checkpoint": which, "snapshot": snapshot if which == "chosen" else "",
                          "val_choice": val if which == "chosen" else "", "volumes": len(rows),
                          **{k: 100 * float(means[k]) if k != "SSD" else float(means[k]) for k in KEYS},
                          "per_volume_F1": " ".join(f"{100 * float(r['F1']):.0f}" for r in
                                                    sorted(rows, key=lambda r: r["case"])),
                          "target_F1": paper - TARGET_BELOW_PAPER, "paper_unet3d_F1": paper})
    if not table:
        raise InputError("no fresh-volume rows here (run_checkpoint_choice.sh step fresh writes them)", folder)
    write_rows_csv(folder / "summary.csv", table)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# SYNTHETIC stand-in U-Nets: the crop pick vs the candidate chosen on whole val volumes (fresh volumes)",
             "", f"Made {stamp} at commit {git_commit()} by `bash experiments/standins/run_checkpoint_choice.sh`. "
             "Generated SYNTHETIC data, never a BigNeuron/CWMBS/ZBFWB result. Fresh volumes: the preset's test "
             "volumes rendered with dataset seed "
             "2027 (never used by the project). Initial masks at each checkpoint's recorded threshold, every "
             "component kept, traced by APP2 from the mask voxel nearest the gold root. PRE/REC/F1 in %, SSD in "
             "voxels, means over the volumes; the target is the issue's (the paper's 3D U-Net row minus "
             f"{TARGET_BELOW_PAPER:g}).", "",
             "| preset (SYNTHETIC) | checkpoint | val choice | fresh volumes | PRE | REC | F1 | SSD | F1 per volume | "
             "target | paper 3D U-Net |", "|---" * 11 + "|"]
    for r in table:
        what = WHICH[r["checkpoint"]] + (f": {r['snapshot']}" if r["snapshot"] else "")
        lines.append(f"| {r['preset']} | {what} | {r['val_choice'] or '-'} | {r['volumes']} | {r['PRE']:.2f} | "
                     f"{r['REC']:.2f} | **{r['F1']:.2f}** | {r['SSD']:.2f} | {r['per_volume_F1']} | "
                     f"{r['target_F1']:.2f} | {r['paper_unet3d_F1']:.2f} |")
    text = "\n".join(lines) + "\n"
    write_markdown(folder / "summary.md", text)
    return text
