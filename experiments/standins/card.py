"""Write the card (.md) of a shipped SYNTHETIC stand-in U-Net from the checkpoint's own metadata, citing the one
line that rebuilds it and the val-split post-processing choice.

    .venv/bin/python experiments/standins/card.py synthetic_zbfwb
"""

from __future__ import annotations

import sys
from pathlib import Path

from neurorefiner.inference.segmenter import load_segmenter
from neurorefiner.training.segmenter import provenance_markdown


def main(preset: str) -> None:
    name = f"unet3d_{preset}_cpu"
    path = Path("checkpoints/segmenters") / f"{name}.pt"
    head = [f"# {name}: CPU 3D U-Net on the SYNTHETIC preset {preset}", "",
            f"Trained on a generated stand-in (rendered into `data/cache/synth/{preset}/` on first use), never "
            f"BigNeuron/CWMBS/ZBFWB data. `neurorefiner init-masks --dataset {preset} --segmenter unet3d` uses it "
            "on a fresh clone. Test rows beside the paper's: `experiments/standins/standins.md`.", ""]
    body = provenance_markdown(path, f"python train.py experiment={name}", title="training record")
    body = body.replace("# training record\n\n", "").split("\n## Command")[0].rstrip()
    meta = load_segmenter(path).meta
    val_md = Path("experiments/standins/postprocess") / f"{preset}_unet3d_postprocess_val.md"
    body += f"\n- seed: {meta.get('seed')}"
    if val_md.exists():
        chosen = next(line.replace("**", "").strip() for line in val_md.read_text().splitlines()
                      if line.startswith("**Chosen"))
        body += f"\n- val split, whole volumes, largest component, APP2 (full volume): {chosen} (`{val_md}`)"
    else:
        body += ("\n- no threshold chosen on the val split yet (run.sh step choose did not finish): inference uses "
                 "threshold 0.5")
    tail = ["", "## Rebuild", "", "```bash", f"python train.py experiment={name}", "```", "",
            f"writes `{path}` (recipe: `conf/experiment/{name}.yaml`: the preset's train split trains, its val "
            "split picks the checkpoint by APP2 F1 from the gold root). The threshold above was then chosen on the "
            f"val split and recorded in the file: `neurorefiner choose-postprocess --dataset {preset} --arch unet3d "
            f"--model {path} --threshold 0.3 --threshold 0.4 --threshold 0.5 --threshold 0.6 --bridge 0 "
            "--out experiments/standins/postprocess --record` (`experiments/standins/run.sh`, step choose).", ""]
    path.with_suffix(".md").write_text("\n".join(head) + "\n" + body + "\n" + "\n".join(tail))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
