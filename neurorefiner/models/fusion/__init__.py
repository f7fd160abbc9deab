"""Text-image fusion blocks for the TopoRefineNet bottleneck (Table 6 of the paper).

Every block is a plain ``nn.Module`` with ``forward(x, context)``: ``x`` is a (B, C, *spatial) feature map,
``context`` a (B, context_dim) sentence embedding or (B, L, context_dim) token embeddings. The output has
the shape of ``x``. ``build_fusion(name, ...)`` is how a config string picks one.
"""

from __future__ import annotations

from torch import nn

from neurorefiner.models.fusion.adaln import AdaLNFusion
from neurorefiner.models.fusion.cab import CrossAttentionFusion
from neurorefiner.models.fusion.cdp import ChannelDotFusion

FUSIONS: dict[str, type[nn.Module]] = {
    "cab": CrossAttentionFusion,
    "adaln": AdaLNFusion,
    "cdp": ChannelDotFusion,
}


def build_fusion(name: str, spatial_dims: int, channels: int, context_dim: int, **kwargs) -> nn.Module:
    """Make the fusion block called ``name`` (one of ``FUSIONS``)."""
    key = str(name).lower()
    if key not in FUSIONS:
        raise ValueError(f"unknown fusion {name!r}; choose one of {sorted(FUSIONS)}")
    return FUSIONS[key](spatial_dims=spatial_dims, channels=channels, context_dim=context_dim, **kwargs)


__all__ = ["FUSIONS", "AdaLNFusion", "ChannelDotFusion", "CrossAttentionFusion", "build_fusion"]
