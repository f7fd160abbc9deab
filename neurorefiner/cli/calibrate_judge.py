"""Set a judge's thresholds on your own traced stacks: each --stack is IMAGE,MASK,GOLD.swc (your segmentation
and a hand tracing of the same stack); the gold labels every candidate edit on your masks, and the judge's
thresholds are set where its admitted candidates are right at the precision floor (models unchanged). Writes the
judge and a card of what changed; use it with ``refine.py ... agent.inspector.judge=<out>``."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, is_tty, writes


def parse_stack(text: str) -> tuple[Path, Path, Path]:
    """``IMAGE,MASK,GOLD.swc`` -> three paths, each an existing file or folder (OME-Zarr), the gold a tracing with
    nodes: an empty one labels nothing, and the judge came out "calibrated" with its thresholds unchanged."""
    from neurorefiner.errors import InputError
    from neurorefiner.io import read_swc

    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3 or not all(parts):
        raise InputError(f"--stack {text!r}: give IMAGE,MASK,GOLD.swc (three paths, comma-separated)")
    paths = tuple(Path(p) for p in parts)
    for p in paths:
        if not p.exists():
            raise InputError("not found (--stack IMAGE,MASK,GOLD.swc)", p)
    if paths[2].suffix.lower() != ".swc":
        raise InputError("the third path of --stack is the gold tracing, an .swc file", paths[2])
    if not len(read_swc(paths[2]).ids):
        raise InputError("the gold tracing has no nodes: it labels no candidate (--stack IMAGE,MASK,GOLD.swc)",
                         paths[2])
    return paths  # type: ignore[return-value]


def load_stack(image_path: Path, mask_path: Path, gold_path: Path, spacing: str | None):  # type: ignore[no-untyped-def]
    """One labelled stack, its voxel size resolved as everywhere else (``--spacing`` > file calibration > stop)."""
    from neurorefiner.adaptation.judge.calibration import LabelledStack
    from neurorefiner.errors import InputError
    from neurorefiner.io import read_swc
    from neurorefiner.io.spacing import CLI, resolve_spacing
    from neurorefiner.io.stacks import check_same_shape, read_mask, read_volume

    image, mask = read_volume(image_path), read_mask(mask_path)
    check_same_shape(image, mask)
    values = resolve_spacing(spacing, image, mask, spelling=CLI).values
    gold = read_swc(gold_path)
    gold.check_within(mask.shape, tolerance=2.0)
    labels = mask.load() > 0
    if not labels.any():
        raise InputError("the mask is empty: it has no candidate edit to label (--stack IMAGE,MASK,GOLD.swc)",
                         mask_path)
    return LabelledStack(image_path.stem, image.normalized(), labels, gold,
                         tuple(float(v) for v in values))  # type: ignore[arg-type]


@friendly_errors
@writes(out="file")
def calibrate_judge(stack: list[str] = typer.Option(..., "--stack",
                                                    help="IMAGE,MASK,GOLD.swc; give it once per traced stack"),
                    out: Path = typer.Option(..., "--out", help="the calibrated judge (.json, or .pt for a judge "
                                                                "whose models read image crops)"),
                    judge: Path = typer.Option(Path("checkpoints/judge.json"), "--judge",
                                               help="the judge to start from (checkpoints/judge_transfer.pt: the "
                                                    "one trained on every dataset)"),
                    kinds: str = typer.Option("join", "--kinds",
                                              help="comma-separated kinds whose thresholds to set (join, remove, "
                                                   "prune)"),
                    spacing: str | None = typer.Option(None, "--spacing",
                                                       help="z,y,x in um for every stack (default: each file's "
                                                            "calibration)")) -> None:
    """Set a judge's thresholds on your own traced stacks."""
    import shlex

    from tqdm import tqdm

    from neurorefiner.adaptation.judge.calibration import calibrate, calibration_card, labelled_scores
    from neurorefiner.agents.candidates import KINDS
    from neurorefiner.agents.learned.judge import Judge
    from neurorefiner.errors import InputError
    from neurorefiner.io.atomic import write_text_atomic

    kind_list = [k.strip() for k in kinds.split(",") if k.strip()]
    if not kind_list or set(kind_list) - set(KINDS):
        raise InputError(f"--kinds {kinds!r}: choose from {', '.join(KINDS)}")
    triples = [parse_stack(s) for s in stack]  # a missing or empty file: one line, before the judge is read
    start = Judge.load(judge)
    if start.uses_crops and out.suffix != ".pt":
        raise InputError("this judge's models read image crops: write it as .pt", out)
    stacks = [load_stack(*t, spacing) for t in tqdm(triples, desc="reading stacks", disable=not is_tty())]
    scores = labelled_scores(start, stacks)
    calibrated, report = calibrate(start, scores, kind_list)
    path = calibrated.save(out)
    command = "neurorefiner calibrate-judge " + " ".join(
        [f"--stack {shlex.quote(s)}" for s in stack] + [f"--judge {judge}", f"--kinds {kinds}", f"--out {out}"]
        + ([f"--spacing {spacing}"] if spacing else []))
    card = write_text_atomic(path.with_suffix(".md"), calibration_card(report, [s.name for s in stacks],
                                                                       str(judge), command))
    for r in report:
        change = r.kept or f"{r.before:.3f} -> {r.after:.3f}"
        typer.echo(f"{r.kind}: {r.labelled} labelled ({r.right} right): {change}")
    typer.echo(f"judge -> {path}\ncard  -> {card}")
