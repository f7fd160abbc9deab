"""The judge's labelled candidates of a dataset split, mined once with their image+mask crops
(neurorefiner.adaptation.judge.mining): the table ``neurorefiner train-judge --table`` fits a judge on, and the
leave-one-dataset-out studies (``neurorefiner study judge-transfer``) read."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes

DEFAULT_ROOT = Path("data/cache/judge_candidates")


@friendly_errors
@writes(root="folder")
def judge_candidates(dataset: str = typer.Option(..., "--dataset", help="registry name: diadem, synthetic_..."),
                     split: str = typer.Option("dev", "--split", help="dev / train / val (never test)"),
                     sources: str = typer.Option("unet3d,nnunet_style", "--sources",
                                                 help="comma-separated mask sources: segmenter names, or gold (a "
                                                      "synthetic volume's rendered gold mask, defect-cut copies "
                                                      "only)"),
                     augment: int = typer.Option(2, "--augment", min=0, help="defect-cut copies of each mask"),
                     limit: int | None = typer.Option(None, "--limit", help="first N cases only"),
                     jobs: int = typer.Option(1, "--jobs", min=1, help="cases mined in parallel processes"),
                     root: Path = typer.Option(DEFAULT_ROOT, "--root", help="where the mined tables go")) -> None:
    """Mine labelled candidates (features, gold label, image+mask crop) of a dataset split."""
    from neurorefiner.adaptation.judge.mining import MineSettings, mine

    files = mine(dataset, split, [s for s in sources.split(",") if s], root, MineSettings(augment=augment), limit,
                 progress=is_tty(), jobs=jobs)
    typer.echo(f"{len(files)} files under {root / dataset / split}")


def register(app: typer.Typer) -> None:
    """Add this command to the ``neurorefiner make`` sub-app."""
    app.command("judge-candidates", help=judge_candidates.__doc__)(judge_candidates)
