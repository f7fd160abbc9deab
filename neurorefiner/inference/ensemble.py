"""Packing segmenters trained alike (same recipe, different seeds) into one averaged-ensemble checkpoint;
the network itself is :class:`neurorefiner.models.segmenters.ensemble.AveragedEnsemble`.

Why: on DIADEM dev the CPU U-Net's masks depend on the seed as much as on the recipe (OP_5: F1 0.71 with one
seed, 0.78 with another; experiments/segmenters/cv_dev/). Averaging the members' foreground probabilities is
the usual cure (nnU-Net ships fold ensembles); packing the members into one ``nn.Module`` and one checkpoint
keeps ``neurorefiner segment``, the mask caches and the tables unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from neurorefiner.models.segmenters.ensemble import AveragedEnsemble


def export_ensemble(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Pack exported segmenter checkpoints (``.pt``) into one averaged-ensemble checkpoint.

    The members must have been trained alike: same patch size and input normalisation (otherwise one input
    cannot serve them all); the error names the file that differs. Meta keeps every member's meta, the union
    of their training cases (so held-out checks still see them) and where each came from; no post-processing
    is carried over (it has to be chosen for the average, not for a member).
    """
    from neurorefiner.data.transforms import normalization_spec
    from neurorefiner.errors import InputError
    from neurorefiner.inference.segmenter import export_segmenter, load_segmenter

    if len(paths) < 2:
        raise ValueError(f"an ensemble needs at least two checkpoints, got {len(paths)}")
    segs = [load_segmenter(p) for p in paths]
    first = segs[0]
    for path, seg in zip(paths[1:], segs[1:], strict=True):
        if seg.patch_size != first.patch_size:
            raise InputError(f"patch size {seg.patch_size} differs from {paths[0]}'s {first.patch_size}", path)
        if seg.normalization != first.normalization:
            raise InputError(f"input normalisation {seg.normalization} differs from {paths[0]}'s "
                             f"{first.normalization}", path)
    net = AveragedEnsemble([s.net_config for s in segs])
    for member, seg in zip(net.members, segs, strict=True):
        member.load_state_dict(seg.net.state_dict())
    train_cases = sorted({c for s in segs for c in (s.meta.get("train_cases") or ())})
    meta = {"members": [{"path": str(p), **{k: v for k, v in s.meta.items() if k != "postprocess"}}
                        for p, s in zip(paths, segs, strict=True)],
            "train_cases": train_cases}
    norm = normalization_spec(first.normalization)
    config = {"_target_": f"{AveragedEnsemble.__module__}.AveragedEnsemble",
              "members": [dict(s.net_config) for s in segs]}
    return export_segmenter(net, config, out, first.patch_size, meta=meta, normalization=norm)
