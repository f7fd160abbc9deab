"""The card (``README.md``) of an adapted refiner, written from its record (``adapt.json``), so no figure on it is
typed in: the one command that rebuilds it, the splits it read, the time each step took, the editor's validation
figures and how to use the folder."""

from __future__ import annotations

from typing import Any

from neurorefiner.adaptation.settings import check_dataset


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def rebuild_command(settings: dict[str, Any], out: str) -> str:
    """The ``neurorefiner adapt`` line that makes this folder (options at their defaults left out)."""
    from neurorefiner.adaptation.settings import AdaptSettings

    default = AdaptSettings(dataset=settings["dataset"]).record()
    parts = [f"neurorefiner adapt --dataset {settings['dataset']} --out {out}"]
    for key, value in settings.items():
        if key in ("dataset", "extra") or default.get(key) == value:
            continue
        shown = ",".join(value) if isinstance(value, list) else value
        parts.append(f"--{key.replace('_', '-')} {shown}")
    return " ".join(parts)


def _as_given(command: str, out: str) -> str:
    """A step's command with the folder as the user named it (steps run with its absolute path)."""
    from pathlib import Path

    return command.replace(str(Path(out).resolve()), out)


def adapted_card(record: dict[str, Any], out: str, commit: str) -> str:
    """Markdown of the folder's card."""
    settings, steps = record["settings"], record.get("steps", {})
    dataset = settings["dataset"]
    train, val = check_dataset(dataset)
    editor = steps.get("editor", {})
    lines = [f"# The refiner adapted to {dataset}", "",
             f"Made at commit {commit} by", "", "```bash", rebuild_command(settings, out), "```", "",
             "Use it (the shipped refiner is the default; this folder replaces its editor and judge):", "",
             "```bash", f"python refine.py refiner=adapted refiner_dir={out} image=stack.tif mask=seg.tif",
             f"python evaluate.py dataset={dataset} refiner=adapted refiner_dir={out} "
             "'methods=[initial,neurorefiner]'", "```", "",
             f"Learned from the `{train}` split" + (f" (validation: `{val}`)" if val else
                                                    " (its last case validates)")
             + f"; segmenters' masks: {', '.join(settings['segmenters'])}. Test cases are never read.", "",
             "| step | wall | CPU |", "|---|---|---|"]
    for name, info in steps.items():
        lines.append(f"| {name} | {_hours(info['wall_s'])} | {_hours(info['cpu_s'])} |")
    total_wall = sum(s["wall_s"] for s in steps.values())
    total_cpu = sum(s["cpu_s"] for s in steps.values())
    lines += [f"| all | {_hours(total_wall)} | {_hours(total_cpu)} |", ""]
    if editor:
        lines += ["## Editor (`editor.ckpt`)", "",
                  f"Fine-tuned from the shipped `checkpoints/toporefinenet.ckpt` for {editor.get('steps')} steps "
                  "(`conf/experiment/adapt_editor.yaml`); the editor alone is retrained by", "", "```bash",
                  _as_given(str(editor.get("command")), out), "```", "",
                  "Validation (crops of the segmenters' errors in the validation cases; val/dice_input is the "
                  "unedited mask's):", ""]
        lines += [f"- {k}: {v}" for k, v in sorted(editor.get("validation", {}).items())]
        lines.append("")
    for name, command in steps.get("baselines", {}).get("baselines", {}).items():
        lines += [f"## Baseline `{name}.ckpt`", "", "Trained from scratch on the same stage-1 defects; its card: "
                  f"`{name}.md`. Use it with `method_registry.{name}.checkpoint={out}/{name}.ckpt`; retrain it alone:",
                  "", "```bash", _as_given(command, out), "```", ""]
    if "judge" in steps:
        lines += ["## Judge (`judge.json`)", "", "Its card, with the out-of-fold precision and recall at the "
                  "shipped thresholds: `judge.md`.", ""]
    return "\n".join(lines + choose_section(steps.get("choose", {}), out))


def choose_section(choose: dict[str, Any], out: str) -> list[str]:
    """The chosen policy and the validation table of every policy tried (``choose.md``, the classical refiner's
    row among them), as the choose step wrote it."""
    from pathlib import Path

    if not choose:
        return []
    table = Path(out) / str(choose.get("table", "choose.md"))
    body = table.read_text().split("\n", 2)[-1] if table.exists() else f"(`{table}` is missing)\n"
    return ["## Policy (`plans.json`), chosen on validation", "",
            f"Chosen: **{choose.get('chosen')}** ({choose.get('kind')}, validation F1 {choose.get('mean_f1')}); "
            "`refiner=...` runs with it.", "", body]
