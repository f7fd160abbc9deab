"""Adapt the refiner to one dataset's own traced stacks: fine-tune the editor on its defects and its segmenters'
mistakes, retrain the judge on its candidates, and write both with a card into one folder (resumable: run the
same command again after a stop). Use the folder with ``refiner=adapted refiner_dir=<folder>``."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="folder")
def adapt(dataset: str = typer.Option(..., "--dataset", help="registry name with a train (or dev) split and gold "
                                                              "SWC; your own stacks: `own` (data/README.md)"),
          out: Path = typer.Option(..., "--out", help="the refiner's folder, e.g. checkpoints/refiners/<dataset>"),
          segmenters: str = typer.Option("unet3d", "--segmenters",
                                         help="comma-separated: whose masks' mistakes to learn from (unet3d: the "
                                              "dataset's shipped U-Net; on `own`, the DIADEM one or the masks "
                                              "init-masks made)"),
          editor_steps: int = typer.Option(1500, "--editor-steps", help="the editor's fine-tuning steps"),
          stage1_samples: int = typer.Option(1536, "--stage1-samples", help="defects cut into gold"),
          stage2_samples: int = typer.Option(1536, "--stage2-samples", help="crops of the segmenters' errors"),
          val_samples: int = typer.Option(64, "--val-samples", help="validation crops of each kind"),
          faint_gap: float = typer.Option(0.5, "--faint-gap", help="share of synthetic breaks faded in the image"),
          judge_min_support: int = typer.Option(10, "--judge-min-support",
                                                help="candidates a judge threshold must admit"),
          baselines: str = typer.Option("", "--baselines",
                                        help="comma-separated learned baselines to train on the same data too: "
                                             "segfix, transfiner, segrefiner (for tables)"),
          baseline_steps: int = typer.Option(800, "--baseline-steps", help="each baseline's training steps"),
          seed: int = typer.Option(0, "--seed", help="seed"),
          judge_tree_root: str = typer.Option("largest", "--judge-tree-root",
                                              help="the piece whose joins the judge learns: largest | gold (the "
                                                   "soma, for runs told it)"),
          judge_reach_um: float | None = typer.Option(None, "--judge-reach-um",
                                               help="the longest join (um) the judge learns; default: the "
                                                    "Inspector's")) -> None:
    """Adapt the refiner (editor and judge) to a dataset's training split, into one folder."""
    from neurorefiner.adaptation.settings import AdaptSettings

    settings = AdaptSettings(dataset, _names(segmenters), editor_steps, stage1_samples, stage2_samples, val_samples,
                             faint_gap, judge_min_support, _names(baselines), baseline_steps, seed,
                             judge_tree_root, judge_reach_um)
    from neurorefiner.adaptation.run import adapt as run

    card = run(settings, out, progress=is_tty())
    typer.echo(f"refiner adapted to {dataset} in {out} (card: {card}); use it with refiner=adapted "
               f"refiner_dir={out}")


def _names(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())
