"""Cross-validation of the CPU 3D U-Net over DIADEM dev: out-of-fold probability maps of each fold's run,
seeds packed into averaged networks, and the choice of steps and post-processing through APP2."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes

cv_app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


@cv_app.command("probs")
@friendly_errors
@writes(run="folder")
def probs(run: Path = typer.Option(..., "--run", help="a fold's run directory, named f<fold>_<steps>"),
          threads: int = typer.Option(1, "--threads", help="torch CPU threads")) -> None:
    """Out-of-fold probability maps (<run>/oof_probs/<case>.npy) of the cases the run's fold holds out."""
    from neurorefiner.studies.cross_validation import write_probs

    write_probs(run, threads)


@cv_app.command("ensemble")
@friendly_errors
@writes(out="folder")
def ensemble(members: list[Path] = typer.Argument(..., help="runs of one fold and budget, other seeds"),
             out: Path = typer.Option(..., "--out", help="the averaged network's run directory"),
             threads: int = typer.Option(1, "--threads", help="torch CPU threads"),
             recompute: bool = typer.Option(False, "--recompute", help="run the packed network instead of averaging "
                                            "the members' stored maps")) -> None:
    """Average one fold's runs of several seeds into one network and write its out-of-fold maps."""
    from neurorefiner.studies.cross_validation import write_ensemble

    write_ensemble(members, out, threads, recompute)


@cv_app.command("verify")
@friendly_errors
def verify(run: Path = typer.Option(..., "--run", help="an averaged network's run directory"),
           case: str = typer.Option(..., "--case", help="a case its fold holds out"),
           threshold: float = typer.Option(0.7, "--threshold", help="count voxels on different sides of this"),
           threads: int = typer.Option(1, "--threads", help="torch CPU threads")) -> None:
    """Compare a packed ensemble's map on one held-out case with its stored (averaged) map."""
    from neurorefiner.studies.cross_validation import verify_ensemble

    typer.echo(verify_ensemble(run, case, threshold, threads))


@cv_app.command("choose")
@friendly_errors
@writes(out="folder")
def choose(runs: list[Path] = typer.Argument(..., help="run directories f<fold>_<steps> with out-of-fold maps"),
           out: Path = typer.Option(..., "--out", help="folder for cv_dev.md, cv_dev_cases.csv, choice.json"),
           threshold: list[float] | None = typer.Option(None, "--threshold", help="a threshold of the grid "
                                                        "(repeatable; default 0.4-0.95)"),
           bridge: list[float] | None = typer.Option(None, "--bridge", help="gap bridging in um (repeatable; "
                                                     "default 0: off)"),
           dust: list[int] | None = typer.Option(None, "--dust", help="dust removal in voxels (repeatable; "
                                                 "default 0 1000)"),
           keep: list[int] | None = typer.Option(None, "--keep", help="keep largest 0/1 (repeatable; default both)"),
           speed_budget: float = typer.Option(30.0, "--speed-budget", help="seconds on 256^3 (2 cores) a chosen "
                                              "setting may take"),
           no_speed_budget: bool = typer.Option(False, "--no-speed-budget", help="no speed limit in the rule"),
           bench: Path | None = typer.Option(None, "--bench", help="bench JSON with the one-network time (default: "
                                             "experiments/segmenters/bench_segmentation.json)")) -> None:
    """Score every setting on the out-of-fold maps through APP2 and choose one."""
    from neurorefiner.paths import project_root
    from neurorefiner.studies import cross_validation as cv

    bench = bench or project_root() / "experiments" / "segmenters" / "bench_segmentation.json"
    typer.echo(cv.choose(runs, out, tuple(threshold or cv.THRESHOLDS), None if no_speed_budget else speed_budget,
                         bench, tuple(dust or cv.DUST), tuple(keep or cv.KEEP), tuple(bridge or cv.BRIDGE)))


def register(app: typer.Typer) -> None:
    """Add this study (a group of its own: probs, ensemble, verify, choose) to the ``neurorefiner study``
    sub-app."""
    app.add_typer(cv_app, name="segmenter-cv", help=__doc__)
