"""Why the editor leaves a dataset's masks alone: each step of a sample of the learned loop's editor calls,
read against gold.

For every case of a split, the learned Inspector (the dataset's judge) chooses its edits on the segmenter's
mask; each chosen edit is labelled from the gold (right / wrong / beyond the gold's scope), then put to the
editor the way the loop puts it (the learned Advisor's first frame and sentence, the frame's surroundings as
context) and each step is recorded on its own:

* **network**: for a removal, the share of the piece's voxels the network marks background (the decoding
  removes a piece at >= ``background_share``); for a join, the share of the straight gap it marks foreground;
* **decoding**: whether the decoded edit changed a voxel, and its reason (for a removal: the image-brightness
  gate, ``max_brightness``, keeps pieces the image shows even when the network drops them);
* **validator**: the learned Validator's verdict on the decoded edit.

So a refusal is put where it happens: the judge (its removals wrong by gold), the network (it keeps what the
judge drops), the decoding's gates, or the Validator. Removals are grouped per block as the loop groups them
(:mod:`neurorefiner.agents.learned.noise_groups`) unless ``group_noise`` is off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REASONS = (("changed", "changed the mask"),
           ("image shows", "kept: the image shows the pieces (brightness gate)"),
           ("network marks", "kept: the network marks them foreground"),
           ("continue beyond", "kept: structure continuing beyond the named place"),
           ("apart", "not joined: no bridge found / ends still apart"),
           ("", "other"))


def reason_kind(changed: bool, reason: str) -> str:
    """One of :data:`REASONS`' labels for a decoded edit's reason text."""
    if changed:
        return REASONS[0][1]
    text = reason.lower()
    for key, label in REASONS[1:]:
        if key and key in text:
            return label
    if "network" in text and "image" in text:
        return "kept: the network and the image"
    return "other: " + reason.split(":")[0][:60]


def _context(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float], block_size: int, editor_size:
             Sequence[int], halo: int, bid: int) -> Any:
    from neurorefiner.agents.roles import BlockContext
    from neurorefiner.topology.blocks import expand, grid_blocks

    block = {b.id: b for b in grid_blocks(mask.shape, block_size, None)}[bid]
    region = expand(block.slices, (0, halo, halo), mask.shape)
    return BlockContext(0, block, region, image[region], mask[region].copy(), tuple(editor_size),
                        tuple(spacing))  # type: ignore[arg-type]


def _network_share(refiner: Any, img: np.ndarray, msk: np.ndarray, ins: Any, target: np.ndarray, op: str) -> float:
    """Removal: share of the piece's voxels the network marks background; join: share of the gap it fills."""
    if not target.any():
        return float("nan")
    prob = refiner.probabilities(img, msk, ins, crop=True)
    return float((prob[target] < refiner.threshold).mean() if op == "remove" else (prob[target] >= 0.5).mean())


def _gap_voxels(defect: Any, ctx: Any, frame: Any, shape: Sequence[int]) -> np.ndarray:
    from neurorefiner.defects.describe import _as_mask, segment_voxels

    a, b = (np.asarray(v, float) - np.asarray(ctx.origin) for v in defect.anchors[:2])
    seg = frame.to_frame(segment_voxels(a, b, radius=0))
    return _as_mask(seg, shape) & ~np.asarray(ctx.mask[frame.window], bool)


def _piece_voxels(defect: Any, ctx: Any, frame: Any, shape: Sequence[int]) -> np.ndarray:
    from neurorefiner.agents.learned.advisor import LearnedAdvisor
    from neurorefiner.defects.describe import _as_mask

    vox = LearnedAdvisor._pieces(ctx, np.asarray(defect.anchors, float) - np.asarray(ctx.origin))
    return np.zeros(tuple(shape), bool) if vox is None else _as_mask(frame.to_frame(vox), shape)


def audit_case(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float], gold: Any, inspector: Any,
               refiner: Any, sample: int, rng: np.random.Generator, block_size: int = 128) -> list[dict]:
    """Rows for up to ``sample`` joins and ``sample`` removals the Inspector chose on one mask."""
    from neurorefiner.adaptation.judge.gold_labels import GoldIndex, gold_label
    from neurorefiner.agents.editor import frame_context
    from neurorefiner.agents.learned.advisor import LearnedAdvisor
    from neurorefiner.agents.learned.roles import LearnedValidator, _defect
    from neurorefiner.agents.roles import Advice, CallInfo, Flag, Step
    from neurorefiner.topology.blocks import block_of_point, grid_blocks

    editor_size, halo = (32, 64, 64), 32
    index = GoldIndex(gold, spacing, mask.shape)
    chosen = inspector.chosen(image, mask, spacing)
    blocks = grid_blocks(mask.shape, block_size, None)
    by_block: dict[tuple[int, str], list] = {}
    for c, p in chosen:
        if c.kind not in ("join", "remove"):
            continue
        where = np.asarray(c.anchors, float).mean(axis=0)
        b = block_of_point(blocks, tuple(int(round(v)) for v in np.clip(where, 0, np.asarray(mask.shape) - 1)))
        if b is not None:
            by_block.setdefault((b.id, c.kind), []).append((c, p, gold_label(c, index)))
    advisor, validator, rows = LearnedAdvisor(), LearnedValidator(), []
    for kind in ("join", "remove"):
        keys = [k for k in by_block if k[1] == kind]
        for i in rng.permutation(len(keys))[:sample]:
            bid, _ = keys[int(i)]
            items = by_block[(bid, kind)]
            defects = [_defect(c, p) for c, p, _ in items]
            if kind == "remove" and inspector.group_noise:
                from neurorefiner.agents.learned.noise_groups import group_noise

                defects = group_noise(defects, inspector.noise_span)[:1]
                items = [it for it in items if it[0].anchors[0] in set(defects[0].anchors)]
            defect = defects[0]
            labels = [lab for _, _, lab in items] if kind == "remove" else [items[0][2]]
            ctx = _context(image, mask, spacing, block_size, editor_size, halo, bid)
            tries = advisor.candidates(ctx, defect)
            row = {"kind": kind, "block": bid, "pieces": len(defect.anchors) if kind == "remove" else 1,
                   "gold_right": sum(v == 1 for v in labels), "gold_wrong": sum(v == 0 for v in labels),
                   "gold_unknown": sum(v is None for v in labels), "judge_p": round(float(items[0][1]), 3)}
            if not tries:
                rows.append({**row, "instruction": "", "decoding": "no instruction", "validator": ""})
                continue
            ins, frame = tries[0]
            img, msk = ctx.image[frame.window], ctx.mask[frame.window]
            target = (_piece_voxels if kind == "remove" else _gap_voxels)(defect, ctx, frame, msk.shape)
            result = refiner.edit_result(img, msk, ins, context=frame_context(frame, ctx.mask, 4))
            flag = Flag(bid, "FN" if kind == "join" else "FP", (defect,))
            verdict = validator.validate(ctx, flag, defect, Advice(ins, frame, CallInfo("study")), msk,
                                         result.mask, Step(0, bid, 0, 0))
            rows.append({**row, "instruction": ins.format(),
                         "network_share": round(_network_share(refiner, img, msk, ins, target, ins.op), 3),
                         "changed": bool(result.changed), "decoding": reason_kind(result.changed, result.reason),
                         "reason": result.reason, "accepted": bool(verdict.accept), "validator": verdict.reason})
    return rows


def _editor(checkpoint: str | None, decoding: dict[str, Any] | None = None) -> Any:
    """The loop's editor (:func:`~neurorefiner.inference.editor_config.editor_config`), ``checkpoint`` and
    ``decoding`` overriding its checkpoint and decoding settings (as an experiment config's ``editor.*`` does)."""
    from neurorefiner.agents.editor import load_topo_refiner
    from neurorefiner.inference.editor_config import editor_config

    node = editor_config()
    node["decoding"] = {**(node.get("decoding") or {}), **(decoding or {})}
    if checkpoint:
        node["checkpoint"] = checkpoint
    return load_topo_refiner(**node)


def summary_rows(rows: Sequence[dict]) -> list[dict]:
    """Per kind: calls, gold's verdict on what was asked, what the network, the decoding and the Validator did."""
    out = []
    for kind in ("join", "remove"):
        rs = [r for r in rows if r["kind"] == kind]
        if not rs:
            continue
        called = [r for r in rs if r.get("instruction")]
        share = [r["network_share"] for r in called if np.isfinite(r.get("network_share", np.nan))]
        right = sum(r["gold_right"] for r in rs)
        judged = right + sum(r["gold_wrong"] for r in rs)
        reasons: dict[str, int] = {}
        for r in called:
            reasons[r["decoding"]] = reasons.get(r["decoding"], 0) + 1
        out.append({"kind": kind, "calls": len(called), "pieces": sum(r["pieces"] for r in rs),
                    "gold right %": round(100 * right / max(judged, 1), 1),
                    "network agrees %": round(100 * float(np.mean([s >= 0.5 for s in share])), 1) if share else "",
                    "decoding changed %": round(100 * sum(r["changed"] for r in called) / max(len(called), 1), 1),
                    "accepted %": round(100 * sum(r["accepted"] for r in called) / max(len(called), 1), 1),
                    "why unchanged": "; ".join(f"{k}: {v}" for k, v in sorted(reasons.items(), key=lambda t: -t[1])
                                               if k != REASONS[0][1])})
    return out


def editor_calls(dataset: str, split: str, segmenter: str, judge: str | None, out: Path, sample: int = 30,
                 limit: int | None = None, checkpoint: str | None = None, group_noise: bool = True,
                 seed: int = 0, progress: bool = True, command: str = "", decoding: dict[str, Any] | None = None,
                 name: str | None = None) -> Path:
    """The audit over a split's cases (``sample`` joins and removals a case, drawn by block); writes
    ``editor_calls_<dataset>.csv`` (one row a call) and ``.md`` (the summary) into ``out``."""
    from tqdm import tqdm

    from neurorefiner.adaptation.judge.training import gold_cases
    from neurorefiner.agents.learned.roles import LearnedInspector
    from neurorefiner.evaluation.tables import provenance, write_markdown, write_rows_csv

    stamp = provenance(command)
    if split == "test":
        from neurorefiner.errors import InputError

        raise InputError("the editor-call audit reads dev/train/val splits only (test volumes are never tuned on)")
    inspector = LearnedInspector(judge, group_noise=group_noise)
    refiner = _editor(checkpoint, decoding)
    rows = []
    for gc in tqdm(gold_cases(dataset, split, [segmenter], limit), desc=f"editor calls {dataset}", unit="case",
                   disable=not progress):
        rng = np.random.default_rng([seed, len(rows)])
        rows += [{"case": gc.case, **r} for r in audit_case(gc.image, gc.mask, gc.spacing, gc.gold, inspector,
                                                              refiner, sample, rng)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = name or f"editor_calls_{dataset}"
    write_rows_csv(out / f"{stem}.csv", rows,
                   ["case", "kind", "block", "pieces", "gold_right", "gold_wrong", "gold_unknown", "judge_p",
                    "instruction", "network_share", "changed", "decoding", "reason", "accepted", "validator"])
    label = "SYNTHETIC" if dataset.startswith("synthetic") else "real data"
    summ = summary_rows(rows)
    cols = list(summ[0]) if summ else []
    lines = [f"# Editor calls on {dataset} {split} ({label}), {segmenter} masks", "",
             f"Produced by `{command}` on {stamp['date']} at commit `{stamp['commit']}`.", "",
             f"Judge `{judge or 'checkpoints/judge.json'}`; removals grouped per block: {group_noise}; decoding "
             f"overrides: {decoding or 'none'}. Per call "
             "(neurorefiner.studies.editor_calls): gold's verdict on the pieces or join asked for, the share the "
             "network agrees with (removal: piece voxels it marks background; join: gap voxels it fills), whether "
             "the decoded edit changed a voxel and why not, and the Validator's verdict.", "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in summ]
    return write_markdown(out / f"{stem}.md", "\n".join(lines) + "\n")
