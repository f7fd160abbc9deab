"""The judge's transfer and audits, on the candidates ``neurorefiner make judge-candidates`` mined: score every
judge model type leave one dataset out (``judge-transfer``), measure how many gold-vetted breaks the candidate
search reaches (``candidate-recall``), audit the Validator (``validator-audit``) and the held-out judge on DIADEM
dev (``judge-dev``)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes
from neurorefiner.cli.make.judge_candidates import DEFAULT_ROOT


@friendly_errors
@writes(out="folder")
def judge_transfer(root: Path = typer.Option(DEFAULT_ROOT, "--root", help="mined candidates"),
                   out: Path = typer.Option(Path("experiments/judge"), "--out", help="output folder"),
                   kinds: str = typer.Option("join,remove,prune", "--kinds", help="comma-separated"),
                   models: str = typer.Option("logistic,lgbm,crop_lgbm,crop_net", "--models", help="comma-separated"),
                   epochs: int = typer.Option(12, "--epochs", min=1, help="the network's training epochs"),
                   shipped: Path | None = typer.Option(None, "--shipped",
                                                       help="also score this JSON judge as it is (trained on "
                                                            "DIADEM dev) on the other datasets"),
                   calibrate: str = typer.Option("", "--calibrate",
                                                 help="comma-separated k: also set each held-out judge's threshold "
                                                      "on k labelled candidates of the held-out dataset"),
                   repeats: int = typer.Option(50, "--repeats", min=1, help="random draws per k")) -> None:
    """Every judge model type scored leave one dataset out."""
    from neurorefiner.studies.judge_transfer import judge_transfer as run

    command = (f"neurorefiner study judge-transfer --root {root} --out {out} --kinds {kinds} --models {models}"
               + (f" --epochs {epochs}" if epochs != 12 else "") + (f" --shipped {shipped}" if shipped else "")
               + (f" --calibrate {calibrate} --repeats {repeats}" if calibrate else ""))
    try:
        ks = [int(k) for k in calibrate.split(",") if k.strip()]
    except ValueError:
        raise typer.BadParameter(f"--calibrate: comma-separated whole numbers, got {calibrate!r}") from None
    typer.echo(run(root, out, [k for k in kinds.split(",") if k], [m for m in models.split(",") if m], epochs,
                   progress=is_tty(), command=command, shipped=shipped, calibrate=ks, repeats=repeats))


@friendly_errors
@writes(out="folder")
def candidate_recall(dataset: str = typer.Option(..., "--dataset", help="registry name: diadem, synthetic_..."),
                     split: str = typer.Option("dev", "--split", help="dev / train / val (never test)"),
                     sources: str = typer.Option("unet3d", "--sources", help="comma-separated mask sources"),
                     augment: int = typer.Option(1, "--augment", min=0, help="defect-cut copies of each mask"),
                     limit: int | None = typer.Option(None, "--limit", help="first N cases only"),
                     out: Path = typer.Option(Path("experiments/judge"), "--out", help="output folder")) -> None:
    """How many gold-vetted breaks within reach the join search offers."""
    from neurorefiner.studies.candidate_recall import candidate_recall as run

    command = (f"neurorefiner study candidate-recall --dataset {dataset} --split {split} --sources {sources} "
               f"--augment {augment} --out {out}" + (f" --limit {limit}" if limit else ""))
    typer.echo(run(dataset, split, [s for s in sources.split(",") if s], out, limit, augment, progress=is_tty(),
                   command=command))


@friendly_errors
@writes(out="folder")
def validator_audit(cases: str = typer.Option("", "--cases", help="comma-separated dev stacks (default: all six)"),
                    segmenter: str = typer.Option("unet3d", "--segmenter", help="whose masks"),
                    root: Path = typer.Option(DEFAULT_ROOT, "--root", help="mined candidates (the held-out judges)"),
                    out: Path = typer.Option(Path("experiments/judge"), "--out", help="output folder"),
                    judge: Path | None = typer.Option(None, "--judge", help="one judge for every stack (default: "
                                                      "each stack's held out, from the mined candidates)"),
                    validator: str = typer.Option("", "--validator",
                                                  help="Validator settings replacing conf/agent/learned.yaml's, "
                                                       "e.g. min_inside=0.8,connect_margin=12")) -> None:
    """The Validator's verdicts on DIADEM dev against gold (every edit kept, the Validator shadowed)."""
    from neurorefiner.studies.validator_audit import parse_settings
    from neurorefiner.studies.validator_audit import validator_audit as run

    command = (f"neurorefiner study validator-audit --segmenter {segmenter} --root {root} --out {out}"
               + (f" --cases {cases}" if cases else "") + (f" --judge {judge}" if judge else "")
               + (f" --validator {validator}" if validator else ""))
    typer.echo(run([c for c in cases.split(",") if c], segmenter, root, out, progress=is_tty(), command=command,
                   judge=judge, validator=parse_settings(validator)))


@friendly_errors
@writes(out="folder")
def judge_dev(root: Path = typer.Option(DEFAULT_ROOT, "--root", help="mined candidates"),
              out: Path = typer.Option(Path("experiments/judge"), "--out", help="output folder"),
              stacks: str = typer.Option("OP_1,OP_2,OP_3,OP_4,OP_5,OP_6", "--stacks", help="DIADEM dev stacks"),
              models: str = typer.Option("join=logistic,remove=lgbm,prune=lgbm", "--models",
                                         help="kind=model of the new judge"),
              segmenter: str = typer.Option("unet3d", "--segmenter", help="whose masks"),
              loop: bool = typer.Option(False, "--loop", help="each judge also drives the learned loop with the "
                                                              "shipped editor")) -> None:
    """The held-out new judge's choices made directly on DIADEM dev, beside the shipped judge and classical."""
    from neurorefiner.cli.train_judge import parse_models
    from neurorefiner.errors import InputError
    from neurorefiner.studies.judge_dev import judge_dev as run

    chosen = [s for s in stacks.split(",") if s]
    if any(s not in {f"OP_{i}" for i in range(1, 7)} for s in chosen):
        raise InputError(f"--stacks: DIADEM dev stacks are OP_1-OP_6, got {stacks}")
    command = (f"neurorefiner study judge-dev --root {root} --out {out} --stacks {stacks} --models {models} "
               f"--segmenter {segmenter}" + (" --loop" if loop else ""))
    typer.echo(run(root, out, chosen, parse_models(models), segmenter, command, progress=is_tty(), loop=loop))


def register(app: typer.Typer) -> None:
    """Add this study's commands to the ``neurorefiner study`` sub-app."""
    app.command("judge-transfer", help=judge_transfer.__doc__)(judge_transfer)
    app.command("candidate-recall", help=candidate_recall.__doc__)(candidate_recall)
    app.command("validator-audit", help=validator_audit.__doc__)(validator_audit)
    app.command("judge-dev", help=judge_dev.__doc__)(judge_dev)
