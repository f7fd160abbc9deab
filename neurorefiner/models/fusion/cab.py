"""Cross-attention at the bottleneck (CAB): the paper's default fusion (eq. 5).

The visual features are the queries and the instruction the keys/values. A single pooled sentence vector
as the only key makes softmax attention constant (every location would receive the same vector), so the
sentence is first expanded by a learned projection into ``num_tokens`` text tokens; each location then
chooses among them, which is what lets a location-specific instruction act locally. Token embeddings
(B, L, d) are accepted as they are.
"""

from __future__ import annotations

import torch
from torch import nn

from neurorefiner.models.fusion._checks import as_tokens, check_args


class CrossAttentionFusion(nn.Module):
    """``x + MHA(norm(x), tokens(context))`` followed by a pointwise MLP, both residual.

    Args:
        spatial_dims: number of spatial dimensions of ``x`` (3 for volumes).
        channels: channels C of ``x``; also the attention width.
        context_dim: size d of the text embedding.
        num_heads: attention heads; must divide ``channels``.
        num_tokens: text tokens made from a pooled (B, d) embedding.
        mlp_ratio: hidden width of the MLP relative to C.
        dropout: attention dropout.
    """

    def __init__(self, spatial_dims: int, channels: int, context_dim: int, num_heads: int = 4,
                 num_tokens: int = 8, mlp_ratio: float = 2.0, dropout: float = 0.0) -> None:
        super().__init__()
        check_args(spatial_dims, channels, context_dim)
        if num_heads < 1 or channels % num_heads:
            raise ValueError(f"num_heads ({num_heads}) must be >= 1 and divide channels ({channels})")
        if num_tokens < 1:
            raise ValueError(f"num_tokens must be >= 1, got {num_tokens}")
        if mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio must be > 0, got {mlp_ratio}")
        self.spatial_dims, self.channels, self.context_dim = spatial_dims, channels, context_dim
        self.num_tokens = num_tokens
        self.expand = nn.Linear(context_dim, num_tokens * channels)
        self.token_pos = nn.Parameter(torch.randn(num_tokens, channels) * 0.02)
        self.context_proj = nn.Linear(context_dim, channels)  # for (B, L, d) token input
        self.norm_x = nn.LayerNorm(channels)
        self.norm_ctx = nn.LayerNorm(channels)
        self.attn = nn.MultiheadAttention(channels, num_heads, dropout=dropout, batch_first=True)
        hidden = max(1, int(round(channels * mlp_ratio)))
        self.mlp = nn.Sequential(nn.LayerNorm(channels), nn.Linear(channels, hidden), nn.GELU(),
                                 nn.Linear(hidden, channels))

    def _tokens(self, context: torch.Tensor, batch: int) -> torch.Tensor:
        if context.ndim == 2:
            as_tokens(context, batch, self.context_dim)  # shape check
            tok = self.expand(context).view(batch, self.num_tokens, self.channels)
            return tok + self.token_pos
        return self.context_proj(as_tokens(context, batch, self.context_dim))

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        if x.ndim != self.spatial_dims + 2 or x.shape[1] != self.channels:
            raise ValueError(f"x must be (B, {self.channels}, *{self.spatial_dims} dims), got {tuple(x.shape)}")
        b, c = x.shape[:2]
        spatial = x.shape[2:]
        seq = x.flatten(2).transpose(1, 2)  # (B, N, C)
        ctx = self.norm_ctx(self._tokens(context.to(x.dtype), b))
        att, _ = self.attn(self.norm_x(seq), ctx, ctx, need_weights=False)
        seq = seq + att
        seq = seq + self.mlp(seq)
        return seq.transpose(1, 2).reshape(b, c, *spatial)
