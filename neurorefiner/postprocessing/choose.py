"""Score one probability map under many post-processings (threshold, dust removal, largest components),
mask -> APP2 -> metrics against the gold SWC. Used to choose a segmenter's post-processing on dev data
(``neurorefiner make postprocess``; experiments/segmenters/cv_dev/ was chosen the same way). Settings
that give the same mask are traced once: APP2 is the slow part, and on DIADEM most filters change nothing."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from neurorefiner.metrics import score_mask
from neurorefiner.postprocessing.masks import PostProcess, postprocess_mask

SCORE_KEYS = ("PRE", "REC", "F1", "SD", "SSD")
TIE_F1 = 0.01  # settings this close to the best mean F1 are told apart by SSD, then by simplicity


def settings_grid(thresholds: Iterable[float], dust: Iterable[int], keep: Iterable[int],
                  bridge: Iterable[float] = (0.0,)) -> list[PostProcess]:
    """Every (threshold, dust_voxels, keep_largest, bridge_um) combination, in that order."""
    return [PostProcess(t, d, k, b) for t, d, k, b in itertools.product(thresholds, dust, keep, bridge)]


def score_settings(probs: np.ndarray, gold, spacing, settings: Iterable[PostProcess],  # type: ignore[no-untyped-def]
                   root_seeded: bool = False) -> Iterator[tuple[PostProcess, dict[str, float]]]:
    """(setting, {PRE, REC, F1, SD, SSD}) for each setting; identical masks are traced once.

    ``root_seeded``: APP2 starts at the mask voxel nearest the gold root, as the tables that report the
    root-seeded protocol score it. A setting must be chosen under the protocol it is reported with: scored
    from APP2's own root, keeping the largest component looks harmless, yet it can drop the root's piece,
    which the root-seeded protocol then pays for in full."""
    from neurorefiner.tracing.seeding import marker_nearest_root

    scored: dict[bytes, dict[str, float]] = {}
    for post in settings:
        mask = postprocess_mask(probs, post, spacing)
        key = hashlib.sha1(np.packbits(mask).tobytes()).digest()
        if key not in scored:
            app2 = {"marker": marker_nearest_root(mask, gold, spacing)} if root_seeded else None
            s = score_mask(gold, mask, spacing, app2_kwargs=app2)
            scored[key] = {k: float(s[k]) for k in SCORE_KEYS}
        yield post, scored[key]


def simplicity(setting: Mapping) -> tuple:
    """Order of preference between settings that trace equally well: fewer networks averaged, no gap bridging,
    no dust removal, no component filter, then the threshold nearest 0.5. Keys a summary lacks count as the
    simple choice, so a grid that never varies them is ordered by the rest."""
    return (setting.get("members", 1), setting.get("bridge_um", 0) > 0, setting.get("dust_voxels", 0) > 0,
            setting.get("keep_largest", 0) > 0, abs(setting["threshold"] - 0.5))


def choose_setting(summary: Sequence[Mapping], tie_f1: float = TIE_F1) -> Mapping:
    """The post-processing rule every chooser uses (the DIADEM cross-validation, the synthetic presets' val splits), so
    the tables compare settings picked one way: the highest mean F1; settings within ``tie_f1`` of it go to the
    lower mean SSD, then to the simpler setting (``simplicity``). ``summary``: per-setting means with
    ``F1``, ``SSD``, ``threshold`` and any of ``members``, ``bridge_um``, ``dust_voxels``, ``keep_largest``.
    SSDs are compared to 1e-6 voxels: two masks that trace the same tree differ in the last bits of their
    means, and that noise must not pick the component filter over the simpler setting."""
    if not summary:
        raise ValueError("no setting to choose from")
    best = max(s["F1"] for s in summary)
    near = [s for s in summary if s["F1"] >= best - tie_f1]
    return min(near, key=lambda s: (round(float(s["SSD"]), 6), *simplicity(s)))
