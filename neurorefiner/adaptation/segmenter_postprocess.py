"""Choose a segmenter's post-processing on its validation cases (never a test split): a step of making a
segmenter, as nnU-Net chooses its post-processing after training, recorded in the checkpoint that inference then
reads. mask -> APP2 -> F1/SSD against the gold SWC, the rule of
:func:`neurorefiner.postprocessing.choose.choose_setting` (highest mean F1, settings within 0.01 of it to the
lower mean SSD, then the simpler setting: no gap bridging, threshold nearest 0.5). The grid: thresholds x gap
bridging (um) x keep every component or only the largest, no dust removal. Scored by the protocol the tables
report (``protocol``, default ``root_seeded``: APP2 from the mask voxel nearest the gold root), so a setting
that drops the root's piece is chosen only if it traces better from there. The validation cases: a synthetic
preset's ``val`` split, or named cases of a split without one (DIADEM: ``split="dev", cases=["OP_6"]``, the
stack that validated the networks trained by ``experiment=segment_diadem_cpu``).

Several checkpoints (e.g. the snapshots of one training run, ``segmentation.snapshot_every_n_epochs``) are
candidates of one grid: the checkpoint is chosen with its post-processing by the same rule, on the whole val
volumes. Why: the pick during training scores label-centred crops at threshold 0.5, and on the stand-ins the
crop's best checkpoint traced the whole volumes far worse than an earlier one.

Writes ``<out>/<dataset>_<name>_postprocess_val.{md,csv,json}``; ``record`` stores the choice in the
checkpoint (with ``ship_to``: in a copy of the chosen checkpoint written there). Command:
``neurorefiner make postprocess``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
BRIDGE = (0.0, 3.0)
METRICS = ("PRE", "REC", "F1", "SD", "SSD")
COMMAND = "neurorefiner make postprocess"


def validation_cases(dataset: str, split: str = "val", names: Sequence[str] = (), limit: int | None = None) -> list:
    """The cases a post-processing is chosen on: ``split`` of ``dataset`` (never a test split), only ``names``
    when given, the first ``limit``. An unknown dataset, split or case is an :class:`InputError`."""
    from neurorefiner.data import get_dataset

    if split == "test":
        raise InputError("post-processing is chosen on validation cases, never on a test split")
    cases = list(get_dataset(dataset).cases(split))
    unknown = sorted(set(names) - {c.name for c in cases})
    if unknown:
        raise InputError(f"{dataset} has no case {', '.join(unknown)} in its {split} split")
    return [c for c in cases if not names or c.name in names][: limit or None]


def cases_phrase(split: str, names: Sequence[str] = ()) -> str:
    """What the choice was made on, for the Markdown and the checkpoint: ``val split``, ``dev split: OP_6``."""
    return f"{split} split" + (f": {', '.join(names)}" if names else "")


def summarise(rows: list[dict]) -> list[dict]:
    """Mean PRE/REC/F1/SD/SSD per (checkpoint, threshold, bridge_um, keep_largest) over the validation volumes,
    best F1 first (rows without ``keep_largest`` count as keeping the largest, the chooser's old fixed grid;
    rows without ``checkpoint`` are of the one model)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get("checkpoint", ""), r["threshold"], r["bridge_um"], r.get("keep_largest", 1)),
                          []).append(r)
    summary = [{**({"checkpoint": c} if c else {}), "threshold": t, "bridge_um": b, "keep_largest": k,
                "volumes": len(rs), **{m: float(np.mean([r[m] for r in rs])) for m in METRICS}}
               for (c, t, b, k), rs in groups.items()]
    return sorted(summary, key=lambda s: (-s["F1"], s["SSD"]))


def split_candidate(spec: str | Path) -> tuple[str | None, Path]:
    """``NAME=PATH`` -> (NAME, PATH); a plain path -> (None, path). Names let candidates from different runs
    (``shipped=checkpoints/...``, ``300steps=...``) read apart in the tables."""
    text = str(spec)
    name, sep, rest = text.partition("=")
    if sep and name and "/" not in name and rest:
        return name, Path(rest)
    return None, Path(text)


def candidate_names(models: list[Path], given: list[str | None] | None = None) -> list[str]:
    """Short, distinct names of the candidate checkpoints: the given ones, else the file stems (``step000300``),
    else the paths."""
    given = given or [None] * len(models)
    names = [g or Path(m).stem for g, m in zip(given, models)]
    if len(set(names)) == len(names):
        return names
    return [g or str(m) for g, m in zip(given, models)]


def best_per_checkpoint(summary: list[dict]) -> list[dict]:
    """Each candidate checkpoint's own choice by the rule, in the candidates' order of first appearance."""
    from neurorefiner.postprocessing.choose import choose_setting

    names = list(dict.fromkeys(s["checkpoint"] for s in summary))
    return [dict(choose_setting([s for s in summary if s["checkpoint"] == n])) for n in names]


def markdown(name: str, dataset: str, model: Path | list[Path], n_cases: int, summary: list[dict], chosen: dict,
             protocol: str = "root_seeded", on: str = "val split", synthetic: bool = True) -> str:
    from neurorefiner.postprocessing.choose import TIE_F1

    how = "APP2 from the mask voxel nearest the gold root" if protocol == "root_seeded" else "APP2's own root"
    keep = "keep largest" if chosen.get("keep_largest", 1) else "keep every component"
    models = model if isinstance(model, list) else [model]
    several = len(models) > 1
    what = (f"{len(models)} candidate checkpoints (`{models[0]}` ... `{models[-1]}`), each scored over the grid"
            if several else f"Model `{model}`")
    lines = [f"# {name} on {dataset}{' (SYNTHETIC)' if synthetic else ''}: "
             + ("checkpoint and " if several else "") + f"post-processing chosen on the {on}", "",
             f"{what}; {n_cases} volumes of the {on}; mask -> {how} ({protocol}) -> PRE/REC/F1 (tau 4 voxels), "
             "SD/SSD in voxels, means over the volumes; no dust removal. Rule: the highest mean "
             f"F1; within {TIE_F1} the lower mean SSD, then no bridging, no component filter, then the threshold "
             f"nearest 0.5. The test split is not used. Command: `{COMMAND}`.", "",
             "**Chosen: " + (f"checkpoint {chosen['checkpoint']}, " if several else "")
             + f"threshold {chosen['threshold']}, gap bridging {chosen['bridge_um']:g} um, {keep}** "
             f"(F1 {chosen['F1']:.3f}, SSD {chosen['SSD']:.2f})", ""]
    if several:
        lines += ["Each checkpoint's own best setting:", "",
                  "| checkpoint | threshold | bridge um | keep largest | PRE | REC | F1 | SD | SSD |", "|---" * 9 + "|"]
        lines += [f"| {s['checkpoint']} | {s['threshold']} | {s['bridge_um']:g} | {s.get('keep_largest', 1)} | "
                  f"{s['PRE']:.3f} | {s['REC']:.3f} | {s['F1']:.3f} | {s['SD']:.2f} | {s['SSD']:.2f} |"
                  for s in best_per_checkpoint(summary)]
        lines += ["", "Every setting:", ""]
    first = "| checkpoint " if several else ""
    lines += [first + "| threshold | bridge um | keep largest | PRE | REC | F1 | SD | SSD |",
              "|---" * (9 if several else 8) + "|"]
    lines += [(f"| {s['checkpoint']} " if several else "") + f"| {s['threshold']} | {s['bridge_um']:g} | "
              f"{s.get('keep_largest', 1)} | {s['PRE']:.3f} | "
              f"{s['REC']:.3f} | {s['F1']:.3f} | {s['SD']:.2f} | {s['SSD']:.2f} |" for s in summary]
    return "\n".join(lines) + "\n"


def checked_candidates(model: Path | str | Sequence[Path | str]) -> tuple[list[Path], list[str]]:
    """The candidate checkpoints (``NAME=PATH`` or paths) and their distinct names, every file checked to exist."""
    specs = [split_candidate(m) for m in (model if isinstance(model, (list, tuple)) else [model])]
    models = [path for _, path in specs]
    if not models:
        raise InputError("give at least one checkpoint (--model)")
    for m in models:
        if not m.exists():
            raise InputError("checkpoint not found", m)
    labels = candidate_names(models, [name for name, _ in specs])
    if len(set(labels)) < len(labels):
        raise InputError(f"two candidates share a name: {labels}")
    return models, labels


def choose_postprocess(dataset: str, arch: str, model: Path | list[Path], out: Path, name: str | None = None,
                       thresholds: tuple[float, ...] = THRESHOLDS, bridge: tuple[float, ...] = BRIDGE,
                       threads: int = 1, record: bool = False, progress: bool = False,
                       protocol: str = "root_seeded", keep: tuple[int, ...] = (0, 1), limit: int | None = None,
                       ship_to: Path | None = None, split: str = "val", cases: Sequence[str] = ()) -> str:
    """Score the grid of every candidate checkpoint on every validation volume (``split``, only ``cases`` when
    given, the first ``limit``), choose, write the three files; returns the markdown. ``ship_to``: copy the chosen
    checkpoint there (atomically; what ``record`` then writes into)."""
    import torch
    from tqdm import tqdm

    from neurorefiner.evaluation.tables import write_markdown, write_rows_csv
    from neurorefiner.inference.segmenter import load_segmenter, record_postprocess, segment_array
    from neurorefiner.io.atomic import atomic_path, write_text_atomic
    from neurorefiner.paths import project_root
    from neurorefiner.postprocessing.choose import choose_setting, score_settings, settings_grid
    from neurorefiner.postprocessing.masks import PostProcess

    if not thresholds or not bridge or not keep:
        raise InputError("give at least one threshold, one gap-bridging distance and one keep-largest value")
    if protocol not in ("root_seeded", "full_volume"):
        raise InputError(f"protocol must be root_seeded or full_volume, got {protocol!r}")
    models, labels = checked_candidates(model)
    torch.set_num_threads(threads)
    volumes = validation_cases(dataset, split, cases, limit)
    if not volumes:
        raise InputError(f"{dataset}: no {cases_phrase(split, cases)} volume to choose on")
    segs = [load_segmenter(m, expected_arch=arch) for m in models]  # every file checked before hours of scoring
    grid = settings_grid(thresholds, (0,), keep, bridge)
    rows = []
    for case in tqdm(volumes, desc=f"{arch} on {dataset} {split}", unit="volume", disable=not progress):
        image, gold = case.image().load(), case.gold()
        for label, seg in zip(labels, segs):
            _, probs = segment_array(seg, image, source=str(case.image_path), post=PostProcess(0.5),
                                     spacing=case.spacing)
            for post, s in score_settings(probs, gold, case.spacing, grid, root_seeded=protocol == "root_seeded"):
                rows.append({"case": case.name, **({"checkpoint": label} if len(models) > 1 else {}),
                             "threshold": post.threshold, "bridge_um": post.bridge_um,
                             "keep_largest": post.keep_largest, **s})
    summary = summarise(rows)
    chosen = choose_setting(summary)
    winner = models[labels.index(chosen["checkpoint"])] if len(models) > 1 else models[0]
    name = name or arch
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"{dataset}_{name}_postprocess_val"
    write_rows_csv(stem.with_suffix(".csv"), rows)
    text = markdown(name, dataset, models if len(models) > 1 else models[0], len(volumes), summary, chosen, protocol,
                    on=cases_phrase(split, cases), synthetic=bool(volumes[0].info.get("synthetic")))
    write_markdown(stem.with_suffix(".md"), text)
    post = PostProcess(chosen["threshold"], 0, int(chosen["keep_largest"]), chosen["bridge_um"])
    choice = {**post.as_dict(), **({"checkpoint": str(winner)} if len(models) > 1 else {})}
    write_text_atomic(stem.with_suffix(".json"), json.dumps(choice, indent=1) + "\n")
    target = winner
    if ship_to is not None:
        target = Path(ship_to)
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as tmp:
            shutil.copyfile(winner, tmp)
    if record:
        md = stem.with_suffix(".md").resolve()
        where = md.relative_to(project_root()) if md.is_relative_to(project_root()) else md
        which = f"checkpoint {chosen['checkpoint']} of {len(models)} candidates, " if len(models) > 1 else ""
        record_postprocess(target, post, f"{dataset} {cases_phrase(split, cases)}: {which}{where}")
    return text
