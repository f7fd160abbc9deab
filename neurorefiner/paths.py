"""Where things live. Never relative to the working directory: Hydra changes it, users run from anywhere."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout root (holds data/, conf/); ``PROJECT_ROOT`` overrides."""
    env = os.environ.get("PROJECT_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    """Bundled and user data; ``NEUROREFINER_DATA`` overrides."""
    env = os.environ.get("NEUROREFINER_DATA")
    return Path(env).resolve() if env else project_root() / "data"


def cache_dir() -> Path:
    """Generated data (synthetic benchmarks, initial masks); git-ignored."""
    env = os.environ.get("NEUROREFINER_CACHE")
    return Path(env).resolve() if env else data_dir() / "cache"


def conf_dir() -> Path:
    return project_root() / "conf"


def init_mask_dir(dataset: str, segmenter: str, root: str | Path | None = None) -> Path:
    """Folder of one segmenter's initial masks M_init of a dataset: ``<root>/<dataset>/<segmenter>``, with
    ``root`` by default ``<cache_dir()>/init_masks``. The one place that knows this layout (the writer in
    ``inference.init_masks``, the stage-2 miner and the evaluation runner all read it)."""
    return Path(root if root is not None else cache_dir() / "init_masks") / dataset / segmenter


def init_mask_path(dataset: str, segmenter: str, case: str, root: str | Path | None = None) -> Path:
    """One case's initial mask (TIFF) in :func:`init_mask_dir`."""
    return init_mask_dir(dataset, segmenter, root) / f"{case}.tif"
