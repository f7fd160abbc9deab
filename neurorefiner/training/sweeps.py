"""Hydra callbacks of the training sweeps (``conf/hparams_search/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class StorageFolder(Callback):
    """Create the folder of an Optuna SQLite study (``hydra.sweeper.storage: sqlite:///<path>``) before the
    sweeper opens it: SQLite creates the file but not its folder, and a first search on a fresh checkout would
    stop with 'unable to open database file'."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        storage = str(config.hydra.sweeper.get("storage") or "")
        if storage.startswith("sqlite:///"):
            Path(storage[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
