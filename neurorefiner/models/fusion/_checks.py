"""Argument and shape checks shared by the fusion blocks (ValueError early, MONAI style)."""

from __future__ import annotations

import torch


def check_args(spatial_dims: int, channels: int, context_dim: int) -> None:
    if spatial_dims not in (1, 2, 3):
        raise ValueError(f"spatial_dims must be 1, 2 or 3, got {spatial_dims}")
    if channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels}")
    if context_dim < 1:
        raise ValueError(f"context_dim must be >= 1, got {context_dim}")


def as_tokens(context: torch.Tensor, batch: int, context_dim: int) -> torch.Tensor:
    """(B, d) or (B, L, d) -> (B, L, d); a clear error for anything else."""
    if context.ndim == 2:
        context = context[:, None, :]
    if context.ndim != 3 or context.shape[0] != batch or context.shape[-1] != context_dim:
        raise ValueError(
            f"context must be (B={batch}, {context_dim}) or (B, L, {context_dim}), got {tuple(context.shape)}"
        )
    return context


def pooled(context: torch.Tensor, batch: int, context_dim: int) -> torch.Tensor:
    """(B, d) or (B, L, d) -> (B, d) (mean over tokens)."""
    return as_tokens(context, batch, context_dim).mean(dim=1)
