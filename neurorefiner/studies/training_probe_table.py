"""The training probe's tables: the ``<name>.json`` scores :mod:`neurorefiner.studies.editor_training_probe` left
in one folder, put in one Markdown table (``summary.md`` beside them).

- :func:`write_probe_table`: one row per checkpoint and change threshold, each checkpoint labelled with what it
  is (``neurorefiner study probe-table FOLDER name="what it is" ...``; the budget and fusion probes).
- :func:`write_loss_probe_table`: the loss probes' table, one row per loss variant with its training cost
  (steps and CPU minutes from the run's ``progress.json``, kept beside the scores) in a fixed order
  (``neurorefiner study loss-probe-table``; ``experiments/toporefinenet/loss_probe.sh``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.evaluation.tables import write_markdown

TARGETS = ">= 0.60 | >= 0.40 | >= 0.95 | >= 0.90"
LOSS_VARIANTS = {"shipped_stage1": "shipped stage 1 (the start of every variant, 0 steps)",
                 "mask_edit10": "loss on the mask, edit weight 10",
                 "residual_edit10": "loss on the change (residual), edit weight 10",
                 "residual_edit30": "residual, edit weight 30",
                 "residual_cldice": "residual, edit weight 10, + 0.5 SoftclDice"}


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def reconnected(summary: Sequence[dict], kind: str) -> float | None:
    rows = [s for s in summary if s["kind"] == kind and s["variant"] == "correct"]
    return rows[0]["reconnected"] if rows else None


def probe_table(folder: Path, described: Mapping[str, str]) -> list[str]:
    """The table's lines: one per checkpoint of ``described`` (name -> what it is, in table order) and change
    threshold; a name without a json is left out and said so."""
    lines = ["| checkpoint | what | change threshold | raw gap filled, synthetic breaks | raw gap filled, real breaks "
             "| wrong place unchanged | opposite unchanged | synthetic breaks reconnected (raw) |",
             "|---|---|---|---|---|---|---|---|"]
    missing, items = [], None
    for name, what in described.items():
        path = Path(folder) / f"{name}.json"
        if not path.exists():
            missing.append(name)
            continue
        d = json.loads(path.read_text())
        items = d["items"]
        by_t = d.get("by_threshold") or {f"{d.get('threshold', 0.5):g}": {"headline": d["headline"],
                                                                         "summary": d["summary"]}}
        for t, v in by_t.items():
            head = " | ".join(fmt(x) for x in v["headline"].values())
            lines.append(f"| {name} | {what} | {t} | {head} | {fmt(reconnected(v['summary'], 'break'))} |")
    lines += [f"| target | | | {TARGETS} | |", "", f"Held-out defects per kind: {items}."]
    if missing:
        lines.append(f"Not scored (no json): {', '.join(missing)}.")
    return lines


def write_probe_table(folder: Path, described: Mapping[str, str], out: Path | None = None) -> str:
    """:func:`probe_table` written to ``out`` (default ``FOLDER/summary.md``); returns the text."""
    text = "\n".join(probe_table(folder, described)) + "\n"
    write_markdown(out or Path(folder) / "summary.md", text)
    return text


def write_loss_probe_table(results: Path | None = None, runs: Path | None = None) -> str:
    """The loss-probe table (``<results>/summary.md``) from each variant's scores (``<name>.json``) and its
    training cost (``<runs>/<name>/progress.json``, copied beside the scores as ``<name>_progress.json`` so the
    table can be rebuilt once the runs are gone). Defaults: ``experiments/toporefinenet/results/loss_probe`` and
    ``outputs/toporefinenet_probes`` under the project. Returns the text."""
    from neurorefiner.paths import project_root

    results = Path(results) if results else project_root() / "experiments" / "toporefinenet" / "results" / "loss_probe"
    runs = Path(runs) if runs else project_root() / "outputs" / "toporefinenet_probes"
    rows, items = [], None
    for name, what in LOSS_VARIANTS.items():
        score = results / f"{name}.json"
        if not score.exists():
            continue
        d = json.loads(score.read_text())
        prog = runs / name / "progress.json"
        if prog.exists():
            shutil.copy(prog, results / f"{name}_progress.json")
        kept = results / f"{name}_progress.json"
        p = json.loads(kept.read_text())["current"] if kept.exists() else None
        cost = f"{p['steps']} / {p['cpu_s'] / 60:.1f}" if p else "0 / 0"
        rows.append(f"| {name} | {what} | {cost} | " + " | ".join(fmt(v) for v in d["headline"].values()) + " |")
        items = d["items"]
    if not rows:
        raise InputError(f"no scores of any loss variant ({', '.join(LOSS_VARIANTS)}.json) here", results)
    lines = ["| variant | what | steps / CPU-min | raw gap filled, synthetic breaks | raw gap filled, real breaks | "
             "wrong place unchanged | opposite unchanged |", "|---|---|---|---|---|---|---|", *rows,
             f"| target | | | {TARGETS} |", "", f"Held-out defects per kind: {items}."]
    text = "\n".join(lines) + "\n"
    write_markdown(results / "summary.md", text)
    return text
