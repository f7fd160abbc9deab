"""The Table 6 variants' training figures as a Markdown table, for ``experiments/table_6_toporefinenet/README.md``.

Each ``train.py experiment=table_6/<variant> stage=N`` run leaves ``toporefinenet_stageN.json`` beside its
checkpoint (``checkpoints/runs/table_6/<variant>/``, not in git): the final validation figures and the steps and
wall time of the fit. Reading them back, rather than copying numbers by hand, keeps the README true to the
checkpoints the table scored. Command: ``neurorefiner study training-figures``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from neurorefiner.errors import InputError

VARIANTS = ("adaln", "cdp", "cab", "hashing", "scratch_two_stage", "scratch_one_stage")
COLUMNS = ("val/dice", "val/dice_input", "val/adherence", "val/betti0_error", "val/changed_voxels")


def default_runs() -> Path:
    """Where ``train.py experiment=table_6/<variant>`` puts its checkpoints: ``checkpoints/runs/table_6``."""
    from neurorefiner.paths import project_root

    return project_root() / "checkpoints" / "runs" / "table_6"


def _cell(value: object, digits: int = 4) -> str:
    """A figure as text; a missing or non-finite one as a dash (a stage that was not run or not logged)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"
    return f"{v:.{digits}f}" if math.isfinite(v) else "–"


def rows(runs: Path) -> list[str]:
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


def training_figures(runs: Path | None = None) -> str:
    """The table (header and one line per variant and stage); an error naming ``runs`` when it holds none."""
    runs = Path(runs) if runs else default_runs()
    lines = rows(runs)
    if not lines:
        raise InputError("no metrics files here; train the variants first (experiments/table_6_toporefinenet/run.sh)",
                         runs)
    head = ["| variant | stage | steps | fit (min) | " + " | ".join(COLUMNS) + " |", "|" + "---|" * (4 + len(COLUMNS))]
    return "\n".join([*head, *lines]) + "\n"
