"""Print the Table 6 variants' training figures as a Markdown table, for this folder's README.

Each ``train.py experiment=table_6/<variant> stage=N`` run leaves ``toporefinenet_stageN.json`` beside its
checkpoint (checkpoints/runs/table_6/<variant>/, not in git): the final validation figures and the steps and
wall time of the fit. Reading them back, rather than copying numbers by hand, keeps the README true to the
checkpoints the table scored.

    .venv/bin/python experiments/table_6_toporefinenet/training_figures.py
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "checkpoints" / "runs" / "table_6"
VARIANTS = ("adaln", "cdp", "cab", "hashing", "scratch_two_stage", "scratch_one_stage")
COLUMNS = ("val/dice", "val/dice_input", "val/adherence", "val/betti0_error", "val/changed_voxels")


def _cell(value: object, digits: int = 4) -> str:
    """A figure as text; a missing or non-finite one as a dash (a stage that was not run or not logged)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return f"{v:.{digits}f}" if math.isfinite(v) else "–"


def rows(runs: Path = RUNS) -> list[str]:
    """One Markdown line per (variant, stage) that has a metrics file, in the table's row order."""
    out = []
    for variant in VARIANTS:
        for stage in (1, 2):
            path = runs / variant / f"toporefinenet_stage{stage}.json"
            if not path.exists():
                continue
            m = json.loads(path.read_text())
            steps = int(float(m.get("train/steps", 0)))
            minutes = float(m.get("train/wall_s", math.nan)) / 60
            out.append(f"| {variant} | {stage} | {steps} | {_cell(minutes, 1)} | "
                       + " | ".join(_cell(m.get(c)) for c in COLUMNS) + " |")
    return out


def main() -> int:
    lines = rows()
    if not lines:
        print(f"no metrics files under {RUNS}; train the variants first (run.sh)", file=sys.stderr)
        return 1
    print("| variant | stage | steps | fit (min) | " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * (4 + len(COLUMNS)))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
