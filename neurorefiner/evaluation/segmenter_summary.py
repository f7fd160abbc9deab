"""The "per segmenter and dataset" table: every baseline segmenter's own test row (the post-processing its
checkpoint records) on DIADEM and on each SYNTHETIC preset, beside the naive floor, with the Betti-0 excess of
its threshold-only masks (what refinement starts from) and the training wall time from its card.

Nothing is computed here but means: the per-case rows come from the tables ``neurorefiner make segmenter-rows``
wrote (DIADEM: ``diadem_test_all_cases.csv``; presets: ``synthetic/<preset>_test_cases.csv``), the
post-processing, steps and wall time from each network's card (the file the training command wrote beside its
rows). A card whose recorded post-processing has no row in its table is an error, not a silent gap: the table
is stale. Command: ``neurorefiner make segmenter-summary``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.evaluation.segmenter_rows import FLOOR_EVERY, FLOOR_LARGEST, own_label, raw_label, read_rows

ARCHS = ("unet3d", "nnunet_style", "vnet", "unetr", "swinunetr", "sgsnet_style", "gbpnet_style", "adtlnet_style")
VARIANTS = ("prior",)  # rows "<arch>:prior", files "<preset>_<arch>_prior_*"
FLOORS = (FLOOR_LARGEST, FLOOR_EVERY)
PRESETS = ("synthetic_cwmbs_weak", "synthetic_cwmbs_noise", "synthetic_bigneuron", "synthetic_zbfwb")
METRICS = ("PRE", "REC", "F1", "SD", "SSD", "MES")
CSV_KEYS = ("dataset", "segmenter", "post", "cases", *METRICS, "b0_excess", "b0_excess_raw", "steps", "wall_s",
            "resumed")
SHIPPED_DIADEM_CARD = "unet3d_diadem_cpu.md"


@dataclass(frozen=True)
class Source:
    """Where one dataset's rows and cards are."""

    dataset: str
    title: str
    cases_csv: Path
    cards: dict[str, Path]  # arch (or arch:variant) -> card


def default_sources(tables: Path, shipped: Path) -> list[Source]:
    """DIADEM and every preset as the segmenter experiments lay them out under ``tables``: DIADEM's rows in
    ``diadem_test_all_cases.csv`` and cards in ``diadem/<arch>_card.md``, the shipped U-Net's card under
    ``shipped`` (the checkpoints folder); the presets' in ``synthetic/`` (:func:`preset_source`)."""
    diadem_cards = {a: tables / "diadem" / f"{a}_card.md" for a in ARCHS}
    diadem_cards["unet3d"] = shipped / SHIPPED_DIADEM_CARD
    out = [Source("diadem", "DIADEM test, OP_7-OP_9 (real data)", tables / "diadem_test_all_cases.csv",
                  diadem_cards)]
    out += [preset_source(preset, tables / "synthetic") for preset in PRESETS]
    return out


def preset_source(preset: str, tables: Path) -> Source:
    """A SYNTHETIC preset's table and cards as run_synthetic.sh names them under ``tables``."""
    return Source(preset, f"{preset} test (SYNTHETIC data)", tables / f"{preset}_test_cases.csv",
                  {name: tables / f"{preset}_{name.replace(':', '_')}_card.md"
                   for a in ARCHS for name in (a, *(f"{a}:{v}" for v in VARIANTS))})


def read_card(path: Path) -> dict:
    """Recorded post-processing, steps and `fit` wall time of a training card (provenance_markdown's format)."""
    text = path.read_text()
    post = re.search(r"post-processing recorded for inference: (\{[^}]*\})", text)
    if not post:
        raise InputError("no recorded post-processing in this card", path)
    steps = re.search(r"steps: (\d+) optimiser steps", text)
    wall = re.search(r"wall time of the last `fit` call: (\d+) s on CPU(?:, torch threads: |\s*\()(\d+)", text)
    # a resumed fit's wall time covers only the steps after the restart: the table must not pass it off as the whole
    resumed = re.search(r"optimiser steps, [^\n]*\(resumed from ", text) is not None
    return {"post": ast.literal_eval(post.group(1)), "steps": int(steps.group(1)) if steps else None,
            "wall_s": int(wall.group(1)) if wall else None, "threads": int(wall.group(2)) if wall else None,
            "resumed": resumed}


def _means(rows: list[dict], method: str) -> dict | None:
    rs = [r for r in rows if r["method"] == method]
    if not rs:
        return None
    return {"cases": len(rs), **{m: float(np.mean([r[m] for r in rs])) for m in (*METRICS, "b0_excess")}}


def summarise(source: Source, val_only: list[str] | None = None) -> list[dict]:
    """The floor rows, then one row per segmenter that has a card, in ARCHS order (a variant after its network).

    A card whose segmenter has no row in the table at all is a run scored on the val split only (extra seeds,
    run_synthetic.sh STEP=card): it is listed in ``val_only`` (if given) and gets no row. A card whose segmenter
    has rows, but none with the recorded post-processing, is a stale table: an error."""
    rows = read_rows(source.cases_csv)
    out = []
    for floor in FLOORS:
        m = _means(rows, floor)
        if m:
            out.append({"dataset": source.dataset, "segmenter": floor, "post": "", **m, "b0_excess_raw": None,
                        "steps": None, "wall_s": None, "resumed": False})
    for arch, card_path in source.cards.items():
        if not card_path.exists():
            continue
        card = read_card(card_path)
        if not any(r["method"].startswith(f"{arch} (") for r in rows):
            if val_only is not None:
                val_only.append(arch)
            continue
        own = _means(rows, own_label(arch, card["post"]) + " -> APP2")
        if own is None:
            raise InputError(f"{arch}'s card records {card['post']} but {source.cases_csv.name} has no row for it "
                             f"(score it again with segmenter-rows)", card_path)
        raw = _means(rows, raw_label(arch, card["post"]) + " -> APP2")
        p = card["post"]
        post = (f"thr {p['threshold']}" + (f", bridge {p['bridge_um']:g} um" if p.get("bridge_um") else "")
                + (", largest" if p.get("keep_largest") else ""))
        out.append({"dataset": source.dataset, "segmenter": arch, "post": post, **own,
                    "b0_excess_raw": raw["b0_excess"] if raw else None, "steps": card["steps"],
                    "wall_s": card["wall_s"], "resumed": card["resumed"]})
    return out


def _fmt(v: float | int | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:.0f}"


def markdown(sources: list[Source], tables: list[list[dict]], val_only: list[list[str]] | None = None) -> str:
    lines = ["# Every baseline segmenter, per dataset (test splits)", "",
             "Made by `neurorefiner make segmenter-summary` from the per-case tables of "
             "`neurorefiner make segmenter-rows` "
             "and the training cards. Each network's row uses the post-processing its checkpoint records (DIADEM: "
             "the shipped U-Net's cross-validated choice; the other DIADEM networks the setting an earlier U-Net "
             "chose on OP_6, threshold 0.6 and keep largest; synthetic presets: chosen on each preset's val "
             "split). Means over test cases; SD/SSD in voxels; PRE/REC/F1/MES with tau 4 voxels. b0 excess (raw) "
             "= connected components of the threshold-only mask (every component, what refinement starts from) "
             "minus those of the gold mask. Train s = wall time of the one-thread `fit` call from the card, "
             "measured under whatever else ran on the two cores; \"(resumed)\" marks a training that was "
             "interrupted and resumed, whose card times only the part after the restart. `<network>:prior` = the "
             "same network and recipe with its output layer started at foreground probability 0.01 "
             "(`segmentation.module.foreground_prior`). SYNTHETIC presets are generated stand-ins, never "
             "BigNeuron/CWMBS/ZBFWB results.", ""]
    for i, (source, table) in enumerate(zip(sources, tables, strict=True)):
        lines += [f"## {source.title}", "",
                  "| segmenter | post-processing | PRE | REC | F1 | SD | SSD | MES | b0 excess (raw) | steps | "
                  "train s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in table:
            lines.append(f"| {r['segmenter']} | {r['post']} | " + " | ".join(_fmt(r[m]) for m in METRICS)
                         + f" | {_fmt(r['b0_excess_raw'], 0)} | {_fmt(r['steps'])} | {_fmt(r['wall_s'])}"
                         + (" (resumed)" if r["resumed"] else "") + " |")
        if val_only and val_only[i]:
            lines += ["", "Trained and scored on the val split only, no test rows "
                      "(the val-split comparison, `prior_compare_<preset>.md`): "
                      + ", ".join(val_only[i]) + "."]
        lines.append("")
    return "\n".join(lines)


def plot(sources: list[Source], tables: list[list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    fig, axes = plt.subplots(2, len(sources), figsize=(3.2 * len(sources), 6), squeeze=False)
    for j, (source, table) in enumerate(zip(sources, tables, strict=True)):
        names = [r["segmenter"].replace("naive floor: Otsu+TEASAR, ", "floor ") for r in table]
        for i, metric in enumerate(("F1", "SSD")):
            ax = axes[i][j]
            colours = ["0.6" if n.startswith("floor") else "C0" for n in names]
            ax.barh(range(len(table)), [r[metric] for r in table], color=colours)
            ax.set_yticks(range(len(table)), names, fontsize=7)
            ax.invert_yaxis()
            if metric == "F1":
                ax.set_xlim(0, 1)
            ax.set_xlabel(metric + (" (voxels, lower is better)" if metric == "SSD" else " (higher is better)"),
                          fontsize=8)
            if i == 0:
                ax.set_title(source.title.replace(" test", "\ntest"), fontsize=8)
    fig.tight_layout()
    save_figure_atomic(fig, path)


def write_summary(sources: list[Source], out: Path, png: bool = True) -> str:
    """``summary.md``, ``summary.csv`` (and ``summary.png``) under ``out`` from the sources whose table exists;
    returns the markdown."""
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

    sources = [s for s in sources if s.cases_csv.exists()]
    if not sources:
        raise InputError("no rows table of any dataset here (diadem_test_all_cases.csv, synthetic/*_test_cases.csv)")
    val_only: list[list[str]] = [[] for _ in sources]
    tables = [summarise(s, v) for s, v in zip(sources, val_only, strict=True)]
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(sources, tables, val_only)
    write_markdown(out / "summary.md", text)
    write_rows_csv(out / "summary.csv", [r for table in tables for r in table], CSV_KEYS, ignore_extra=True)
    if png:
        plot(sources, tables, out / "summary.png")
    return text
