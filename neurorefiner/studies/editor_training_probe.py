"""Score TopoRefineNet checkpoints on held-out development defects, raw network only: what a training
recipe (loss, data, budget) buys the network itself, before any decoding helps.

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

from neurorefiner.studies.editor_probe import (
    edit_metrics,
    load_diadem,
    load_segmenter_masks,
    load_synthetic,
    make_items,
    real_items,
    summarize,
)

HELDOUT_STACKS = ("OP_6",)
SYNTH_SEED = 41  # the probe's own rendering seed: no training set here renders from it
HEADLINE = (("raw gap filled, synthetic breaks", ">= 0.60"), ("raw gap filled, real breaks", ">= 0.40"),
            ("wrong place: unchanged", ">= 0.95"), ("opposite: unchanged", ">= 0.90"))


def heldout_items(n_per_kind: int = 30, seed: int = 0, segmenters: Sequence[str] = ("unet3d", "nnunet_style"),
                  n_synthetic: int = 2) -> list:
    """Synthetic defects (break, noise, paste) in OP_6 and in-memory SYNTHETIC stacks, and real defects of
    each segmenter's OP_6 mask (as many as it holds, up to ``n_per_kind`` per kind in all)."""
    diadem = load_diadem(HELDOUT_STACKS)
    volumes = diadem + load_synthetic(n=n_synthetic, seed=SYNTH_SEED)
    items = make_items(volumes, n_per_kind, kinds=("break", "noise", "paste"), seed=seed)
    per = max(1, -(-n_per_kind // max(len(segmenters), 1)))
    for i, seg in enumerate(segmenters):
        masks = load_segmenter_masks(diadem, seg)
        if masks:
            items += real_items(diadem, masks, per, seed=seed + i)
    return items


def score(ckpt: str | Path, items: Sequence[Any], variants: Sequence[str] = ("correct", "wrong_location", "opposite"),
          operation_gate: bool = False, passes: int = 1) -> list[dict[str, Any]]:
    """One row per (item, variant): the editor probe's per-edit figures of the raw decoding (with
    ``operation_gate``: of the network's output with the edits the operation forbids taken out,
    :func:`~neurorefiner.inference.refiner.gate_by_operation`).

    ``passes`` > 1 feeds each pass's raw result back as the next pass's mask, same instruction: a network
    that extends a gap's ends a little each time closes it in a few passes, still with no decoding; one that
    edits where it should not compounds that too, which the wrong-place and opposite rows show."""
    if passes < 1:
        raise ValueError(f"passes must be >= 1, got {passes}")
    from neurorefiner.inference.refiner import TopoRefiner

    refiner = TopoRefiner.load(ckpt, operation_gate=operation_gate)
    rows = []
    for i, item in enumerate(items):
        for variant in variants:
            ins = {"correct": item.instruction, "wrong_location": item.instruction.elsewhere(),
                   "opposite": item.instruction.opposite()}[variant]
            mask = item.mask
            for _ in range(passes):
                prob = refiner.probabilities(item.image, mask, ins, crop=False)
                mask = refiner.decode_probabilities(item.image, mask, ins, prob, context=item.context,
                                                    decoding="raw").mask
            row = {"item": i, "volume": item.volume, "kind": item.kind, "variant": variant, "decoding": "raw",
                   "passes": passes}
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
        operation_gate: bool = False, passes: int = 1) -> dict:
    """Score each named checkpoint on the same held-out items; writes ``<out>/<name>.json`` (summary,
    headline, item counts) and returns the headlines by name."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items = heldout_items(n_per_kind, seed)
    counts: dict[str, int] = {}
    for it in items:
        counts[it.kind] = counts.get(it.kind, 0) + 1
    result = {}
    for name, ckpt in checkpoints.items():
        t0 = time.time()
        rows = score(ckpt, items, operation_gate=operation_gate, passes=passes)
        summary = summarize(rows)
        head = headline(summary)
        from neurorefiner.io.atomic import atomic_path

        with atomic_path(out / f"{name}.json") as tmp:
            Path(tmp).write_text(json.dumps({"checkpoint": str(ckpt), "operation_gate": operation_gate,
                                             "passes": passes,
                                             "items": counts, "headline": head,
                                             "summary": summary, "seconds": round(time.time() - t0, 1)},
                                            indent=1, default=_plain))
        result[name] = head
    return result


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else str(v)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m neurorefiner.studies.editor_training_probe --out DIR name=ckpt ...``"""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", help="name=path of each checkpoint to score")
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=30, help="defects per kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--operation-gate", action="store_true",
                   help="take out the edits the instruction's operation forbids (connect/repair add, remove deletes)")
    p.add_argument("--passes", type=int, default=1,
                   help="network passes per edit, each fed the last one's raw result (1 = one pass)")
    args = p.parse_args(argv)
    named = dict(c.split("=", 1) for c in args.checkpoints)
    for name, head in run(named, args.out, args.n, args.seed, args.operation_gate, args.passes).items():
        print(name, " ".join(f"{k}={'-' if v is None else f'{v:.3f}'}" for k, v in head.items()))


if __name__ == "__main__":
    main()
