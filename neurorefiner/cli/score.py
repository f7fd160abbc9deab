"""Score a reconstruction (SWC) or mask against a gold SWC: SD, SSD, %SSD, PRE, REC, F1, MES."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, parse_spacing

_VOLUME_SUFFIXES = (".tif", ".tiff", ".v3draw", ".v3dpbd", ".zarr", ".npy")


@friendly_errors
def score(gold: Path = typer.Argument(..., help="gold .swc"),
          pred: Path = typer.Argument(..., help="predicted .swc or mask .tif"),
          json_out: bool = typer.Option(False, "--json", help="print one JSON object"),
          spacing: str | None = typer.Option(None, "--spacing", help="z,y,x in um"),
          tau: float = typer.Option(4.0, "--tau", help="match distance for PRE/REC/F1/MES"),
          step: float = typer.Option(2.0, "--step", help="resampling step for PRE/REC/F1/MES"),
          physical: bool = typer.Option(False, "--physical", help="distances in um instead of voxels"),
          gold_mask: Path | None = typer.Option(None, "--gold-mask",
                                                help="gold mask for Dice/clDice/Betti (default: the gold "
                                                     "SWC rasterised, radius 1.5 voxels)")) -> None:
    import warnings

    from neurorefiner.errors import InputError
    from neurorefiner.io import read_mask, read_swc
    from neurorefiner.io.spacing import CLI, resolve_spacing
    from neurorefiner.metrics import score_mask, score_trees

    g = read_swc(gold)
    if not len(g.ids):  # every figure would be measured against nothing (it printed a table of them, exit 0)
        raise InputError("the gold tracing has no nodes: nothing to score against", gold)
    sp = None if spacing == "assume" else parse_spacing(spacing)
    kw = dict(tau=tau, step=step, physical=physical)
    if tau <= 0 or step <= 0:
        raise InputError(f"--tau and --step must be positive (got {tau}, {step})")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if pred.suffix.lower() == ".swc":
            result = score_trees(g, read_swc(pred), sp or (1.0, 1.0, 1.0), **kw)
        elif pred.suffix.lower() in _VOLUME_SUFFIXES or pred.is_dir():
            vol = read_mask(pred)
            sp = resolve_spacing(spacing, vol, spelling=CLI).values  # none anywhere: exit 2
            mask = vol.load()
            g.check_within(mask.shape, tolerance=2.0)
            if gold_mask is not None:
                gm = read_mask(gold_mask)
                if gm.shape != vol.shape:
                    raise InputError(f"gold mask shape {gm.shape} differs from the mask's {vol.shape}", gold_mask)
                gmask = gm.load()
            else:
                gmask = g.rasterize(mask.shape, sp, radius=1.5, strict=False)
            result = score_mask(g, mask, sp, gold_mask=gmask, **kw)
        else:
            raise InputError("prediction must be an .swc or a mask stack (.tif, .v3draw, .zarr, .npy)", pred)
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)
    if json_out:
        typer.echo(json.dumps({k: (None if isinstance(v, float) and math.isinf(v) else v)
                               for k, v in result.items()}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{pred.name} vs {gold.name}")
    for k in result:
        table.add_column(k, justify="right")
    table.add_row(*[f"{v:.4f}" if isinstance(v, float) else str(v) for v in result.values()])
    Console().print(table)
