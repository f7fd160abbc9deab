"""The training probe: TopoRefineNet checkpoints scored on held-out development defects, network alone
(``training-probe``), and its tables: labelled rows per checkpoint and change threshold (``probe-table``), the loss
variants with their training cost (``loss-probe-table``)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, named_pairs, writes


@friendly_errors
@writes(out="folder")
def training_probe(checkpoints: list[str] = typer.Argument(..., help="NAME=CHECKPOINT of each checkpoint to score"),
                   out: Path = typer.Option(..., "--out", help="folder for <NAME>.json"),
                   n: int = typer.Option(30, "--n", help="defects per kind"),
                   seed: int = typer.Option(0, "--seed"),
                   operation_gate: bool = typer.Option(False, "--operation-gate",
                                                       help="take out the edits the instruction's operation forbids "
                                                            "(connect/repair add, remove deletes)"),
                   passes: int = typer.Option(1, "--passes", help="network passes per edit, each fed the last one's "
                                                                   "raw result (1 = one pass)"),
                   thresholds: str = typer.Option("0.5", "--thresholds",
                                                  help="comma-separated change thresholds (a voxel changes where the "
                                                       "network gives the change at least this probability); the "
                                                       "first is the json's headline (0.5 = the plain cut)"),
                   standin_segmenters: str = typer.Option("", "--standin-segmenters",
                                                          help="comma-separated stand-in segmenters (unet3d, "
                                                               "nnunet_style) whose real breaks and noise on the "
                                                               "SYNTHETIC probe stacks are added (default: none, "
                                                               "OP_6's only)")) -> None:
    """Score TopoRefineNet checkpoints on held-out development defects, raw network only; <NAME>.json each."""
    from neurorefiner.errors import InputError
    from neurorefiner.studies.editor_training_probe import headline_lines, run

    try:
        cuts = [float(t) for t in thresholds.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--thresholds: comma-separated numbers, got {thresholds!r}") from None
    standins = [s for s in standin_segmenters.split(",") if s.strip()]
    result = run(named_pairs(checkpoints, "NAME=CHECKPOINT"), out, n, seed, operation_gate, passes, cuts, standins)
    typer.echo("\n".join(headline_lines(result)))


@friendly_errors
@writes(out="file")
def probe_table(folder: Path = typer.Argument(..., help="the folder of the probe's <NAME>.json files"),
                described: list[str] = typer.Argument(..., help='NAME="what it is", in table order'),
                out: Path | None = typer.Option(None, "--out", help="the Markdown file (default FOLDER/summary.md)")
                ) -> None:
    """The training probe's scores in one Markdown table, a row per checkpoint and change threshold (a name without
    a json is left out and said so)."""
    from neurorefiner.studies.training_probe_table import write_probe_table

    typer.echo(write_probe_table(folder, named_pairs(described, 'NAME="what it is"'), out), nl=False)


@friendly_errors
def loss_probe_table(results: Path | None = typer.Option(None, "--results",
                                                         help="the loss probes' scores (default experiments/"
                                                              "toporefinenet/results/loss_probe)"),
                     runs: Path | None = typer.Option(None, "--runs", help="the variants' training runs, for their "
                                                      "progress.json (default outputs/toporefinenet_probes)")) -> None:
    """The loss probes' table (RESULTS/summary.md): each loss variant's scores and training cost."""
    from neurorefiner.studies.training_probe_table import write_loss_probe_table

    typer.echo(write_loss_probe_table(results, runs), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study's commands to the ``neurorefiner study`` sub-app."""
    app.command("training-probe", help=training_probe.__doc__)(training_probe)
    app.command("probe-table", help=probe_table.__doc__)(probe_table)
    app.command("loss-probe-table", help=loss_probe_table.__doc__)(loss_probe_table)
