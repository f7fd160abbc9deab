"""Where an evaluation's initial masks come from: the segmenter's masks of the run's cases, made once with its
shipped checkpoint and cached (:mod:`neurorefiner.inference.init_masks`), or the rasterised gold tree.

Why made on first use and only for the plan's cases: a fresh clone has no cached masks, and a ``limit=1`` run
must not segment the whole split before scoring its one volume (on synthetic_zbfwb that was 20 minutes); a run
whose methods need no initial mask (``gold_mask``) must not segment anything, even to draw a figure panel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError
from neurorefiner.io import read_mask

MaskSource = Callable[[Case, np.ndarray], np.ndarray]


def initial_mask(dataset: str, segmenter: str, split: str, dataset_kwargs: dict[str, Any] | None = None,
                 only: Sequence[str] | None = None) -> MaskSource:
    """The segmenter's masks of the split (of the cases named in ``only``: a ``limit=1`` run must not segment
    the whole split first), made once with its shipped checkpoint and cached."""
    cache: dict[str, Path] = {}

    def source(case: Case, image: np.ndarray) -> np.ndarray:
        if not cache:
            from neurorefiner.inference.init_masks import write_init_masks

            names = None if only is None else list(only)
            paths = write_init_masks(dataset, segmenter, split=split, dataset_kwargs=dataset_kwargs, only=names)
            cache.update({p.stem: p for p in paths})
        path = cache.get(case.name)
        if path is None or not path.exists():
            raise InputError(f"no initial mask for {case.name} after making the split's masks", path)
        return read_mask(path).load()

    return source


def cached_initial_mask(dataset: str, segmenter: str) -> MaskSource:
    """The segmenter's masks as far as the cache already holds them, never made: a figure of a run whose
    methods need no initial mask (``gold_mask``) must not segment the whole split to draw one panel."""
    from neurorefiner.paths import init_mask_path

    def source(case: Case, image: np.ndarray | None) -> np.ndarray:
        path = init_mask_path(dataset, segmenter, case.name)
        if not path.exists():
            raise InputError("not made in this run (no method needed it) and not in the cache", path)
        return read_mask(path).load()

    return source


def gold_mask() -> MaskSource:
    """The rasterised gold tree itself: an upper bound that checks the tracing + metrics chain."""
    return lambda case, image: case.label(image.shape)


class InitialMasks:
    """The segmenter's initial masks of a run's cases, made on first use and kept as a source."""

    def __init__(self, dataset: str, segmenter: str, split: str, dataset_kwargs: dict[str, Any],
                 cases: Sequence[str]) -> None:
        self.dataset, self.segmenter, self.split = dataset, segmenter, split
        self.dataset_kwargs, self.cases = dataset_kwargs, list(cases)
        self.source: MaskSource | None = None

    def __call__(self, case: Case, image: np.ndarray) -> np.ndarray:
        if self.source is None:
            self.source = initial_mask(self.dataset, self.segmenter, self.split, self.dataset_kwargs, self.cases)
        return np.asarray(self.source(case, image), dtype=bool)

    def for_figures(self) -> MaskSource:
        """The source a figure reads the initial mask from: this run's if it made them, else the cache only."""
        return self.source if self.source is not None else cached_initial_mask(self.dataset, self.segmenter)
