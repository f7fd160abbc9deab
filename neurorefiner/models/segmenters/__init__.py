"""Baseline segmentation networks, one per file, all plain ``nn.Module`` s mapping (N, 1, D, H, W) images
to (N, 2, D, H, W) logits. Build one by name with :func:`build_segmenter` or by Hydra ``_target_``
(``conf/model/<name>.yaml``). Each has a ``size`` argument: ``"cpu"`` (default) or ``"paper"``."""

from __future__ import annotations

import importlib

from torch import nn

SEGMENTERS: dict[str, str] = {
    "unet3d": "neurorefiner.models.segmenters.unet3d:UNet3D",
    "nnunet_style": "neurorefiner.models.segmenters.nnunet_style:NNUNetStyle",
    "vnet": "neurorefiner.models.segmenters.vnet:VNet",
    "unetr": "neurorefiner.models.segmenters.unetr:UNETR",
    "swinunetr": "neurorefiner.models.segmenters.swinunetr:SwinUNETR",
    "sgsnet_style": "neurorefiner.models.segmenters.sgsnet_style:SGSNetStyle",
    "adtlnet_style": "neurorefiner.models.segmenters.adtlnet_style:ADTLNetStyle",
    "gbpnet_style": "neurorefiner.models.segmenters.gbpnet_style:GBPNetStyle",
}


def segmenter_class(name: str) -> type[nn.Module]:
    if name not in SEGMENTERS:
        raise ValueError(f"unknown segmenter {name!r}; known: {', '.join(sorted(SEGMENTERS))}")
    module, cls = SEGMENTERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_segmenter(name: str, **kwargs) -> nn.Module:
    """A segmenter by its short name (``unet3d``, ``nnunet_style``, ...) with its constructor arguments."""
    return segmenter_class(name)(**kwargs)


def available() -> list[str]:
    return sorted(SEGMENTERS)
