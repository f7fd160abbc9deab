"""One run of the editor probe (``neurorefiner study probe-editor``), in the steps the command takes: check the
options, gather the defects (cut into development data, plus the segmenter's own errors), edit them, time one
large edit, write the report. The probe itself is :mod:`neurorefiner.studies.editor_probe` (defects, metrics,
summary), :mod:`~neurorefiner.studies.editor_probe_real` (the segmenter's own errors) and
:mod:`~neurorefiner.studies.editor_probe_report` (the report); this module only strings their parts together,
so the command is a list of options and one call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError
from neurorefiner.studies import editor_probe as ep
from neurorefiner.studies import editor_probe_real as real_defects
from neurorefiner.studies import editor_probe_report as report

Echo = Callable[[str], None]


@dataclass(frozen=True)
class ProbeOptions:
    """What the command was asked for, checked (:func:`check_options`) before anything is loaded."""

    kinds: tuple[str, ...]
    block: tuple[int, int, int]
    n: int
    stacks: tuple[str, ...]
    synthetic: str
    synthetic_n: int
    segmenter: str
    seed: int
    crop_margin: int
    threads: int = 1
    speed_threads: int = 2
    checkpoint: Path | None = None


@dataclass
class Defects:
    """The probe's items and where they came from."""

    volumes: list[Any]
    items: list[Any]
    real_note: str = ""
    notes: list[str] = field(default_factory=list)


def check_options(kinds: str, size: str, n: int, stacks: str, crop_margin: int, **rest: Any) -> ProbeOptions:
    """The options as typed -> :class:`ProbeOptions`, or one :class:`InputError` naming the bad option.
    Held-out stacks (OP_7-OP_9) are refused: the probe measures on development data only."""
    kind_list = tuple(k.strip() for k in kinds.split(",") if k.strip())
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
    stack_list = tuple(s.strip() for s in stacks.split(",") if s.strip())
    if ep.HELD_OUT.intersection(stack_list):
        raise InputError("OP_7-OP_9 are held-out test stacks: the probe never uses them")
    if crop_margin < -1:
        raise InputError(f"--crop-margin must be >= 0, or -1 for the whole block, got {crop_margin}")
    return ProbeOptions(kinds=kind_list, block=block, n=n, stacks=stack_list,  # type: ignore[arg-type]
                        crop_margin=crop_margin, **rest)


def gather_defects(opts: ProbeOptions, echo: Echo) -> Defects:
    """Cut the generated defects into the volumes and collect the real ones from the segmenter's cached masks
    (skipped, with the line that makes them, when there are none)."""
    volumes = ep.load_diadem(list(opts.stacks)) if opts.stacks else []
    if opts.synthetic:
        volumes += ep.load_synthetic(opts.synthetic, opts.synthetic_n, seed=opts.seed)
    if not volumes:
        raise InputError("no data: give --stacks and/or --synthetic")
    generated = [k for k in opts.kinds if k in ep.GENERATED]
    found = Defects(volumes, ep.make_items(volumes, opts.n, generated, opts.block, opts.seed))
    real = [k for k in opts.kinds if k in ep.REAL]
    if real:
        found.real_note = _real_defects(opts, found, real, echo)
    return found


def _real_defects(opts: ProbeOptions, found: Defects, real: Sequence[str], echo: Echo) -> str:
    masks = real_defects.load_segmenter_masks([v for v in found.volumes if v.name in opts.stacks], opts.segmenter)
    missing = [s for s in opts.stacks if s not in masks]
    if not masks:
        echo(f"no cached {opts.segmenter} masks of {', '.join(opts.stacks) or 'any DIADEM stack'}: real defects "
             f"skipped (neurorefiner init-masks --dataset diadem --split dev --segmenter {opts.segmenter})")
        return ""
    items = real_defects.real_items(found.volumes, masks, opts.n, list(real), opts.block, opts.seed)
    found.items += items
    counts = {k: sum(it.kind == k for it in items) for k in real}
    note = (f"Real defects: the {opts.segmenter} masks of {', '.join(sorted(masks))} against gold"
            + (f" ({', '.join(missing)}: no cached mask)" if missing else "") + "; "
            + ", ".join(f"{c} {k}" for k, c in counts.items()) + " (all the masks hold, up to --n).")
    echo(note)
    return note


def run(opts: ProbeOptions, out: Path, command: str, echo: Echo) -> list[Path]:
    """The whole probe: defects, edits (raw network and topology decoding), the timing of one 64 x 128 x 128
    edit (unless ``speed_threads`` is 0), the report with date and commit; echoes the headline and returns
    the files written."""
    import numpy as np
    import torch

    from neurorefiner.inference.refiner import TopoRefiner

    torch.manual_seed(opts.seed)
    np.random.seed(opts.seed)
    torch.set_num_threads(max(1, opts.threads))
    found = gather_defects(opts, echo)
    refiner = TopoRefiner.load(opts.checkpoint, crop_margin=None if opts.crop_margin == -1 else opts.crop_margin)
    echo(f"{len(found.items)} defects in {len(found.volumes)} volumes; editing ...")

    def progress(i: int, total: int) -> None:
        if i % 25 == 0 or i == total:
            echo(f"  {i}/{total}")

    rows = ep.probe(refiner, found.items, progress=progress)
    summary = ep.summarize(rows)
    speed = _timing(opts, refiner, found.volumes)
    paths = report.write_report(out, rows, summary, report_meta(opts, found, refiner, command), speed)
    for label, value, target in report.headline(summary):
        echo(f"{label:45s} {report.fmt(value):>7s}  (target {target})")
    if speed:
        echo(f"64x128x128 edit: whole-block pass {speed['raw_s']:.2f} s, crop pass {speed['crop_s']:.2f} s "
             f"(ratio {speed['crop_ratio']:.2f}), decoded edit {speed['decoded_s']:.2f} s (ratio "
             f"{speed['ratio']:.2f}); load average {speed['load_before']:.1f}")
    return paths


def _timing(opts: ProbeOptions, refiner: Any, volumes: Sequence[Any]) -> dict[str, Any] | None:
    if opts.speed_threads <= 0:
        return None
    import torch

    torch.set_num_threads(opts.speed_threads)
    speed = ep.time_break_edit(refiner, volumes)
    speed["threads"] = opts.speed_threads
    return speed


def report_meta(opts: ProbeOptions, found: Defects, refiner: Any, command: str) -> dict[str, Any]:
    """The report's header: date, commit, the command, the data (SYNTHETIC stacks said so) and the settings."""
    from neurorefiner.evaluation.tables import provenance

    cfg = refiner.decoding_config
    return {**provenance(command),
            "data": ", ".join(v.name for v in found.volumes)
                    + (" (synthetic stacks are SYNTHETIC)" if opts.synthetic else ""),
            "size": opts.block, "n_per_kind": opts.n, "kinds": list(opts.kinds), "seed": opts.seed,
            "checkpoint": refiner.source, "crop_margin": refiner.crop_margin, "real": found.real_note,
            "decoding_config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}}
