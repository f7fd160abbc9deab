"""The loss-probe table (experiments/toporefinenet/results/loss_probe/summary.md) from what loss_probe.sh wrote:
each variant's scores (<name>.json, neurorefiner.studies.editor_training_probe) and its training cost
(outputs/toporefinenet_probes/<name>/progress.json, copied beside the scores).
Run: python experiments/toporefinenet/loss_probe_table.py"""

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "toporefinenet" / "results" / "loss_probe"
RUNS = ROOT / "outputs" / "toporefinenet_probes"
ORDER = ["shipped_stage1", "mask_edit10", "residual_edit10", "residual_edit30", "residual_cldice"]
WHAT = {"shipped_stage1": "shipped stage 1 (the start of every variant, 0 steps)",
        "mask_edit10": "loss on the mask, edit weight 10",
        "residual_edit10": "loss on the change (residual), edit weight 10",
        "residual_edit30": "residual, edit weight 30",
        "residual_cldice": "residual, edit weight 10, + 0.5 SoftclDice"}


def fmt(v):
    return "-" if v is None else f"{v:.3f}"


rows = []
for name in ORDER:
    score = RESULTS / f"{name}.json"
    if not score.exists():
        continue
    d = json.loads(score.read_text())
    prog = RUNS / name / "progress.json"
    if prog.exists():
        shutil.copy(prog, RESULTS / f"{name}_progress.json")
    kept = RESULTS / f"{name}_progress.json"
    p = json.loads(kept.read_text())["current"] if kept.exists() else None
    cost = f"{p['steps']} / {p['cpu_s'] / 60:.1f}" if p else "0 / 0"
    h = list(d["headline"].values())
    rows.append(f"| {name} | {WHAT[name]} | {cost} | " + " | ".join(fmt(v) for v in h) + " |")
    items = d["items"]
lines = ["| variant | what | steps / CPU-min | raw gap filled, synthetic breaks | raw gap filled, real breaks | "
         "wrong place unchanged | opposite unchanged |", "|---|---|---|---|---|---|---|", *rows,
         "| target | | | >= 0.60 | >= 0.40 | >= 0.95 | >= 0.90 |", "",
         f"Held-out defects per kind: {items}."]
(RESULTS / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
