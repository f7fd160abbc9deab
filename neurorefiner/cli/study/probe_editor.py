"""Probe the editor on defects cut into development data: raw network and topology decoding side by side.

Cuts breaks, noise blobs, pasted fragments and noise on a crossing neurite into gold blocks of DIADEM
OP_1-OP_6 and a synthetic preset (never OP_7-OP_9), edits each with the correct instruction, a wrong place
and the opposite operation, and writes ``editor_probe.md``, ``editor_probe.csv`` (summary) and
``editor_probe_edits.csv`` (per edit) with date and commit, plus the timing of one 64 x 128 x 128 edit.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes

NAME = "probe-editor"


@friendly_errors
@writes(out="folder")
def probe_editor(out: Path = typer.Option(Path("experiments/editor"), "--out", help="output folder"),
                 n: int = typer.Option(50, "--n", help="defects per kind"),
                 seed: int = typer.Option(0, "--seed", help="random seed of the defects"),
                 kinds: str = typer.Option("break,noise,paste,crossing,real_break,real_noise", "--kinds",
                                           help="defect kinds (real_*: the segmenter's own errors on the "
                                                "DIADEM stacks)"),
                 segmenter: str = typer.Option("unet3d", "--segmenter",
                                               help="whose cached DIADEM dev masks give the real_* defects "
                                                    "(neurorefiner init-masks --dataset diadem --split dev)"),
                 stacks: str = typer.Option("OP_1,OP_2,OP_3,OP_4,OP_5,OP_6", "--stacks",
                                            help="DIADEM development stacks ('' for none)"),
                 synthetic: str = typer.Option("synthetic_cwmbs_weak", "--synthetic",
                                               help="synthetic preset ('' for none)"),
                 synthetic_n: int = typer.Option(3, "--synthetic-n", help="synthetic stacks"),
                 size: str = typer.Option("32,64,64", "--size", help="block z,y,x"),
                 checkpoint: Path | None = typer.Option(None, "--checkpoint",
                                                        help="TopoRefineNet checkpoint (default: the shipped one)"),
                 crop_margin: int = typer.Option(16, "--crop-margin",
                                                 help="context voxels around the named place the network "
                                                      "sees; -1 = the whole block"),
                 threads: int = typer.Option(1, "--threads", help="torch threads for the probe"),
                 speed_threads: int = typer.Option(2, "--speed-threads",
                                                   help="torch threads for the 64x128x128 timing (0 = skip)"),
                 ) -> None:
    import numpy as np
    import torch

    from neurorefiner.errors import InputError
    from neurorefiner.inference.refiner import TopoRefiner
    from neurorefiner.studies import editor_probe as ep

    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    bad = [k for k in kind_list if k not in ep.KINDS]
    if bad or not kind_list:
        raise InputError(f"--kinds must name some of {', '.join(ep.KINDS)}, got {kinds!r}")
    try:
        block = tuple(int(v) for v in size.split(","))
    except ValueError:
        block = ()
    if len(block) != 3 or min(block) < 8:
        raise InputError(f"--size must be three integers >= 8 (z,y,x), got {size!r}")
    if n < 1:
        raise InputError(f"--n must be >= 1, got {n}")
    stack_list = [s.strip() for s in stacks.split(",") if s.strip()]
    if ep.HELD_OUT.intersection(stack_list):
        raise InputError("OP_7-OP_9 are held-out test stacks: the probe never uses them")
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.set_num_threads(max(1, threads))
    volumes = ep.load_diadem(stack_list) if stack_list else []
    if synthetic:
        volumes += ep.load_synthetic(synthetic, synthetic_n, seed=seed)
    if not volumes:
        raise InputError("no data: give --stacks and/or --synthetic")
    generated = [k for k in kind_list if k in ep.GENERATED]
    items = ep.make_items(volumes, n, generated, block, seed)  # type: ignore[arg-type]
    real = [k for k in kind_list if k in ep.REAL]
    real_note = ""
    if real:
        masks = ep.load_segmenter_masks([v for v in volumes if v.name in stack_list], segmenter)
        missing = [s for s in stack_list if s not in masks]
        if not masks:
            typer.echo(f"no cached {segmenter} masks of {', '.join(stack_list) or 'any DIADEM stack'}: real defects "
                       f"skipped (neurorefiner init-masks --dataset diadem --split dev --segmenter {segmenter})")
        else:
            found = ep.real_items(volumes, masks, n, real, block, seed)  # type: ignore[arg-type]
            items += found
            counts = {k: sum(it.kind == k for it in found) for k in real}
            real_note = (f"Real defects: the {segmenter} masks of {', '.join(sorted(masks))} against gold"
                         + (f" ({', '.join(missing)}: no cached mask)" if missing else "") + "; "
                         + ", ".join(f"{c} {k}" for k, c in counts.items()) + " (all the masks hold, up to --n).")
            typer.echo(real_note)
    if crop_margin < -1:
        raise InputError(f"--crop-margin must be >= 0, or -1 for the whole block, got {crop_margin}")
    refiner = TopoRefiner.load(checkpoint, crop_margin=None if crop_margin == -1 else crop_margin)
    typer.echo(f"{len(items)} defects in {len(volumes)} volumes; editing ...")

    def progress(i: int, total: int) -> None:
        if i % 25 == 0 or i == total:
            typer.echo(f"  {i}/{total}")

    rows = ep.probe(refiner, items, progress=progress)
    summary = ep.summarize(rows)
    speed = None
    if speed_threads > 0:
        torch.set_num_threads(speed_threads)
        speed = ep.time_break_edit(refiner, volumes)
        speed["threads"] = speed_threads
    root = Path(__file__).resolve().parents[3]
    cfg = refiner.decoding_config
    meta = {"date": ep.today(), "commit": ep.commit_id(root), "command": _command_line(),
            "data": ", ".join(v.name for v in volumes) + (" (synthetic stacks are SYNTHETIC)" if synthetic else ""),
            "size": block, "n_per_kind": n, "kinds": kind_list, "seed": seed,
            "checkpoint": refiner.source, "crop_margin": refiner.crop_margin, "real": real_note,
            "decoding_config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}}
    paths = ep.write_report(out, rows, summary, meta, speed)
    for label, value, target in ep.headline(summary):
        typer.echo(f"{label:45s} {ep.fmt(value):>7s}  (target {target})")
    if speed:
        typer.echo(f"64x128x128 edit: whole-block pass {speed['raw_s']:.2f} s, crop pass {speed['crop_s']:.2f} s "
                   f"(ratio {speed['crop_ratio']:.2f}), decoded edit {speed['decoded_s']:.2f} s (ratio "
                   f"{speed['ratio']:.2f}); load average {speed['load_before']:.1f}")
    typer.echo("wrote " + ", ".join(str(p) for p in paths))


def _command_line() -> str:
    """The command as typed, for the report: the words after ``probe-editor`` (wherever the sub-app put it)."""
    args = sys.argv[sys.argv.index(NAME) + 1:] if NAME in sys.argv else []
    return f"neurorefiner study {NAME} {shlex.join(args)}".rstrip()


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command(NAME, help=__doc__)(probe_editor)
