"""The learned refinement baselines as evaluation methods (``conf/method/segfix.yaml``, ``segrefiner.yaml``,
``transfiner.yaml``): ``method(image, mask, case, spacing=...) -> mask`` like the others in
:mod:`neurorefiner.evaluation.methods`. Each loads its checkpoint on the first call (default: the shipped
``checkpoints/<name>.ckpt``) and refines the whole initial mask window by window
(:class:`neurorefiner.inference.refinement_baselines.BaselineRefiner`); ``last_info`` holds the changed voxels,
the network passes and the seconds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np


class LearnedBaseline:
    """A refinement baseline with fixed settings; ``kind`` names it (subclasses below).

    Args:
        checkpoint: the checkpoint file (None = the shipped one).
        patch_size: sliding-window size (z, y, x); None = the training crop recorded in the checkpoint.
        overlap, sw_batch_size, device: sliding-window settings.
        threads: torch threads while refining (the shared CPUs: 1).
        settings: overrides of the inference settings recorded in the checkpoint (e.g. ``steps``, ``threshold``).
    """

    kind = ""
    needs_initial = True

    def __init__(self, checkpoint: str | None = None, patch_size: Sequence[int] | None = None, overlap: float = 0.25,
                 sw_batch_size: int = 4, device: str = "cpu", threads: int = 1, **settings: Any) -> None:
        self.checkpoint = checkpoint
        self.patch_size = None if patch_size is None else tuple(int(s) for s in patch_size)
        self.kwargs = {"overlap": float(overlap), "sw_batch_size": int(sw_batch_size), "device": device, **settings}
        self.threads = int(threads)
        self.last_info: dict = {}
        self._refiner: Any = None

    def _get(self) -> Any:
        from neurorefiner.inference.refinement_baselines import BaselineRefiner

        if self._refiner is None:
            self._refiner = BaselineRefiner.load(self.kind, self.checkpoint, self.patch_size, **self.kwargs)
        return self._refiner

    def __call__(self, image: np.ndarray, mask: np.ndarray, case: Any, spacing: Any = None) -> np.ndarray:
        import torch

        refiner = self._get()
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        t0 = time.perf_counter()
        try:
            m = np.asarray(mask, dtype=bool)
            out = refiner.refine(np.asarray(image, np.float32), m)
        finally:
            torch.set_num_threads(before)
        self.last_info = {"changed_voxels": int((out ^ m).sum()), "added_voxels": int((out & ~m).sum()),
                          "removed_voxels": int((m & ~out).sum()), "network_passes": int(refiner.last_calls),
                          "seconds_refine": round(time.perf_counter() - t0, 2)}
        return out


class SegFix(LearnedBaseline):
    """SegFix-style boundary relabelling (:mod:`neurorefiner.models.baselines.segfix`)."""

    kind = "segfix"


class SegRefiner(LearnedBaseline):
    """SegRefiner-style discrete-diffusion refinement, ``steps`` reverse steps (:mod:`...baselines.segrefiner`)."""

    kind = "segrefiner"


class Transfiner(LearnedBaseline):
    """Mask Transfiner-style re-classification of the octree's uncertain voxels (:mod:`...baselines.transfiner`)."""

    kind = "transfiner"
