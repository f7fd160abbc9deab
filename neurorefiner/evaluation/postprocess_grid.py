"""Score one probability map under many post-processings (threshold, dust removal, largest components),
mask -> APP2 -> metrics against the gold SWC. Used to choose a segmenter's post-processing on dev data
(experiments/segmenters/postprocess_dev.py, cv_dev.py). Settings that give the same mask are traced once:
APP2 is the slow part, and on DIADEM most filters change nothing."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator

import numpy as np

from neurorefiner.metrics import score_mask
from neurorefiner.models.inference import PostProcess, postprocess_mask

SCORE_KEYS = ("PRE", "REC", "F1", "SD", "SSD")


def settings_grid(thresholds: Iterable[float], dust: Iterable[int], keep: Iterable[int],
                  bridge: Iterable[float] = (0.0,)) -> list[PostProcess]:
    """Every (threshold, dust_voxels, keep_largest, bridge_um) combination, in that order."""
    return [PostProcess(t, d, k, b) for t, d, k, b in itertools.product(thresholds, dust, keep, bridge)]


def score_settings(probs: np.ndarray, gold, spacing, settings: Iterable[PostProcess],  # type: ignore[no-untyped-def]
                   ) -> Iterator[tuple[PostProcess, dict[str, float]]]:
    """(setting, {PRE, REC, F1, SD, SSD}) for each setting; identical masks are traced once."""
    scored: dict[bytes, dict[str, float]] = {}
    for post in settings:
        mask = postprocess_mask(probs, post, spacing)
        key = hashlib.sha1(np.packbits(mask).tobytes()).digest()
        if key not in scored:
            s = score_mask(gold, mask, spacing)
            scored[key] = {k: float(s[k]) for k in SCORE_KEYS}
        yield post, scored[key]
