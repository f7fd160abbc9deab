"""Ship trained TopoRefineNet checkpoints: copy them into checkpoints/ and write each card (.md) from the
JSON that training wrote beside them, citing the config line (python train.py experiment=NAME) that
rebuilds each stage."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(dst="folder")
def refiner_card(src: Path = typer.Option(..., "--src", help="folder with toporefinenet_stage{1,2}.ckpt and .json"),
                 stage1: str | None = typer.Option(None, "--stage1", help="experiment config of stage 1"),
                 stage2: str | None = typer.Option(None, "--stage2", help="experiment config of stage 2"),
                 name: str = typer.Option("toporefinenet", "--name", help="shipped file name (without .ckpt)"),
                 dst: Path | None = typer.Option(None, "--dst", help="destination (default: checkpoints/)"),
                 data: str = typer.Option(..., "--data", help="what the stages were trained and validated on"),
                 machine: str = typer.Option("2-core CPU (shared)", "--machine"),
                 provenance: str = typer.Option("", "--provenance",
                                                help="where the run started from (earlier checkpoints, machines)"),
                 ) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.paths import project_root
    from neurorefiner.training.cards import ship_refiner

    experiments = {s: e for s, e in ((1, stage1), (2, stage2)) if e}
    if not experiments:
        raise InputError("name the experiment config of at least one stage (--stage1 / --stage2)")
    for path in ship_refiner(src, dst or project_root() / "checkpoints", name, experiments, data, machine,
                             provenance):
        typer.echo(f"wrote {path} and its card")
