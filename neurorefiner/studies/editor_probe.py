"""Probe of the editor: does ``TopoRefiner`` do what it is told, raw network and decoded side by side?

Defects are cut into gold blocks of development data only (DIADEM OP_1-OP_6 and a synthetic preset; never
OP_7-OP_9) with the stage-1 generators of :mod:`neurorefiner.defects`:

* ``break``: a neurite cut by erosion (k in [5, 20]);
* ``noise``: Gaussian blobs anywhere in the block;
* ``paste``: a patch of another neuron's gold mask;
* ``crossing``: blobs in a cell that a true neurite crosses (the case where thresholding cut the tree);
* ``real_break`` / ``real_noise`` (:func:`~neurorefiner.studies.editor_probe_real.real_items`): the shipped
  segmenter's own errors on the DIADEM development stacks (its cached initial masks against gold, as the
  stage-2 miner finds them), put into the gold block one at a time: a real break is a stretch of gold the
  segmenter's mask misses where its mask is in two pieces (the gold block minus those voxels falls apart, and
  no one mask component covers both sides), a real noise defect is a piece of the mask away from gold
  (isolated components and voxels more than 3 voxels from gold). Their shapes, sizes and places (where the
  image is faint or misleading) are the segmenter's; each is edited alone, so the figures stay per defect.

Each defect is edited four times, with the correct instruction, a constant one (the operation at
``center-center-center``, what a frame centred on every edit made the Advisor say: the text names no place),
the same operation at a wrong place (:meth:`Instruction.elsewhere`) and the opposite operation at the right
place (:meth:`Instruction.opposite`), decoded three ways: raw = threshold + confinement of the network's pass
on the whole block, network = the same pass thresholded with no confinement (what the network alone does
with the text), topology = :mod:`neurorefiner.inference.decoding` of its pass on the crop around the named
place, as :meth:`TopoRefiner.edit_result` runs them. The correct instruction is written as the learned
Advisor writes it: by :mod:`neurorefiner.defects.describe` on the defect's voxels in a block that holds the
defect as the editor's training crops do (:func:`~neurorefiner.defects.describe.crop_start`). The mask
outside the block is the gold mask, given to the decoding as context (a halo), as the agents' loop would pass
the current mask.

Per edit: changed (any voxel), reconnected (block Betti-0 down to gold's), share of the gap filled,
true-structure voxels removed, false merges (an edited component holding voxels of two gold components
the input kept apart), share of the noise removed. :func:`summarize` turns the rows into the table,
:func:`~neurorefiner.studies.editor_probe_report.write_report` writes ``editor_probe.md`` and the CSVs (with date
and commit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import cc3d
import numpy as np

from neurorefiner.defects import add_noise_blobs, betti0, describe_change, make_break, paste_annotation
from neurorefiner.defects.breaks import Defect
from neurorefiner.defects.noise import gaussian_blobs
from neurorefiner.topology.instructions import Instruction

KINDS = ("break", "noise", "paste", "crossing", "real_break", "real_noise")
GENERATED = ("break", "noise", "paste", "crossing")
REAL = ("real_break", "real_noise")
BREAK_KINDS = ("break", "real_break")
VARIANTS = ("correct", "constant", "wrong_location", "opposite")
DECODINGS = ("raw", "network", "topology")
CONSTANT = {"connect": Instruction("repair", "center-center-center"),
            "repair": Instruction("repair", "center-center-center"),
            "remove": Instruction("remove", "center-center-center")}
"""The sentence a frame centred on every edit gave (one per operation): the text carries no place."""
DEV_STACKS = ("OP_1", "OP_2", "OP_3", "OP_4", "OP_5", "OP_6")
HELD_OUT = frozenset({"OP_7", "OP_8", "OP_9"})
Triple = tuple[int, int, int]


@dataclass
class ProbeVolume:
    """A development volume in memory: normalised image, gold mask, its foreground (flat indices)."""

    name: str
    image: np.ndarray
    gold: np.ndarray
    fg: np.ndarray


@dataclass
class ProbeItem:
    """One defect in one block: what the editor sees and what it should give back."""

    volume: str
    kind: str
    start: Triple
    image: np.ndarray
    gold: np.ndarray
    mask: np.ndarray
    instruction: Instruction
    context: np.ndarray  # the defective block inside the gold mask around it (halo)


# ------------------------------------------------------------------------------------------------- data
def load_diadem(names: Sequence[str] = DEV_STACKS) -> list[ProbeVolume]:
    """The DIADEM development stacks (gold rasterised from the SWC, image min-max normalised)."""
    from neurorefiner.data import get_dataset

    bad = HELD_OUT.intersection(names)
    if bad:
        raise ValueError(f"{sorted(bad)} are held-out test stacks: never probe or tune on them")
    out = []
    for case in get_dataset("diadem").cases("dev"):
        if case.name in names:
            vol = case.image()
            gold = np.asarray(case.label(vol.shape)) > 0
            out.append(ProbeVolume(case.name, vol.normalized(), gold, np.flatnonzero(gold)))
    return out


def load_synthetic(preset: str = "synthetic_cwmbs_weak", n: int = 3, shape: Triple = (64, 192, 192),
                   seed: int = 0) -> list[ProbeVolume]:
    """``n`` stacks of a synthetic preset rendered in memory at ``shape`` (SYNTHETIC, named so)."""
    from neurorefiner.synth.params import SynthParams
    from neurorefiner.synth.presets import preset_params
    from neurorefiner.synth.render import render

    params = SynthParams.from_dict({"shape": tuple(shape)}, base=preset_params(preset))
    out = []
    for i in range(n):
        r = render(params, int(np.random.SeedSequence([seed, 7, i]).generate_state(1)[0]))
        img = r.image.astype(np.float32)
        lo, hi = float(img.min()), float(img.max())
        img = np.clip((img - lo) / (hi - lo), 0, 1) if hi > lo else np.zeros_like(img)
        gold = np.asarray(r.label) > 0
        out.append(ProbeVolume(f"{preset}_{i}", img, gold, np.flatnonzero(gold)))
    return out


def crop(array: np.ndarray, start: Sequence[int], size: Sequence[int]) -> np.ndarray:
    """``array[start:start+size]`` with zeros where the crop leaves the volume."""
    src = tuple(slice(max(0, s), min(n, s + c)) for s, c, n in zip(start, size, array.shape, strict=True))
    out = np.zeros(tuple(size), dtype=array.dtype)
    out[tuple(slice(a.start - s, a.stop - s) for a, s in zip(src, start, strict=True))] = array[src]
    return out


def _crop_start(vol: ProbeVolume, rng: np.random.Generator, size: Triple) -> list[int]:
    centre = np.unravel_index(int(vol.fg[rng.integers(vol.fg.size)]), vol.gold.shape)
    out = []
    for c, s, n in zip(centre, size, vol.gold.shape, strict=True):
        start = c - s // 2 + int(rng.integers(-(s // 4), s // 4 + 1))
        out.append(int(np.clip(start, 0, n - s)) if n >= s else (n - s) // 2)
    return out


def crossing_noise(gold: np.ndarray, rng: np.random.Generator, margin: int = 4,
                   max_tries: int = 30) -> Defect | None:
    """Gaussian blobs (as :func:`add_noise_blobs`) placed near a true neurite inside a grid cell that the
    neurite crosses: the named cell of the instruction holds both the noise and a structure that continues
    beyond it. None when no such cell or placement was found."""
    from neurorefiner.inference.decoding import grow

    labels = cc3d.connected_components(np.ascontiguousarray(gold), connectivity=26)
    for _ in range(max_tries):
        fg = np.argwhere(gold)
        if len(fg) == 0:
            return None
        anchor = fg[rng.integers(len(fg))]
        n = int(rng.integers(1, 4))
        centres = anchor + rng.normal(0.0, 1.0, (n, 3)) * np.array([1.5, 4.0, 4.0])
        centres = np.clip(centres, 0, np.array(gold.shape) - 1)
        sig = rng.uniform(1.0, 2.5, (n, 1))
        sigmas = np.concatenate([np.maximum(sig * 0.5, 0.5), sig, sig], axis=1)
        blobs = gaussian_blobs(gold.shape, centres, sigmas, rng.uniform(0.7, 1.5, n))
        changed = blobs & ~gold
        if changed.sum() < 10:
            continue
        ins = describe_change(changed, "fp")
        grown = grow(ins.region(gold.shape), margin)
        inside = np.unique(labels[ins.region(gold.shape) & gold])
        inside = inside[inside > 0]
        if not any((labels[~grown] == k).any() for k in inside):
            continue  # no true neurite runs through the named place and out of it
        return Defect(gold | blobs, gold.copy(), ins, "crossing", changed)
    return None


def make_item(vol: ProbeVolume, kind: str, rng: np.random.Generator, size: Triple,
              sources: Sequence[ProbeVolume], halo: int = 2, min_foreground: int = 40,
              max_tries: int = 40) -> ProbeItem | None:
    """One defect of ``kind`` in a block of ``vol`` (None when none could be made)."""
    for _ in range(max_tries):
        start = _crop_start(vol, rng, size)
        gold = crop(vol.gold, start, size)
        if gold.sum() < min_foreground:
            continue
        if kind == "break":
            defect = make_break(gold, rng)
        elif kind == "noise":
            defect = add_noise_blobs(gold, rng)
        elif kind == "paste":
            other = sources[int(rng.integers(len(sources)))]
            src = crop(other.gold, _crop_start(other, rng, size), size)
            defect = paste_annotation(gold, rng, [src])
        elif kind == "crossing":
            defect = crossing_noise(gold, rng)
        elif kind in REAL:
            raise ValueError(f"{kind!r} defects come from a segmenter's masks: use real_items")
        else:
            raise ValueError(f"unknown defect kind {kind!r}; known: {KINDS}")
        if defect is None:
            continue
        context = crop(vol.gold, [s - halo for s in start], [s + 2 * halo for s in size])
        context[halo:-halo, halo:-halo, halo:-halo] = defect.mask
        return ProbeItem(vol.name, kind, tuple(start), crop(vol.image, start, size), gold, defect.mask,
                         defect.instruction, context)
    return None


def make_items(volumes: Sequence[ProbeVolume], n_per_kind: int = 50, kinds: Sequence[str] = KINDS,
               size: Triple = (32, 64, 64), seed: int = 0) -> list[ProbeItem]:
    """``n_per_kind`` defects of each kind, round-robin over the volumes, seeded per item."""
    items = []
    for ki, kind in enumerate(kinds):
        made = 0
        for i in range(n_per_kind * 4):
            if made == n_per_kind:
                break
            vol = volumes[(made + ki) % len(volumes)]
            rng = np.random.default_rng([seed, ki, i])
            others = [v for v in volumes if v.name != vol.name] or [vol]
            item = make_item(vol, kind, rng, size, others)
            if item is not None:
                items.append(item)
                made += 1
    return items




# ---------------------------------------------------------------------------------------------- metrics
def merged_gold_pieces(mask: np.ndarray, gold_labels: np.ndarray) -> int:
    """How many gold components are joined to another one by ``mask`` (sum over mask components of
    the number of gold components it holds, minus one)."""
    labels = cc3d.connected_components(np.ascontiguousarray(mask), connectivity=26)
    both = (labels > 0) & (gold_labels > 0)
    if not both.any():
        return 0
    pairs = np.unique(np.stack([labels[both], gold_labels[both]]), axis=1)
    _, counts = np.unique(pairs[0], return_counts=True)
    return int((counts - 1).sum())


def edit_metrics(item: ProbeItem, edited: np.ndarray) -> dict[str, Any]:
    """The per-edit figures (see the module docstring)."""
    gold, before = item.gold, item.mask
    gap = gold & ~before
    noise = before & ~gold
    gold_labels = cc3d.connected_components(np.ascontiguousarray(gold), connectivity=26)
    return {
        "changed": bool((edited != before).any()),
        "added": int((edited & ~before).sum()),
        "removed": int((before & ~edited).sum()),
        "reconnected": bool(betti0(edited) <= betti0(gold)) if gap.any() else None,
        "gap_filled": float((edited & gap).sum() / gap.sum()) if gap.any() else None,
        "true_removed": int((gold & before & ~edited).sum()),
        "false_merge": merged_gold_pieces(edited, gold_labels) > merged_gold_pieces(before, gold_labels),
        "noise_removed": float((noise & ~edited).sum() / noise.sum()) if noise.any() else None,
    }


def variant_instruction(correct: Instruction, variant: str) -> Instruction:
    """The instruction a variant of the probe gives (module docstring)."""
    if variant == "correct":
        return correct
    if variant == "constant":
        return CONSTANT[correct.op]
    if variant == "wrong_location":
        return correct.elsewhere()
    if variant == "opposite":
        return correct.opposite()
    raise ValueError(f"unknown variant {variant!r}; known: {VARIANTS}")


def probe(refiner: Any, items: Sequence[ProbeItem], variants: Sequence[str] = VARIANTS,
          progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """Edit every item with every variant of its instruction; one row per (item, variant, decoding)."""
    rows = []
    for i, item in enumerate(items):
        for variant in variants:
            ins = variant_instruction(item.instruction, variant)
            probs, net_s = {}, {}
            for decoding in ("raw", "topology"):  # raw: the whole block; topology: the crop the edit uses
                t0 = time.perf_counter()
                probs[decoding] = refiner.probabilities(item.image, item.mask, ins, crop=decoding == "topology")
                net_s[decoding] = time.perf_counter() - t0
            probs["network"], net_s["network"] = probs["raw"], net_s["raw"]
            for decoding in DECODINGS:
                t1 = time.perf_counter()
                from neurorefiner.inference.decoding import raw_decode

                if decoding == "network":
                    res = raw_decode(item.mask, probs[decoding], np.ones(item.mask.shape, bool), refiner.threshold)
                else:
                    res = refiner.decode_probabilities(item.image, item.mask, ins, probs[decoding],
                                                       context=item.context, decoding=decoding)
                row = {"item": i, "volume": item.volume, "kind": item.kind, "variant": variant,
                       "decoding": decoding, "instruction": ins.format(), "network_s": round(net_s[decoding], 4),
                       "decode_s": round(time.perf_counter() - t1, 4), "reason": res.reason,
                       "join_length": res.joins[-1].length if res.joins else None,
                       "join_darkness": round(res.joins[-1].darkness, 3) if res.joins else None}
                row.update(edit_metrics(item, res.mask))
                rows.append(row)
        if progress is not None:
            progress(i + 1, len(items))
    return rows


def _mean(values: Iterable[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def summarize(rows: Sequence[dict[str, Any]], noise_done: float = 0.9) -> list[dict[str, Any]]:
    """One row per (kind, variant, decoding): edits, share changed / unchanged, and the kind's figures.
    A noise defect counts as removed when at least ``noise_done`` of its voxels are gone."""
    out = []
    keys = sorted({(r["kind"], r["variant"], r["decoding"]) for r in rows},
                  key=lambda k: (KINDS.index(k[0]), VARIANTS.index(k[1]), DECODINGS.index(k[2])))
    for kind, variant, decoding in keys:
        rs = [r for r in rows if (r["kind"], r["variant"], r["decoding"]) == (kind, variant, decoding)]
        s: dict[str, Any] = {"kind": kind, "variant": variant, "decoding": decoding, "edits": len(rs),
                             "unchanged": _mean(not r["changed"] for r in rs),
                             "true_removed_mean": _mean(r["true_removed"] for r in rs),
                             "true_removed_zero": _mean(r["true_removed"] == 0 for r in rs),
                             "false_merge": _mean(r["false_merge"] for r in rs),
                             "reconnected": None, "gap_filled": None, "noise_removed": None,
                             "noise_removed_share": None}
        if kind in BREAK_KINDS:
            s["reconnected"] = _mean(r["reconnected"] for r in rs)
            s["gap_filled"] = _mean(r["gap_filled"] for r in rs)
        else:
            s["noise_removed"] = _mean((r["noise_removed"] or 0.0) >= noise_done for r in rs)
            s["noise_removed_share"] = _mean(r["noise_removed"] for r in rs)
        out.append(s)
    return out


# ---------------------------------------------------------------------------------------------- speed
def time_edit(refiner: Any, image: np.ndarray, mask: np.ndarray, instruction: str | Instruction,
              context: Any = None, repeats: int = 3) -> dict[str, float]:
    """Median seconds (wall clock and process CPU time) of the network pass on the whole block
    (``raw_s``), the network pass on the crop around the named place the refiner uses (``crop_s``; the
    whole block when its ``crop_margin`` is None) and one decoded edit (network on the crop + decoding,
    ``decoded_s``), measured interleaved in the same process (the first, warm-up passes are not
    counted), with the 1-minute load average before and after (a shared machine's load inflates wall
    times; the ratios are the comparable figures)."""
    import os

    steps = {"raw": lambda: refiner.probabilities(image, mask, instruction, crop=False),
             "crop": lambda: refiner.probabilities(image, mask, instruction),
             "decoded": lambda: refiner.edit_result(image, mask, instruction, context=context)}
    for fn in steps.values():
        fn()
    load = [os.getloadavg()[0]]
    wall: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeats):
        for name, fn in steps.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    load.append(os.getloadavg()[0])
    out: dict[str, float] = {}
    for name in steps:
        out[f"{name}_s"] = float(np.median(wall[name]))
        out[f"{name}_cpu_s"] = float(np.median(cpu[name]))
    r = out["raw_s"]
    out["ratio"] = out["decoded_s"] / r if r > 0 else float("nan")
    out["crop_ratio"] = out["crop_s"] / r if r > 0 else float("nan")
    out["load_before"], out["load_after"] = load
    return out


def time_break_edit(refiner: Any, volumes: Sequence[ProbeVolume], shape: Triple = (64, 128, 128),
                    seed: int = 0, repeats: int = 3) -> dict[str, Any]:
    """:func:`time_edit` on a block of ``shape`` (the largest the agents use) with a break cut into it,
    from the first volume large enough."""
    vol = next((v for v in volumes if all(a >= b for a, b in zip(v.gold.shape, shape, strict=True))), volumes[0])
    rng = np.random.default_rng(seed)
    for _ in range(50):
        start = _crop_start(vol, rng, shape)
        defect = make_break(crop(vol.gold, start, shape), rng)
        if defect is not None:
            break
    else:
        raise ValueError(f"no break could be cut into a {shape} block of {vol.name}")
    halo = 2
    context = crop(vol.gold, [s - halo for s in start], [s + 2 * halo for s in shape])
    context[halo:-halo, halo:-halo, halo:-halo] = defect.mask
    out: dict[str, Any] = time_edit(refiner, crop(vol.image, start, shape), defect.mask, defect.instruction,
                                    context=context, repeats=repeats)
    out.update({"shape": " x ".join(str(s) for s in shape), "repeats": repeats, "volume": vol.name})
    return out
