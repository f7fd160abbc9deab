"""From a foreground-probability map to the mask handed to APP2 or to refinement: threshold, gap
bridging, dust removal, largest components. A setting is a value (:class:`PostProcess`) that checkpoints
record and caches key on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PostProcess:
    """How a probability map becomes the mask handed to APP2 (and to refinement as M_init).

    threshold: foreground probability cut.
    dust_voxels: drop 26-connected components smaller than this (speckle); 0 keeps all.
    keep_largest: keep only the k largest components (APP2 traces from one root, and a bright blob
        elsewhere can take the root); 0 keeps all.
    bridge_um: join fragments to the largest component across gaps up to this many micrometres
        (:func:`neurorefiner.postprocessing.gap_bridging.bridge_gaps`, before the component filters; needs the
        voxel spacing); 0 leaves breaks as they are.
    A checkpoint may record the setting chosen for it on validation data (:func:`record_postprocess`,
    ``neurorefiner make postprocess``); that is then its default. Checkpoints without a record
    get :data:`DEFAULT_POSTPROCESS` (plain threshold 0.5).
    """

    threshold: float = 0.5
    dust_voxels: int = 0
    keep_largest: int = 0
    bridge_um: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.dust_voxels < 0 or self.keep_largest < 0:
            raise ValueError(f"dust_voxels and keep_largest must be >= 0, got {self.dust_voxels}, "
                             f"{self.keep_largest}")
        if not self.bridge_um >= 0:
            raise ValueError(f"bridge_um must be >= 0, got {self.bridge_um}")

    def as_dict(self) -> dict[str, Any]:
        """The setting as recorded in checkpoints and caches; ``bridge_um`` only when used, so settings
        recorded before it existed keep their keys (and the caches keyed on them)."""
        d: dict[str, Any] = {"threshold": self.threshold, "dust_voxels": self.dust_voxels,
                             "keep_largest": self.keep_largest}
        if self.bridge_um:
            d["bridge_um"] = self.bridge_um
        return d


DEFAULT_POSTPROCESS = PostProcess()


def postprocess_mask(probs: np.ndarray, post: PostProcess = DEFAULT_POSTPROCESS,
                     spacing: Sequence[float] | None = None) -> np.ndarray:
    """Binary mask (bool ZYX) of a foreground-probability map: threshold, gap bridging, dust removal, largest
    components. ``spacing`` (z, y, x um) is needed only when ``post.bridge_um`` is set."""
    import cc3d

    mask = np.asarray(probs) > post.threshold
    if post.bridge_um and mask.any():
        if spacing is None:
            raise ValueError("gap bridging (bridge_um) needs the voxel spacing")
        from neurorefiner.postprocessing.gap_bridging import bridge_gaps

        mask = bridge_gaps(mask, spacing, post.bridge_um)
    if not mask.any() or (post.dust_voxels == 0 and post.keep_largest == 0):
        return mask
    if post.dust_voxels > 0:
        mask = cc3d.dust(mask, threshold=int(post.dust_voxels), connectivity=26, in_place=True)
    if post.keep_largest > 0 and mask.any():
        mask = cc3d.largest_k(mask, k=int(post.keep_largest), connectivity=26, binary_image=True) > 0
    return mask.astype(bool, copy=False)
