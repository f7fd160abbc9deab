"""Evidence of foreground per voxel: the image's brightness between the block's background and foreground
medians, and its combination with the network's probability. Both decodings weigh the network against the
image with these, so a faint real neurite and a network that has not learned to fill are each covered."""

from __future__ import annotations

import numpy as np


def brightness(image: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """The image scaled to [0, 1] between the block's background and foreground medians (None when the
    block has no contrast between the two, or no foreground or background)."""
    if not mask.any() or mask.all():
        return None
    img = np.asarray(image, dtype=np.float32)
    fg, bg = float(np.median(img[mask])), float(np.median(img[~mask]))
    if fg <= bg + 1e-6:
        return None
    return np.clip((img - bg) / (fg - bg), 0.0, 1.0)


def evidence(prob: np.ndarray, image: np.ndarray | None, mask: np.ndarray, image_weight: float = 1.0) -> np.ndarray:
    """Per-voxel evidence of foreground in [0, 1]: the larger of the network's probability and the image's
    :func:`brightness` (either can show a gap the other misses: a faint real gap, a network that has not
    learned to fill; the network alone without an image or when the block has no contrast)."""
    p = np.clip(np.asarray(prob, dtype=np.float32), 0.0, 1.0)
    bright = None if image is None else brightness(image, mask)
    if bright is None:
        return p
    return np.maximum(p, image_weight * bright)
