"""Which decoding an instruction gets: remove -> :func:`decode_remove` (falling through to cutting an attached
branch between two named cells), connect / repair -> :func:`decode_connect`; and the shortcut that decides a
removal without the network's pass when no output of it could change the result."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.connect import decode_connect
from neurorefiner.inference.decoding.context import Context
from neurorefiner.inference.decoding.remove import decode_remove
from neurorefiner.inference.decoding.result import EditResult
from neurorefiner.topology.instructions import Instruction


def remove_decided_without_network(mask: np.ndarray, image: np.ndarray | None, instruction: Instruction,
                                   config: DecodingConfig | Mapping[str, Any] | None = None,
                                   context: Context = None) -> EditResult | None:
    """The remove edit's result when no network output could change it, else None.

    A network that marks every voxel background is the most a removal can get: more isolated pieces
    pass the background share and more of an attached piece is rejected. When even that removes nothing
    (nothing at the named place, only structures that continue beyond it, isolated pieces the image
    shows), the network's pass would be wasted: on DIADEM most noise the Inspector names is a bright
    fragment the brightness gate keeps."""
    if instruction.op != "remove":
        return None
    mask = np.asarray(mask, dtype=bool)
    best = decode_remove(mask, np.zeros(mask.shape, np.float32), instruction.region(mask.shape), config, context,
                         image)
    if best.changed:
        return None
    if instruction.end is not None:
        if DecodingConfig.build(config).cut_max_probability < 1.0:
            return None  # a cut the network must vouch for needs its pass
        best = _cut_instead(mask, None, instruction, config, best)
        if best.changed:
            best.reason += " (decided without a network pass: topology alone executes a decided cut)"
            return best
    best.reason += " (decided without a network pass: no output of it could remove anything here)"
    return best


def decode(mask: np.ndarray, prob: np.ndarray, image: np.ndarray | None, instruction: Instruction,
           config: DecodingConfig | Mapping[str, Any] | None = None, context: Context = None) -> EditResult:
    """Dispatch on the instruction's operation: remove -> :func:`decode_remove`, else
    :func:`decode_connect`."""
    mask = np.asarray(mask, dtype=bool)
    prob = np.asarray(prob)
    if prob.shape != mask.shape or (image is not None and np.shape(image) != mask.shape):
        raise ValueError(f"mask {mask.shape}, probability {prob.shape} and image shapes differ")
    if mask.ndim != 3:
        raise ValueError(f"blocks must be 3-D (ZYX), got shape {mask.shape}")
    if instruction.op == "remove":
        result = decode_remove(mask, prob, instruction.region(mask.shape), config, context, image)
        return result if result.changed else _cut_instead(mask, prob, instruction, config, result)
    return decode_connect(mask, prob, image, instruction, config, context)


def _cut_instead(mask: np.ndarray, prob: np.ndarray | None, instruction: Instruction,
                 config: DecodingConfig | Mapping[str, Any] | None, result: EditResult) -> EditResult:
    """A removal from one cell to another that found only continuing structure: cut the attached branch
    (:func:`neurorefiner.inference.branch_cut.cut_branch`) when one runs between the cells, else ``result``."""
    from neurorefiner.inference.branch_cut import cut_branch

    if instruction.end is None:
        return result
    cfg = DecodingConfig.build(config)
    out, why = cut_branch(mask, instruction, prob, cfg.cut_margin, cfg.cut_max_probability)
    if (out == mask).all():
        result.reason += f"; {why}"
        return result
    return EditResult.from_masks(mask, out, why, op="remove", removed_pieces=1)
