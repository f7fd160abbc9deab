"""The raw decoding, for comparison: threshold the network's probability inside the allowed place and keep the
input elsewhere, voxel by voxel, knowing nothing of components (what the topology decoding replaces)."""

from __future__ import annotations

import numpy as np

from neurorefiner.inference.decoding.result import EditResult


def raw_decode(mask: np.ndarray, prob: np.ndarray, allowed: np.ndarray, threshold: float) -> EditResult:
    """Today's decoding as an :class:`EditResult`: threshold, and keep the input outside ``allowed``."""
    mask = np.asarray(mask, dtype=bool)
    out = np.where(allowed, np.asarray(prob) >= threshold, mask)
    return EditResult.from_masks(mask, out, f"raw network output (threshold {threshold})", decoding="raw")


def cut_change(mask: np.ndarray, prob: np.ndarray, allowed: np.ndarray, threshold: float) -> np.ndarray:
    """The mask changed where the network's foreground probability ``prob`` says so with at least
    ``threshold`` confidence, inside ``allowed`` only: background voxels are added where ``prob >= threshold``,
    foreground voxels removed where ``prob < 1 - threshold``. At 0.5 this is the plain cut of the raw decoding
    (:func:`raw_decode`); higher thresholds change less in both directions."""
    mask = np.asarray(mask, dtype=bool)
    out = np.where(mask, prob >= 1.0 - threshold, prob >= threshold)
    return np.where(allowed, out, mask)
