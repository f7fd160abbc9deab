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
