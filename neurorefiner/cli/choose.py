"""Choose a refiner folder's decision policy on its dataset's validation data (the last step of ``neurorefiner
adapt``, alone): writes ``plans.json`` (what ``refiner=...`` runs with) and ``choose.md`` (the validation table of
every policy tried, the classical refiner's among them). A killed run resumes from ``<folder>/work/``."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


@friendly_errors
@writes(refiner="folder")
def choose(dataset: str = typer.Option(..., "--dataset", help="registry name: its val split, or without one its "
                                                              "training split leave one stack out"),
           refiner: Path = typer.Option(..., "--refiner", help="the refiner folder (its judge.json and editor.ckpt "
                                                               "are used when present, else the shipped ones)"),
           segmenters: str = typer.Option("unet3d", "--segmenters", help="comma-separated: whose masks to refine"),
           confirm: int = typer.Option(3, "--confirm", min=1, help="screened policies confirmed with the full loop "
                                                                    "(one loop per validation case each)"),
           variants: bool = typer.Option(True, "--variants/--no-variants",
                                         help="try the best loop at T_max 1, without the brightness gate and with "
                                              "each other editor"),
           ) -> None:
    """Choose a refiner's policy on validation by root-seeded F1 (plans.json + choose.md in its folder)."""
    from neurorefiner.adaptation.choose import Budget, choose_refiner

    names = tuple(s.strip() for s in segmenters.split(",") if s.strip())
    out = choose_refiner(dataset, refiner, names, progress=is_tty(), budget=Budget(confirm, variants))
    typer.echo(f"{refiner}: chose {out['chosen']} ({out['kind']}, validation F1 {out['mean_f1']:.2f}); "
               f"table: {refiner / out['table']}")
