"""Does TopoRefineNet follow its instruction? Edits a training stage's fixed validation defects with the
correct instruction, the same operation at a wrong location and the opposite operation; writes rows.csv,
summary.md and by_operation.md. Trailing arguments are Hydra overrides of the data (conf/train.yaml)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(out="folder")
def instructions(overrides: list[str] | None = typer.Argument(None, help="Hydra overrides of the data, e.g. "
                                                              "stages.1.datamodule.distractor_prob=0.0"),
                 ckpt: list[Path] = typer.Option(..., "--ckpt", help="checkpoint (repeat to compare)"),
                 label: list[str] | None = typer.Option(None, "--label", help="label per checkpoint "
                                                        "(default: file stem)"),
                 out: Path = typer.Option(..., "--out", help="output folder (rows.csv, summary.md, by_operation.md)"),
                 n: int = typer.Option(64, "--n", help="validation defects"),
                 seed: int = typer.Option(0, "--seed"),
                 stage: int = typer.Option(1, "--stage", min=1, max=2,
                                           help="1: synthetic defects; 2: crops mined from segmenter errors"),
                 confine: int | None = typer.Option(None, "--confine", metavar="M",
                                                    help="also report the edits confined to the named place "
                                                    "grown by M voxels"),
                 decoding: str = typer.Option("raw", "--decoding",
                                              help="raw: the network alone (thresholded); topology: the "
                                              "editor's component-wise decoding"),
                 device: str = typer.Option("cpu", "--device", help="torch device (cpu, cuda)"),
                 threads: int = typer.Option(1, "--threads", help="torch CPU threads")) -> None:
    import torch

    from neurorefiner.errors import InputError
    from neurorefiner.studies.instruction_following import run

    if label and len(label) != len(ckpt):
        raise InputError("give one --label per --ckpt")
    if decoding not in ("raw", "topology"):
        raise InputError(f"--decoding must be raw or topology, got {decoding!r}")
    torch.set_num_threads(threads)
    typer.echo(run(ckpt, out, labels=label, n=n, seed=seed, stage=stage, overrides=overrides or (), device=device,
                   confine=confine, decoding=decoding), nl=False)


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command("instructions", help=__doc__)(instructions)
