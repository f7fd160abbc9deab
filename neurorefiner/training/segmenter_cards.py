"""The cards (``.md``) of segmenter checkpoints, written from each checkpoint's own metadata
(:func:`neurorefiner.training.segmenter.provenance_markdown`, nothing typed in): any run's card with the command
that made it (:func:`write_segmenter_card`, ``neurorefiner make segmenter-card``), and the shipped SYNTHETIC
stand-in segmenters' cards with the line that rebuilds them and their validation choice
(:func:`write_standin_card`, ``neurorefiner make standin-card``)."""

from __future__ import annotations

from pathlib import Path

from neurorefiner.errors import InputError
from neurorefiner.inference.segmenter import load_segmenter
from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.paths import project_root
from neurorefiner.training.segmenter import provenance_markdown

# the val-split threshold grid of experiments/standins/run.sh (step choose), which the cards cite: low thresholds
# matter for the stand-in nets, whose foreground probability along faint neurites stays low
# (tests/unit/test_segmenter_cards.py checks the two agree)
THRESHOLD_GRID = (0.2, 0.3, 0.4, 0.5, 0.6)
# the trained stand-in segmenters: one shipped checkpoint and card per (arch, preset)
ARCH_TITLES = {"unet3d": "3D U-Net", "nnunet_style": "nnU-Net-style network"}


def write_segmenter_card(checkpoint: Path, command: str, out: Path, title: str | None = None) -> Path:
    """Write ``out`` (whole or not at all): the card of ``checkpoint`` read from its metadata, with ``command``,
    the line that made it; returns ``out``."""
    if not Path(checkpoint).exists():
        raise InputError("checkpoint not found", checkpoint)
    return write_text_atomic(out, provenance_markdown(checkpoint, command, title=title))


def write_standin_card(preset: str, arch: str = "unet3d") -> Path:
    """Write the card (.md) of the shipped SYNTHETIC stand-in segmenter ``arch`` of ``preset`` from the
    checkpoint's own metadata, citing the one line that rebuilds it and the val-split post-processing choice;
    returns its path."""
    if arch not in ARCH_TITLES:
        raise InputError(f"no stand-in segmenter {arch!r} (one of {', '.join(ARCH_TITLES)})")
    name = f"{arch}_{preset}_cpu"
    rel = Path("checkpoints") / "segmenters" / f"{name}.pt"  # as the card shows it
    path = project_root() / rel
    if not path.exists():
        raise InputError(f"no shipped checkpoint (train it: python train.py experiment={name} ship=true)", path)
    head = [f"# {name}: CPU {ARCH_TITLES[arch]} on the SYNTHETIC preset {preset}", "",
            f"Trained on a generated stand-in (rendered into `data/cache/synth/{preset}/` on first use), never "
            f"BigNeuron/CWMBS/ZBFWB data. `neurorefiner init-masks --dataset {preset} --segmenter {arch}` uses it "
            "on a fresh clone. Test rows beside the paper's: `experiments/standins/standins.md`.", ""]
    body = provenance_markdown(path, f"python train.py experiment={name}", title="training record")
    body = body.replace("# training record\n\n", "").split("\n## Command")[0].rstrip()
    meta = load_segmenter(path).meta
    val_md = project_root() / "experiments" / "standins" / "postprocess" / f"{preset}_{arch}_postprocess_val.md"
    body += f"\n- seed: {meta.get('seed')}"
    if val_md.exists():
        chosen = next(line.replace("**", "").strip() for line in val_md.read_text().splitlines()
                      if line.startswith("**Chosen"))
        how = ("APP2 from the mask voxel nearest the gold root" if "(root_seeded)" in val_md.read_text()
               else "APP2's own root")
        body += f"\n- post-processing chosen on the val split (whole volumes, {how}): {chosen}"
        body += f" (`{val_md.relative_to(project_root())}`)"
    else:
        body += ("\n- no threshold chosen on the val split yet (run.sh step choose did not finish): inference uses "
                 "threshold 0.5")
    # training writes under outputs/ (conf/paths/train.yaml) and ship=true copies the file onto the shipped one;
    # tests/unit/test_experiment_configs.py checks both paths against the composed config
    trained = Path("outputs") / "train" / "checkpoints" / "segmenters" / f"{name}.pt"
    tail = ["", "## Rebuild", "", "```bash", f"python train.py experiment={name} ship=true", "```", "",
            f"writes `{trained}` and `ship=true` copies it to `{rel}` (recipe: `conf/experiment/{name}.yaml`: the "
            "preset's train split trains, its val "
            "split picks the checkpoint by APP2 F1 from the gold root). The threshold above was then chosen on the "
            "val split and recorded in the file: "
            f"`neurorefiner make postprocess --dataset {preset} --arch {arch} "
            f"--model {rel} {' '.join(f'--threshold {t}' for t in THRESHOLD_GRID)} --bridge 0 --keep 0 "
            "--protocol root_seeded --out experiments/standins/postprocess --record` "
            "(`experiments/standins/run.sh`, step choose).", ""]
    return write_text_atomic(path.with_suffix(".md"), "\n".join(head) + "\n" + body + "\n" + "\n".join(tail))
