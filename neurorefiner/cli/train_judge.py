"""Train the judge of the learned agents on gold (candidates of a segmenter's masks labelled from the gold
SWC), and write it as JSON with its card (held-out precision and recall per candidate kind)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(out="file")
def train_judge(dataset: str = typer.Option("diadem", "--dataset", help="registry name with gold SWCs"),
                split: str = typer.Option("dev", "--split",
                                          help="the split(s) to learn from, comma-separated (never a test split)"),
                segmenters: str = typer.Option("unet3d,nnunet_style", "--segmenters",
                                               help="comma-separated: whose masks' candidates to learn from"),
                out: Path = typer.Option(Path("outputs/judge/judge.json"), "--out",
                                         help="where to write the judge (checkpoints/judge.json ships it)"),
                augment: int = typer.Option(2, "--augment", help="defect-cut copies of each mask"),
                min_support: int = typer.Option(1, "--min-support", min=1,
                                                help="candidates a threshold must admit before its out-of-fold "
                                                     "precision is held to the floor (few stacks: 10)")) -> None:
    """Train the learned agents' judge on gold."""
    from neurorefiner.agents.learned.training import train_judge as run

    path, card = run(dataset, split, [s for s in segmenters.split(",") if s], str(out), augment, progress=is_tty(),
                      min_support=min_support)
    typer.echo(f"judge -> {path}\ncard  -> {card}")
