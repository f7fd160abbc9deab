"""A segmenter network rebuilt from the recipe its checkpoint records (``_target_`` + arguments), without
Hydra and only from our own segmenter classes: a checkpoint must not name arbitrary code to run."""

from __future__ import annotations

import importlib
from typing import Any

from torch import nn

from neurorefiner.errors import InputError

ALLOWED_PREFIX = "neurorefiner.models.segmenters."


def build_from_config(net_config: dict[str, Any], source: str | None = None) -> nn.Module:
    """Instantiate ``{'_target_': 'neurorefiner.models.segmenters.x.Cls', **kwargs}`` without Hydra (only
    our own segmenter classes: a checkpoint must not name arbitrary code to run)."""
    cfg = dict(net_config)
    target = str(cfg.pop("_target_", ""))
    if not target.startswith(ALLOWED_PREFIX):
        raise InputError(f"checkpoint names network {target!r}, not a neurorefiner segmenter", source)
    module, _, cls = target.rpartition(".")
    try:
        klass = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"checkpoint names unknown network {target!r}", source) from exc
    cfg = {k: (tuple(v) if isinstance(v, list) and k not in ("strides", "features") else v)
           for k, v in cfg.items() if not k.startswith("_")}
    try:
        return klass(**cfg)
    except (TypeError, ValueError) as exc:
        raise InputError(f"cannot rebuild {target} from the checkpoint's settings: {exc}", source) from exc


def arch_of(net_config: dict[str, Any]) -> str:
    """The architecture's short name; an averaged ensemble of one architecture is named after it (an ensemble
    of U-Nets is still the U-Net baseline, and ``expected_arch`` checks accept it)."""
    members = net_config.get("members")
    if isinstance(members, list | tuple) and members:
        archs = {arch_of(dict(m)) for m in members}
        return archs.pop() if len(archs) == 1 else "ensemble"
    target = str(net_config.get("_target_", ""))
    try:
        module, _, cls = target.rpartition(".")
        return getattr(importlib.import_module(module), cls).arch
    except (ImportError, AttributeError, ValueError):
        return target.rsplit(".", 1)[-1].lower()
