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
    from neurorefiner.studies.editor_probe_run import check_options, run

    opts = check_options(kinds, size, n, stacks, crop_margin, synthetic=synthetic, synthetic_n=synthetic_n,
                         segmenter=segmenter, seed=seed, threads=threads, speed_threads=speed_threads,
                         checkpoint=checkpoint)
    paths = run(opts, out, _command_line(), typer.echo)
    typer.echo("wrote " + ", ".join(str(p) for p in paths))


def _command_line() -> str:
    """The command as typed, for the report: the words after ``probe-editor`` (wherever the sub-app put it)."""
    args = sys.argv[sys.argv.index(NAME) + 1:] if NAME in sys.argv else []
    return f"neurorefiner study {NAME} {shlex.join(args)}".rstrip()


def register(app: typer.Typer) -> None:
    """Add this study to the ``neurorefiner study`` sub-app."""
    app.command(NAME, help=__doc__)(probe_editor)
