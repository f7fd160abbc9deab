"""Score TopoRefineNet checkpoints on held-out development defects, raw network only: what a training
recipe (loss, data, budget) buys the network itself, before any decoding helps. Command: ``neurorefiner study
training-probe --out DIR NAME=CHECKPOINT ...``; ``neurorefiner study probe-table`` puts the scores in one table.

The scoring is the editor probe's (:mod:`neurorefiner.studies.editor_probe`: its defect makers, real
segmenter defects, per-edit figures and summary), restricted to what training decides and to data no
training recipe here sees: DIADEM OP_6 (the stage datamodules validate on it, never train on it) and
SYNTHETIC stacks rendered in memory from their own seed; real breaks and noise are both segmenters' own
errors on OP_6. OP_7-OP_9 are never touched. Each defect is edited with the correct instruction, the same
operation at a wrong place and the opposite operation, decoded ``raw`` (threshold + confinement of the
network's pass on the whole block).

Headline (the issue's targets): gap filled on synthetic breaks and on real breaks (correct instruction),
and the shares of wrong-place and opposite edits that leave the block unchanged (all kinds).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.studies.editor_probe import edit_metrics, load_diadem, load_synthetic, make_items, summarize
from neurorefiner.studies.editor_probe_real import load_segmenter_masks, real_items

HELDOUT_STACKS = ("OP_6",)
SYNTH_SEED = 41  # the probe's own rendering seed: no training set here renders from it
HEADLINE = (("raw gap filled, synthetic breaks", ">= 0.60"), ("raw gap filled, real breaks", ">= 0.40"),
            ("wrong place: unchanged", ">= 0.95"), ("opposite: unchanged", ">= 0.90"))


def heldout_items(n_per_kind: int = 30, seed: int = 0, segmenters: Sequence[str] = ("unet3d", "nnunet_style"),
                  n_synthetic: int = 2, standin_segmenters: Sequence[str] = ()) -> list:
    """Synthetic defects (break, noise, paste) in OP_6 and in-memory SYNTHETIC stacks, and real defects of
    each segmenter's OP_6 mask (as many as it holds, up to ``n_per_kind`` per kind in all).

    ``standin_segmenters``: also the real breaks and noise of these shipped stand-in segmenters (trained on the
    SYNTHETIC preset's train split) on the same in-memory SYNTHETIC stacks (up to ``n_per_kind`` per kind
    more). OP_6 holds few breaks a segmenter makes (4 for the two DIADEM segmenters), too few to measure a
    share; no editor training run reads these stacks or masks."""
    diadem = load_diadem(HELDOUT_STACKS)
    synthetic = load_synthetic(n=n_synthetic, seed=SYNTH_SEED)
    items = make_items(diadem + synthetic, n_per_kind, kinds=("break", "noise", "paste"), seed=seed)
    per = max(1, -(-n_per_kind // max(len(segmenters), 1)))
    for i, seg in enumerate(segmenters):
        masks = load_segmenter_masks(diadem, seg)
        if masks:
            items += real_items(diadem, masks, per, seed=seed + i)
    per = max(1, -(-n_per_kind // max(len(standin_segmenters), 1)))
    for i, seg in enumerate(standin_segmenters):
        items += real_items(synthetic, standin_masks(synthetic, seg), per, seed=seed + 50 + i)
    return items


def standin_masks(volumes: Sequence[Any], segmenter: str, preset: str = "synthetic_cwmbs_weak"
                  ) -> dict[str, np.ndarray]:
    """The shipped stand-in ``segmenter`` of ``preset``'s masks of the in-memory SYNTHETIC ``volumes`` (its
    recorded post-processing), by volume name."""
    from neurorefiner.inference.init_masks import shipped_checkpoint
    from neurorefiner.inference.segmenter import load_segmenter, segment_array

    model = load_segmenter(shipped_checkpoint(segmenter, preset))
    return {v.name: segment_array(model, v.image, source=v.name)[0] for v in volumes}


def score(ckpt: str | Path, items: Sequence[Any], variants: Sequence[str] = ("correct", "wrong_location", "opposite"),
          operation_gate: bool = False, passes: int = 1, thresholds: Sequence[float] = (0.5,)
          ) -> list[dict[str, Any]]:
    """One row per (item, variant, threshold): the editor probe's per-edit figures of the raw decoding
    (with ``operation_gate``: of the network's output with the edits the operation forbids taken out,
    :func:`~neurorefiner.inference.refiner.gate_by_operation`).

    ``passes`` > 1 feeds each pass's raw result back as the next pass's mask, same instruction: a network
    that extends a gap's ends a little each time closes it in a few passes, still with no decoding; one that
    edits where it should not compounds that too, which the wrong-place and opposite rows show.
    ``thresholds``: *change* thresholds, one row each (the first pass is shared): a voxel is changed only where
    the network gives the change at least that probability (added where p >= t, removed where p < 1 - t,
    :func:`~neurorefiner.inference.decoding.cut_change`); 0.5 is the raw decoding's plain cut. A loss that
    weights the edit's voxels up inflates the change's probability, so filling and leaving alone trade along
    this threshold: the sweep says whether one threshold meets both, which one training run alone cannot."""
    if passes < 1:
        raise ValueError(f"passes must be >= 1, got {passes}")
    if not thresholds or not all(0.0 < t < 1.0 for t in thresholds):
        raise ValueError(f"thresholds must lie in (0, 1), got {list(thresholds)}")
    from neurorefiner.inference.decoding import cut_change
    from neurorefiner.inference.refiner import TopoRefiner

    refiner = TopoRefiner.load(ckpt, operation_gate=operation_gate)
    rows = []
    for i, item in enumerate(items):
        for variant in variants:
            ins = {"correct": item.instruction, "wrong_location": item.instruction.elsewhere(),
                   "opposite": item.instruction.opposite()}[variant]
            first = refiner.probabilities(item.image, item.mask, ins, crop=False)
            allowed = refiner.allowed_region(ins, item.mask.shape)
            for t in thresholds:
                mask, prob = item.mask, first
                for k in range(passes):
                    if k:
                        prob = refiner.probabilities(item.image, mask, ins, crop=False)
                    mask = cut_change(mask, prob, allowed, float(t))
                row = {"item": i, "volume": item.volume, "kind": item.kind, "variant": variant, "decoding": "raw",
                       "passes": passes, "threshold": float(t)}
                row.update(edit_metrics(item, mask))
                rows.append(row)
    return rows


def headline(summary: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """The four figures of :data:`HEADLINE` from :func:`summarize`'s rows."""
    index = {(s["kind"], s["variant"]): s for s in summary}

    def unchanged(variant: str) -> float | None:
        rs = [s for s in summary if s["variant"] == variant]
        n = sum(s["edits"] for s in rs)
        return sum(s["unchanged"] * s["edits"] for s in rs) / n if n else None

    def gap(kind: str) -> float | None:
        s = index.get((kind, "correct"))
        return None if s is None else s["gap_filled"]

    values = [gap("break"), gap("real_break"), unchanged("wrong_location"), unchanged("opposite")]
    return {label: v for (label, _), v in zip(HEADLINE, values, strict=True)}


def run(checkpoints: dict[str, str | Path], out: str | Path, n_per_kind: int = 30, seed: int = 0,
        operation_gate: bool = False, passes: int = 1, thresholds: Sequence[float] = (0.5,),
        standin_segmenters: Sequence[str] = ()) -> dict:
    """Score each named checkpoint on the same held-out items; writes ``<out>/<name>.json`` (summary and
    headline at the first threshold, the same per threshold under ``by_threshold``, item counts) and returns
    the headlines by name and threshold."""
    from neurorefiner.io.atomic import atomic_path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items = heldout_items(n_per_kind, seed, standin_segmenters=standin_segmenters)
    counts: dict[str, int] = {}
    sources: dict[str, int] = {}
    for it in items:
        counts[it.kind] = counts.get(it.kind, 0) + 1
        if it.kind.startswith("real_"):
            key = f"{it.kind} {'SYNTHETIC' if it.volume.startswith('synthetic') else it.volume}"
            sources[key] = sources.get(key, 0) + 1
    result = {}
    for name, ckpt in checkpoints.items():
        t0 = time.time()
        rows = score(ckpt, items, operation_gate=operation_gate, passes=passes, thresholds=thresholds)
        by_threshold = {}
        for t in thresholds:
            summary = summarize([r for r in rows if r["threshold"] == float(t)])
            by_threshold[f"{float(t):g}"] = {"headline": headline(summary), "summary": summary}
        first = by_threshold[f"{float(thresholds[0]):g}"]
        with atomic_path(out / f"{name}.json") as tmp:
            Path(tmp).write_text(json.dumps({"checkpoint": str(ckpt), "operation_gate": operation_gate,
                                             "passes": passes, "threshold": float(thresholds[0]),
                                             "items": counts, "real_items_by_source": sources,
                                             "standin_segmenters": list(standin_segmenters),
                                             "headline": first["headline"],
                                             "summary": first["summary"], "by_threshold": by_threshold,
                                             "seconds": round(time.time() - t0, 1)},
                                            indent=1, default=_plain))
        result[name] = {t: v["headline"] for t, v in by_threshold.items()}
    return result


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else str(v)


def headline_lines(result: dict) -> list[str]:
    """One line per checkpoint and threshold of :func:`run`'s result: ``name threshold=t figure=value ...``."""
    return [f"{name} threshold={t} " + " ".join(f"{k}={'-' if v is None else f'{v:.3f}'}" for k, v in head.items())
            for name, by_t in result.items() for t, head in by_t.items()]
