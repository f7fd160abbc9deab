"""The paper's segmenters on a SYNTHETIC stand-in preset at one equal CPU budget, beside the paper's figures.

``experiments/segmenters/run_standins_equal_budget.sh`` trains each network with the stand-in U-Net's recipe at a
stated number of steps, chooses its threshold on val and scores the test split root-seeded into
``<preset>_test_cases.csv`` (rows ``<arch>:<steps>steps (...) -> APP2 from the gold root``). This module reads
those rows, each run's card (training wall time) and val choice, and writes ``<preset>_summary.md``/``.csv``:
one line per network with its budget, the paper's F1 for that network on the benchmark the preset stands in for,
and the gap. Generated data: never a BigNeuron/CWMBS/ZBFWB result.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.segmenter_rows import APP2_BY_PROTOCOL, read_rows
from neurorefiner.evaluation.tables import write_markdown, write_rows_csv
from neurorefiner.studies.standins import PAPER, PAPER_SEGMENTER_F1

NAMES = {"unet3d": "3D U-Net", "nnunet_style": "nnU-Net-style", "swinunetr": "SwinUNETR", "vnet": "V-Net",
         "sgsnet_style": "SGSNet-style", "gbpnet_style": "GBP-Net-style", "adtlnet_style": "ADTL-Net-style"}
ROW = re.compile(r"^(?P<arch>[a-z0-9_]+):(?P<steps>\d+)steps \(threshold (?P<threshold>[0-9.]+)")
SEEDED = f" {APP2_BY_PROTOCOL['root_seeded']}"
KEYS = ("PRE", "REC", "F1", "SSD")


def _card_wall(card: Path) -> float | None:
    """Seconds of the run's ``fit`` call, as its card records them."""
    if not card.exists():
        return None
    found = re.search(r"wall time of the last `fit` call: ([0-9.]+) s", card.read_text())
    return float(found.group(1)) if found else None


def _val_f1(choice_md: Path) -> float | None:
    """Val F1 of the chosen threshold, from the chooser's table."""
    if not choice_md.exists():
        return None
    found = re.search(r"\*\*Chosen: .*\(F1 ([0-9.]+),", choice_md.read_text())
    return float(found.group(1)) if found else None


def equal_budget_table(folder: Path, preset: str) -> str:
    """Write ``<preset>_summary.md`` and ``.csv`` in ``folder`` from its root-seeded test rows; return the text."""
    if preset not in PAPER:
        raise InputError(f"{preset}: not a stand-in preset ({', '.join(PAPER)})")
    rows = [r for r in read_rows(folder / f"{preset}_test_cases.csv") if r["method"].endswith(SEEDED)]
    if not rows:
        raise InputError("no root-seeded rows here (run_standins_equal_budget.sh STEPS=eval writes them)",
                         folder / f"{preset}_test_cases.csv")
    bench = PAPER[preset][0]
    paper = PAPER_SEGMENTER_F1[preset]
    table = []
    for method in dict.fromkeys(r["method"] for r in rows):
        found = ROW.match(method)
        if not found:
            continue
        arch, steps = found["arch"], int(found["steps"])
        sel = [r for r in rows if r["method"] == method]
        traced = [r for r in sel if math.isfinite(r["SSD"])]
        tag = f"{arch}_{steps}steps"
        row = {"segmenter": NAMES.get(arch, arch), "arch": arch, "steps": steps,
               "train_wall_s": _card_wall(folder / f"{preset}_{tag}_card.md"),
               "threshold": float(found["threshold"]),
               "val_F1": _val_f1(folder / f"{preset}_{tag}_postprocess_val.md"),
               "test_volumes": len(sel), "empty_traces": len(sel) - len(traced),
               **{k: 100 * sum(r[k] for r in sel) / len(sel) for k in ("PRE", "REC", "F1")},
               "SSD": sum(r["SSD"] for r in traced) / len(traced) if traced else math.inf,
               "paper_F1": paper.get(arch)}
        row["F1_minus_paper"] = row["F1"] - row["paper_F1"] if row["paper_F1"] is not None else None
        table.append(row)
    table.sort(key=lambda r: -r["F1"])
    write_rows_csv(folder / f"{preset}_summary.csv", table)
    n = max(r["test_volumes"] for r in table)
    lines = [f"# {preset} (SYNTHETIC stand-in for {bench}): the paper's segmenters at one equal CPU budget", "",
             "Generated data, never a BigNeuron/CWMBS/ZBFWB result; the paper column is its Tables 1-2 on the real "
             "benchmark, for calibration only. Each network: the stand-in U-Net's recipe "
             "(`experiment=unet3d_<preset>_cpu`) with the network swapped and the steps cut to the budget shown, one "
             "torch thread; threshold chosen on the val split (0.2-0.6, every component kept, root-seeded); the "
             f"test split ({n} volumes) traced by APP2 from the mask voxel nearest the gold root. PRE/REC/F1 in %, "
             "SSD in voxels over volumes with a non-empty trace. Rows: "
             f"`{preset}_test.md`; command: `bash experiments/segmenters/run_standins_equal_budget.sh` "
             "(its `table` step writes this file).", "",
             "| segmenter | budget (steps) | train wall (s) | threshold (val F1) | test volumes | PRE | REC | F1 | SSD "
             "| paper F1 | F1 - paper |", "|---" * 11 + "|"]
    for r in table:
        wall = f"{r['train_wall_s']:.0f}" if r["train_wall_s"] is not None else "-"
        val = f" ({r['val_F1']:.3f})" if r["val_F1"] is not None else ""
        empty = f" ({r['empty_traces']} trace nothing)" if r["empty_traces"] else ""
        paper_f1 = f"{r['paper_F1']:.2f}" if r["paper_F1"] is not None else "not in the paper's table"
        gap = f"{r['F1_minus_paper']:+.2f}" if r["F1_minus_paper"] is not None else "-"
        lines.append(f"| {r['segmenter']} | {r['steps']:,} | {wall} | {r['threshold']:g}{val} | "
                     f"{r['test_volumes']}{empty} | {r['PRE']:.2f} | {r['REC']:.2f} | **{r['F1']:.2f}** | "
                     f"{r['SSD']:.2f} | {paper_f1} | {gap} |")
    text = "\n".join(lines) + "\n"
    write_markdown(folder / f"{preset}_summary.md", text)
    return text
