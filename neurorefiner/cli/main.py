"""The ``neurorefiner`` console command. Each command lives in its own module; heavy imports happen
inside the command so ``--help`` answers at once. The top level lists what a user runs (segment, refine one
block, inspect, trace, score, make synthetic data, ship a trained checkpoint); the one-off measurements
behind experiments/ sit under ``neurorefiner study`` (``neurorefiner.cli.study``), the maintainers' steps that
make a shipped artifact (a segmenter's post-processing, cards, the docs' tables) under ``neurorefiner make``
(``neurorefiner.cli.make``)."""

from __future__ import annotations

import typer

from neurorefiner.cli import (
    adapt,
    calibrate_judge,
    choose,
    edit,
    info,
    init_masks,
    inspect,
    make,
    refiner_card,
    review,
    score,
    segment,
    shards,
    study,
    synth,
    trace,
    train_judge,
)

app = typer.Typer(
    name="neurorefiner",
    help="Refine 3D neuron segmentations until their topology is right, and measure the result.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("info", help=info.__doc__)(info.info)
app.command("synth", help=synth.__doc__)(synth.synth)
app.command("trace", help=trace.__doc__)(trace.trace)
app.command("score", help=score.__doc__)(score.score)
app.command("segment", help=segment.__doc__)(segment.segment)
app.command("init-masks", help=init_masks.__doc__)(init_masks.init_masks)
app.command("make-shards", help=shards.__doc__)(shards.make_shards)
app.command("edit", help=edit.__doc__)(edit.edit)
app.command("inspect", help=inspect.__doc__)(inspect.inspect)
app.command("refiner-card", help=refiner_card.__doc__)(refiner_card.refiner_card)
app.command("train-judge", help=train_judge.__doc__)(train_judge.train_judge)
app.command("adapt", help=adapt.__doc__)(adapt.adapt)
app.command("choose", help=choose.__doc__)(choose.choose)
app.command("calibrate-judge", help=calibrate_judge.__doc__)(calibrate_judge.calibrate_judge)
app.command("review", help=review.__doc__)(review.review)
app.add_typer(make.app, name="make", help=make.app.info.help)
app.add_typer(study.app, name="study", help=study.app.info.help)


def main() -> None:  # pragma: no cover - console entry point
    app()
