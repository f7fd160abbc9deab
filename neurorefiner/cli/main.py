"""The ``neurorefiner`` console command. Each utility lives in its own module; heavy imports happen
inside the command so ``--help`` answers at once."""

from __future__ import annotations

import typer

from neurorefiner.cli import (
    break_probe,
    choose_postprocess,
    edit,
    gold_scope,
    info,
    init_masks,
    inspect,
    instructions,
    metrics_validation,
    prior_compare,
    probe_compare,
    probe_editor,
    realism,
    refiner_card,
    score,
    segment,
    segmenter_cv,
    segmenter_rows,
    segmenter_summary,
    standins,
    synth,
    trace,
    visibility,
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
app.command("edit", help=edit.__doc__)(edit.edit)
app.command("inspect", help=inspect.__doc__)(inspect.inspect)
app.command("probe-editor", help=probe_editor.__doc__)(probe_editor.probe_editor)
app.command("probe-compare", help=probe_compare.__doc__)(probe_compare.probe_compare)
app.command("instructions", help=instructions.__doc__)(instructions.instructions)
app.command("break-probe", help=break_probe.__doc__)(break_probe.break_probe)
app.command("metrics-validation", help=metrics_validation.__doc__)(metrics_validation.metrics_validation)
app.command("realism", help=realism.__doc__)(realism.realism)
app.command("visibility", help=visibility.__doc__)(visibility.visibility)
app.command("standins-table", help=standins.standins_table.__doc__)(standins.standins_table)
app.command("standin-card", help=standins.standin_card.__doc__)(standins.standin_card)
app.command("refiner-card", help=refiner_card.__doc__)(refiner_card.refiner_card)
app.command("segmenter-rows", help=segmenter_rows.__doc__)(segmenter_rows.segmenter_rows)
app.command("segmenter-summary", help=segmenter_summary.__doc__)(segmenter_summary.segmenter_summary)
app.command("choose-postprocess", help=choose_postprocess.__doc__)(choose_postprocess.choose_postprocess)
app.add_typer(segmenter_cv.app, name="segmenter-cv", help=segmenter_cv.__doc__)
app.command("gold-scope", help=gold_scope.__doc__)(gold_scope.gold_scope)
app.command("prior-compare", help=prior_compare.__doc__)(prior_compare.prior_compare)


def main() -> None:  # pragma: no cover - console entry point
    app()
