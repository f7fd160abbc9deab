"""Input normalisation shared by training and inference: one function, so a network always sees its
images scaled the way it was trained, and a checkpoint records which scaling that was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neurorefiner.errors import InputError

DEFAULT_PERCENTILES: tuple[float, float] = (1.0, 99.99)
"""Robust normalisation of the segmenters: the 1st percentile maps to 0 and the 99.99th to 1 (clipped).

Chosen on DIADEM dev (OP_1-OP_6; the comparison is in the lab-notebook commit named in experiments/README.md):
neurites fill 0.01-0.1 % of a stack, so the 99.9th percentile often lies in the background (17 of 254 on OP_5, which
would turn the noise floor into mid-grey); the 99.99th lies on the neurites and brings their brightness
across stacks closer together than min-max, which lets one hot voxel rescale the whole stack."""

def normalize_image(array: np.ndarray, source: str | None = None,
                    percentiles: Sequence[float] | None = DEFAULT_PERCENTILES) -> np.ndarray:
    """float32 in [0, 1], the same for training and inference: ``percentiles`` (low, high) map to 0 and 1
    and values outside are clipped; ``None`` is plain min-max (the first checkpoints were trained so).
    When the high percentile equals the low one (a nearly empty stack), min-max is used instead.
    NaN/inf -> InputError (they would poison every window); a constant image -> zeros."""
    data = np.asarray(array, dtype=np.float32)
    if not np.isfinite(data).all():
        bad = int((~np.isfinite(data)).sum())
        raise InputError(f"image has {bad} NaN/inf voxels; fix or mask them before segmenting", source)
    if data.size == 0:
        raise InputError("image is empty", source)
    lo, hi = float(data.min()), float(data.max())
    if hi <= lo:
        return np.zeros_like(data)
    if percentiles is not None:
        p_lo, p_hi = (float(p) for p in percentiles)
        if not 0.0 <= p_lo < p_hi <= 100.0:
            raise ValueError(f"percentiles must satisfy 0 <= low < high <= 100, got {tuple(percentiles)}")
        q_lo, q_hi = (float(q) for q in np.percentile(data, [p_lo, p_hi]))
        if q_hi > q_lo:
            lo, hi = q_lo, q_hi
    out = (data - lo) / (hi - lo)
    return np.clip(out, 0.0, 1.0, out=out) if percentiles is not None else out


def normalization_spec(percentiles: Sequence[float] | None) -> dict[str, Any]:
    """What a checkpoint records about its input normalisation (read back by ``percentiles_of``)."""
    if percentiles is None:
        return {"method": "minmax"}
    return {"method": "percentile", "percentiles": [float(p) for p in percentiles]}


def percentiles_of(spec: Any) -> tuple[float, float] | None:
    """Percentiles from a checkpoint's normalisation record; absent or 'minmax' (older checkpoints) -> None."""
    if isinstance(spec, dict) and spec.get("method") == "percentile":
        lo, hi = spec["percentiles"]
        return float(lo), float(hi)
    return None
