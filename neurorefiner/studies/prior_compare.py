"""Does starting the output layer at a low foreground probability help every network, or only some?

``segmentation.module.foreground_prior`` (opt-in) rescued GBP-Net-style on synthetic_cwmbs_weak and raised the
U-Net's validation Dice but not its traces. Whether it should become the default needs every network with and
without it; this table puts the two side by side, network by network, on what the recipe is allowed to look at
(the preset's val split: best validation Dice from the training card, and the traces of the val-chosen
post-processing from ``neurorefiner study choose-postprocess``) and, last, the test rows the tables report (for
reading, not for deciding).

Nothing is computed here but means over the files the runs wrote (run_synthetic.sh):
- cards: ``<tables>/<preset>_<arch>[_seed<n>][_prior]_card.md``
- val choice: ``<tables>/<preset>_<arch>[_seed<n>][_prior]_postprocess_val.{json,csv}``
- test rows: ``<tables>/<preset>_test_cases.csv`` through the summary (the recipe's seed 0 only)

SYNTHETIC presets are generated stand-ins, never BigNeuron/CWMBS/ZBFWB results. Command: ``neurorefiner
study prior-compare``.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.studies.segmenter_summary import ARCHS, PRESETS, preset_source, summarise

KEYS = ("best_val_dice", "val_cldice", "val_post", "val_F1", "val_SSD", "test_F1", "test_SSD")


def card_validation(path: Path) -> dict:
    """Best validation Dice and the final validation clDice a training card records."""
    m = re.search(r"clDice ([0-9.]+|nan); best validation Dice ([0-9.]+|nan)", path.read_text())
    if not m:
        raise InputError("no validation line (clDice ...; best validation Dice ...) in this card", path)
    return {"val_cldice": float(m.group(1)), "best_val_dice": float(m.group(2))}


def val_choice(json_path: Path, csv_path: Path) -> dict:
    """The val-chosen post-processing and the mean val traces it gave (`neurorefiner study choose-postprocess`
    files)."""
    chosen = json.loads(json_path.read_text())
    with open(csv_path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if float(r["threshold"]) == chosen["threshold"]
                and float(r["bridge_um"]) == float(chosen.get("bridge_um") or 0.0)]
    if not rows:
        raise InputError(f"no val row for the chosen setting {chosen}", csv_path)
    post = f"thr {chosen['threshold']:g}" + (f" + {chosen['bridge_um']:g} um" if chosen.get("bridge_um") else "")
    return {"val_post": post, "val_F1": float(np.mean([float(r["F1"]) for r in rows])),
            "val_SSD": float(np.mean([float(r["SSD"]) for r in rows]))}


def stem_of(arch: str, seed: int, prior: bool) -> str:
    """run_synthetic.sh's FILE: seed 0 is the recipe's own run (no seed in the name)."""
    return arch + (f"_seed{seed}" if seed else "") + ("_prior" if prior else "")


def compare(preset: str, tables: Path, seeds: tuple[int, ...] = (0,)) -> list[dict]:
    """One row per network, seed and variant that has a card; missing parts stay None. Test columns only for
    seed 0 (the tables hold one row per recipe)."""
    source = preset_source(preset, tables)
    test = {r["segmenter"]: r for r in summarise(source)} if source.cases_csv.exists() else {}
    out = []
    for arch in ARCHS:
        for seed in seeds:
            for prior in (False, True):
                stem = tables / f"{preset}_{stem_of(arch, seed, prior)}"
                card = Path(f"{stem}_card.md")
                if not card.exists():
                    continue
                row = {"network": arch, "seed": seed, "prior": prior, **dict.fromkeys(KEYS)}
                row.update(card_validation(card))
                if Path(f"{stem}_postprocess_val.json").exists():
                    row.update(val_choice(Path(f"{stem}_postprocess_val.json"),
                                          Path(f"{stem}_postprocess_val.csv")))
                name = arch + (":prior" if prior else "")
                if seed == 0 and name in test:
                    row["test_F1"], row["test_SSD"] = test[name]["F1"], test[name]["SSD"]
                out.append(row)
    return out


def paired(rows: list[dict]) -> list[tuple[dict, dict]]:
    """(plain, prior) pairs of the same network and seed, where both ran."""
    by = {(r["network"], r["seed"], r["prior"]): r for r in rows}
    return [(r, by[(r["network"], r["seed"], True)]) for r in rows
            if not r["prior"] and (r["network"], r["seed"], True) in by]


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else (f"{v:.{digits}f}" if abs(v) < 100 else f"{v:.0f}")


def _d(a: float | None, b: float | None, digits: int = 3) -> str:
    return "-" if a is None or b is None else f"{b - a:+.{digits}f}"


def markdown(preset: str, rows: list[dict]) -> str:
    pairs = paired(rows)
    seeds = " ".join(str(s) for s in sorted({r["seed"] for r in rows})) or "0"
    lines = [f"# Foreground prior 0.01 vs none, every network, {preset} (SYNTHETIC data)", "",
             "Made by `neurorefiner study prior-compare --preset "
             f"{preset}{''.join(f' --seed {s}' for s in seeds.split())}` from the cards and val choices "
             "run_synthetic.sh wrote (plain: "
             "`ARCH=<net> STEP=\"train choose eval\"`; prior: the same with `PRIOR=0.01`; seed n > 0: `SEED=n` "
             "and `STEP=\"train choose card\"`, no test rows). 256 steps, one torch thread each. Val columns are "
             "what a recipe may decide on: best validation Dice (sliding window, threshold 0.5, the checkpoint's "
             "pick) and the traces of the post-processing chosen on the val split (mask -> APP2, F1 with tau 4 "
             "voxels, SSD in voxels, mean over the val volumes). Test columns are the tables' rows, for reading "
             "only.", "",
             "| network | seed | best val Dice | (prior) | diff | val F1 | (prior) | diff | val SSD | (prior) "
             "| val post | (prior) | test F1 | (prior) | test SSD | (prior) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for plain, prior in pairs:
        lines.append(
            f"| {plain['network']} | {plain['seed']} | {_f(plain['best_val_dice'])} | {_f(prior['best_val_dice'])} | "
            f"{_d(plain['best_val_dice'], prior['best_val_dice'])} | {_f(plain['val_F1'])} | {_f(prior['val_F1'])} | "
            f"{_d(plain['val_F1'], prior['val_F1'])} | {_f(plain['val_SSD'], 1)} | {_f(prior['val_SSD'], 1)} | "
            f"{plain['val_post'] or '-'} | {prior['val_post'] or '-'} | {_f(plain['test_F1'])} | "
            f"{_f(prior['test_F1'])} | {_f(plain['test_SSD'], 1)} | {_f(prior['test_SSD'], 1)} |")
    dice = [(a["best_val_dice"], b["best_val_dice"]) for a, b in pairs]
    f1 = [(a["val_F1"], b["val_F1"]) for a, b in pairs if a["val_F1"] is not None and b["val_F1"] is not None]
    lines += ["", f"Pairs (network and seed) with both runs: {len(pairs)}, networks: "
              f"{len({a['network'] for a, _ in pairs})}. The prior raises best val Dice for "
              f"{sum(b > a for a, b in dice)} of {len(dice)}"
              + (f" (median change {np.median([b - a for a, b in dice]):+.3f})" if dice else "")
              + f" and val trace F1 for {sum(b > a for a, b in f1)} of {len(f1)}"
              + (f" (median change {np.median([b - a for a, b in f1]):+.3f})." if f1 else "."), ""]
    return "\n".join(lines)


def plot(preset: str, rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    pairs = paired(rows)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    for ax, key, label in ((axes[0], "best_val_dice", "best val Dice"), (axes[1], "val_F1", "val trace F1")):
        for plain, prior in pairs:
            if plain[key] is None or prior[key] is None:
                continue
            colour = f"C{ARCHS.index(plain['network'])}"
            ax.plot([0, 1], [plain[key], prior[key]], "-o" if plain["seed"] == 0 else "--s", color=colour,
                    label=plain["network"] + (f" seed {plain['seed']}" if plain["seed"] else ""))
        ax.set_xticks([0, 1], ["no prior", "prior 0.01"])
        ax.set_xlim(-0.3, 1.3)
        ax.set_ylabel(label + " (higher is better)")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"{preset} (SYNTHETIC); solid: the recipe's seed, dashed: other seeds", fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path)


def write_prior_compare(preset: str, tables: Path, out: Path, seeds: tuple[int, ...] = (0,)) -> str:
    """``prior_compare_<preset>.md``, ``.csv`` and ``.png`` under ``out``; returns the markdown."""
    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

    if preset not in PRESETS:
        raise InputError(f"--preset must be one of {', '.join(PRESETS)}, got {preset!r}")
    if any(s < 0 for s in seeds):
        raise InputError(f"--seed takes whole numbers 0 or more, got {list(seeds)}")
    if not Path(tables).is_dir():
        raise InputError("no such tables folder", Path(tables))
    rows = compare(preset, Path(tables), tuple(seeds))
    out.mkdir(parents=True, exist_ok=True)
    text = markdown(preset, rows)
    stem = out / f"prior_compare_{preset}"
    write_markdown(Path(f"{stem}.md"), text)
    write_rows_csv(Path(f"{stem}.csv"), rows, ["network", "seed", "prior", *KEYS])
    plot(preset, rows, Path(f"{stem}.png"))
    return text
