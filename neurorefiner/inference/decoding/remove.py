"""The remove decoding: delete only pieces that are isolated at the named place and that the network marks
background (and the image does not show); trim a piece stuck to a longer structure only where it sticks out,
so a neurite crossing the named cell is never cut (the package docstring has the whole rule)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.context import Context, outside_contact
from neurorefiner.inference.decoding.evidence import brightness
from neurorefiner.inference.decoding.geometry import box_of, grow, label_components
from neurorefiner.inference.decoding.result import EditResult


def decode_remove(mask: np.ndarray, prob: np.ndarray, region: np.ndarray,
                  config: DecodingConfig | Mapping[str, Any] | None = None,
                  context: Context = None, image: np.ndarray | None = None) -> EditResult:
    """Remove the isolated pieces at the named place that the network marks background (module docstring).

    ``mask`` bool, ``prob`` the network's foreground probability after the remove instruction, ``region``
    the named place, all of the block's shape; ``context`` as in :func:`outside_contact`. With ``image``,
    a piece stuck to a longer structure is trimmed only where the image is dark too (below half way
    between the block's background and foreground medians): the network alone also rejects the bright
    flank of a true neurite next to a blob.
    """
    cfg = DecodingConfig.build(config)
    mask = np.asarray(mask, dtype=bool)
    allowed = grow(region, cfg.margin)
    labels, n = label_components(mask)
    if n == 0 or not (mask & allowed).any():
        return EditResult(mask.copy(), False, "nothing to remove: no foreground at the named place", op="remove")
    background = np.asarray(prob) < cfg.threshold
    contact = outside_contact(mask, context)
    size = np.bincount(labels.ravel(), minlength=n + 1)
    in_allowed = np.bincount(labels[allowed], minlength=n + 1)
    in_region = np.bincount(labels[region], minlength=n + 1)
    bg = np.bincount(labels[background], minlength=n + 1)
    touches = np.bincount(labels[contact], minlength=n + 1)
    ids = np.arange(n + 1)
    named = (ids > 0) & (in_region > 0)
    isolated = named & (in_allowed == size) & (touches == 0)
    marked = bg >= cfg.background_share * size
    net_marked = marked.copy()
    bright = None if image is None else brightness(image, mask)
    if bright is not None and cfg.max_brightness < 1.0:  # the image shows it: a true fragment, keep it
        mean_bright = np.bincount(labels.ravel(), weights=bright.ravel(), minlength=n + 1) / np.maximum(size, 1)
        marked &= mean_bright < cfg.max_brightness
    drop = isolated & marked
    out = mask & ~drop[labels]
    pieces = int(drop.sum())
    kept_isolated = int((isolated & ~marked).sum())
    # pieces stuck to a structure that continues elsewhere: trim protrusions the network rejects
    trimmed = 0
    rejected = background & allowed
    if bright is not None:  # without the image a blob and a neurite's own end look alike: no trimming
        rejected &= bright < cfg.dark_level
        for k in np.flatnonzero(named & ~isolated):
            trimmed += _trim_attached(out, labels == k, rejected, contact, cfg)
    pieces += trimmed
    result = EditResult.from_masks(mask, out, "", op="remove", removed_pieces=pieces)
    crossing = int((named & ~isolated).sum())
    if result.changed:
        result.reason = (f"removed {pieces} piece(s), {result.removed_voxels} voxels, at the named place"
                         + (f"; kept {crossing} structure(s) that continue beyond it" if crossing else ""))
    elif kept_isolated:
        shown = int((isolated & net_marked).sum())
        why = ("the image shows them (brightness above max_brightness)" if shown == kept_isolated else
               "the network marks them foreground" if shown == 0 else
               f"the network marks {kept_isolated - shown} foreground and the image shows {shown}")
        result.reason = f"nothing removed: {kept_isolated} isolated piece(s) at the named place, but {why}"
        result.declined = True
    elif crossing:
        result.reason = (f"nothing to remove: the {crossing} structure(s) at the named place continue beyond "
                         "it (a neurite is never cut)")
    else:
        result.reason = "nothing to remove at the named place"
    return result


def _trim_attached(out: np.ndarray, comp: np.ndarray, rejected: np.ndarray, contact: np.ndarray,
                   cfg: DecodingConfig) -> int:
    """Remove (in ``out``) protrusions of component ``comp`` that the network rejects; how many."""
    candidates = comp & rejected & ~contact
    if not candidates.any():
        return 0
    box = box_of(grow(candidates, int(np.ceil(cfg.min_protrusion)) + 2) & comp | candidates)
    c, cand = comp[box], candidates[box]
    plabels, m = label_components(cand)
    removed = 0
    for j in range(1, m + 1):
        piece = plabels == j
        rest = c & ~piece
        if not rest.any():
            continue
        depth = ndi.distance_transform_edt(~rest)
        if float(depth[piece].max()) < cfg.min_protrusion:
            continue  # the flank of a neurite, not a blob stuck to it
        # the rest must stay one piece inside this box, counted against how many pieces it was before
        before = label_components(c)[1]
        if label_components(rest)[1] > before:
            continue
        drop = piece & (depth > cfg.keep_skin) if cfg.keep_skin > 0 else piece
        c = c & ~drop
        out_box = out[box]
        out_box[drop] = False
        removed += 1
    return removed
