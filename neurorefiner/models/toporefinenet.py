"""TopoRefineNet: a 3D U-Net over [image; mask] whose bottleneck is conditioned on an instruction.

Paper section 3.3: the image block and its current mask are concatenated and encoded into a feature
pyramid; the deepest features meet the (frozen) text embedding of the instruction in a fusion block
(cross-attention by default); the decoder, with skip connections, outputs the corrected mask.

Three additions, all small and all there for the job: (1) the bottleneck gets an embedding of each
cell's position inside the block, because the instruction names positions ("top-left-rear") that a
translation-equivariant U-Net cannot otherwise tell apart; (2) the input mask is added to the output
logits with a learned weight (``mask_skip``), so "leave this voxel alone" is the easy default and the
network spends its capacity on the edit; (3) optionally (``region_channel``, beyond the paper) the
sub-region the instruction names is given as a third input channel at full resolution. The text alone
carries the place only through the bottleneck (1/8 resolution, 27 possible cells to learn from words);
models trained on CPU budgets learned the operation from the text but not the place (see
experiments/toporefinenet). The region map is computed from the parsed instruction by the same grammar
code that writes it, so it adds no information the instruction does not hold; it only puts it where
a convolution can use it. (4) Optionally (``text_film``, beyond the paper) every decoder level is scaled and
shifted by a linear map of the pooled instruction embedding (FiLM), zero-initialised so that a network loaded
from weights without it computes what it did before. The bottleneck is the only place the paper's text
meets the image, and the skip connections carry image-only features around it to full resolution: CPU
runs learned to fill a break whatever the instruction said (an "opposite" instruction left a break block
unchanged 4-50% of the time), the trade-off moved by loss weights but never off its line. FiLM lets the
operation switch the full-resolution features that make an edit. (5) Optionally (``edit_gate``, beyond the
paper) a block-level decision whether the instruction applies at all: a small head on the pooled bottleneck
(after the fusion, so it has read the text) gives one probability per block that multiplies every voxel's
probability of change. FiLM taught the network to follow the verb -- told "Repair break at X" next to noise it
adds voxels, told to remove at a break it removes -- but not to leave a block alone where the named defect is
not there; that is one yes/no per block, which a voxel-wise loss prices by the few voxels at stake. The head is
trained by its own loss (``TopoRefineModule``) on whether the sample asks for any change, and starts open
(probability ~1), so weights saved without it load nearly unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from monai.networks.blocks.dynunet_block import UnetOutBlock, UnetResBlock, UnetUpBlock
from torch import nn

from neurorefiner.models.fusion import build_fusion

GATE_OPEN_LOGIT = 6.0  # the edit gate's starting logit: probability 0.9975, the network as it was


def gated_logits(logits: torch.Tensor, mask: torch.Tensor, gate_logit: torch.Tensor) -> torch.Tensor:
    """Two-channel logits whose foreground probability is the input mask changed with probability
    ``sigmoid(gate) * P(change)``: the gate can only take changes back, never make one."""
    fg = logits[:, 1:2] - logits[:, 0:1] if logits.shape[1] == 2 else logits[:, 0:1]
    p = torch.sigmoid(fg)
    keep = mask > 0.5
    change = torch.where(keep, 1 - p, p) * torch.sigmoid(gate_logit).view(-1, *([1] * (logits.ndim - 1)))
    p = torch.where(keep, 1 - change, change).clamp(1e-6, 1 - 1e-6)
    z = torch.log(p) - torch.log1p(-p)
    return torch.cat([-z / 2, z / 2], dim=1) if logits.shape[1] == 2 else z


class TopoRefineNet(nn.Module):
    """Instruction-guided mask editor.

    Args:
        spatial_dims: 3 for volumes (2 works for tests and slices).
        in_channels: input channels; 2 = [image; mask].
        out_channels: logit channels; 2 = background / foreground (softmax + CE + Dice).
        channels: feature width per level, shallow to deep; ``len(channels) - 1`` downsamplings by 2.
        text_dim: size of the text embedding given to ``forward``.
        fusion: ``"cab"`` (cross-attention), ``"adaln"`` or ``"cdp"``.
        fusion_kwargs: extra arguments of the fusion block (e.g. ``num_heads`` for CAB).
        fusion_depth: number of fusion blocks stacked at the bottleneck.
        norm_name: MONAI norm name for the conv blocks.
        position_embedding: add a learned embedding of block-relative coordinates at the bottleneck.
        mask_skip: add ``w * (2 * mask - 1)`` to the foreground-minus-background logit (w learned).
        region_channel: take the instruction's named sub-region (B, 1, *spatial) as an extra input channel
            (``forward(..., region=)``); ``in_channels`` still counts [image; mask] only.
        text_film: scale and shift each decoder level's features by a zero-initialised linear map of the
            (token-averaged) text embedding; see the module docstring.
        edit_gate: a block-level "does the instruction apply here" head whose probability scales the change;
            its logit of the last forward pass is kept in ``last_gate_logit`` for the training loss.
    """

    def __init__(self, spatial_dims: int = 3, in_channels: int = 2, out_channels: int = 2,
                 channels: Sequence[int] = (8, 16, 32, 64), text_dim: int = 384, fusion: str = "cab",
                 fusion_kwargs: dict | None = None, fusion_depth: int = 1, norm_name: str = "instance",
                 position_embedding: bool = True, mask_skip: bool = True, region_channel: bool = False,
                 text_film: bool = False, edit_gate: bool = False) -> None:
        super().__init__()
        channels = tuple(int(c) for c in channels)
        if spatial_dims not in (2, 3):
            raise ValueError(f"spatial_dims must be 2 or 3, got {spatial_dims}")
        if len(channels) < 2:
            raise ValueError(f"channels needs at least two levels, got {channels}")
        if any(c < 1 for c in channels):
            raise ValueError(f"channels must be positive, got {channels}")
        if in_channels < 2:
            raise ValueError(f"in_channels must be >= 2 ([image; mask]), got {in_channels}")
        if out_channels not in (1, 2):
            raise ValueError(f"out_channels must be 1 (sigmoid) or 2 (softmax), got {out_channels}")
        if text_dim < 1:
            raise ValueError(f"text_dim must be >= 1, got {text_dim}")
        if fusion_depth < 1:
            raise ValueError(f"fusion_depth must be >= 1, got {fusion_depth}")
        self.spatial_dims, self.in_channels, self.out_channels = spatial_dims, in_channels, out_channels
        self.channels, self.text_dim, self.fusion_name = channels, text_dim, str(fusion)
        self.min_size = 2 ** (len(channels) - 1)
        self.region_channel = bool(region_channel)

        self.encoder = nn.ModuleList()
        prev = in_channels + int(self.region_channel)
        for i, ch in enumerate(channels):
            self.encoder.append(UnetResBlock(spatial_dims, prev, ch, kernel_size=3, stride=1 if i == 0 else 2,
                                             norm_name=norm_name))
            prev = ch
        deep = channels[-1]
        self.position = (nn.Sequential(nn.Linear(spatial_dims, deep), nn.GELU(), nn.Linear(deep, deep))
                         if position_embedding else None)
        self.fusion = nn.ModuleList(
            build_fusion(fusion, spatial_dims, deep, text_dim, **(fusion_kwargs or {})) for _ in range(fusion_depth)
        )
        self.decoder = nn.ModuleList()
        for i in range(len(channels) - 1, 0, -1):
            self.decoder.append(UnetUpBlock(spatial_dims, channels[i], channels[i - 1], kernel_size=3, stride=1,
                                            upsample_kernel_size=2, norm_name=norm_name))
        self.decoder_film = nn.ModuleList(nn.Linear(text_dim, 2 * channels[i - 1])
                                          for i in range(len(channels) - 1, 0, -1)) if text_film else None
        for film in self.decoder_film or ():
            nn.init.zeros_(film.weight)  # identity at start: weights saved without FiLM load unchanged
            nn.init.zeros_(film.bias)
        self.edit_gate = None
        if edit_gate:
            self.edit_gate = nn.Sequential(nn.Linear(2 * deep, deep), nn.GELU(), nn.Linear(deep, 1))
            nn.init.zeros_(self.edit_gate[-1].weight)
            nn.init.constant_(self.edit_gate[-1].bias, GATE_OPEN_LOGIT)
        self.last_gate_logit: torch.Tensor | None = None
        self.head = UnetOutBlock(spatial_dims, channels[0], out_channels)
        self.mask_weight = nn.Parameter(torch.tensor(2.0)) if mask_skip else None

    # -- helpers -------------------------------------------------------------------------------------------
    def _pad(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, ...]]:
        """Pad every spatial size up to a multiple of ``min_size`` and at least twice it (so instance norm
        has more than one voxel at the bottleneck); replicate for the image, so the
        padding looks like more of the block); returns the original sizes for the crop back."""
        size = tuple(x.shape[2:])
        target = [max(2 * self.min_size, -(-s // self.min_size) * self.min_size) for s in size]
        pad: list[int] = []
        for s, t in zip(reversed(size), reversed(target), strict=True):
            pad += [0, t - s]
        if any(pad):
            mode = "replicate" if all(s > 1 for s in size) else "constant"
            x = F.pad(x, pad, mode=mode)
        return x, size

    def _position(self, feat: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        """Coordinates in [-1, 1] of each bottleneck cell's centre relative to the original block."""
        axes = []
        for n, s in zip(feat.shape[2:], size, strict=True):
            f = self.min_size
            centre = (torch.arange(n, device=feat.device, dtype=feat.dtype) + 0.5) * f
            axes.append(centre / max(s, 1) * 2 - 1)
        grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # (*spatial, dims)
        emb = self.position(grid)  # (*spatial, C)
        return emb.permute(-1, *range(self.spatial_dims)).unsqueeze(0)

    # -- forward -------------------------------------------------------------------------------------------
    def forward(self, image: torch.Tensor, mask: torch.Tensor, text_embedding: torch.Tensor,
                region: torch.Tensor | None = None) -> torch.Tensor:
        """image, mask: (B, 1, *spatial) (or image with in_channels - 1 channels); text_embedding:
        (B, text_dim) or (B, L, text_dim); region: (B, 1, *spatial) named sub-region, required when the
        network was built with ``region_channel`` and ignored otherwise. Returns logits
        (B, out_channels, *spatial)."""
        if image.ndim != self.spatial_dims + 2 or mask.ndim != self.spatial_dims + 2:
            raise ValueError(f"image and mask must be (B, C, *{self.spatial_dims} spatial dims), got "
                             f"{tuple(image.shape)} and {tuple(mask.shape)}")
        if image.shape[0] != mask.shape[0] or image.shape[2:] != mask.shape[2:]:
            raise ValueError(f"image {tuple(image.shape)} and mask {tuple(mask.shape)} differ in batch or size")
        if image.shape[1] + mask.shape[1] != self.in_channels:
            raise ValueError(f"image and mask channels must add up to {self.in_channels}")
        if text_embedding.shape[0] != image.shape[0] or text_embedding.shape[-1] != self.text_dim:
            raise ValueError(f"text_embedding must be (B={image.shape[0]}, {self.text_dim}), "
                             f"got {tuple(text_embedding.shape)}")
        mask = mask.to(image.dtype)
        inputs = [image, mask]
        if self.region_channel:
            if region is None:
                raise ValueError("this TopoRefineNet takes the instruction's region as input: pass region=")
            if region.shape[0] != image.shape[0] or region.shape[2:] != image.shape[2:] or region.shape[1] != 1:
                raise ValueError(f"region must be (B, 1, *spatial) like the mask {tuple(mask.shape)}, "
                                 f"got {tuple(region.shape)}")
            inputs.append(region.to(image.dtype))
        x, size = self._pad(torch.cat(inputs, dim=1))
        skips = []
        for block in self.encoder:
            x = block(x)
            skips.append(x)
        if self.position is not None:
            x = x + self._position(x, size)
        context = text_embedding.to(x.dtype)
        for block in self.fusion:
            x = block(x, context)
        gate = None
        if self.edit_gate is not None:
            gate = self.edit_gate(torch.cat([x.flatten(2).mean(-1), x.flatten(2).amax(-1)], dim=1))  # (B, 1)
            self.last_gate_logit = gate[:, 0]
        pooled = context.mean(dim=1) if context.ndim == 3 else context
        for level, (block, skip) in enumerate(zip(self.decoder, reversed(skips[:-1]), strict=True)):
            x = block(x, skip)
            if self.decoder_film is not None:
                gamma, beta = self.decoder_film[level](pooled).chunk(2, dim=1)
                shape = (*gamma.shape, *(1,) * self.spatial_dims)
                x = x * (1 + gamma.view(shape)) + beta.view(shape)
        logits = self.head(x)
        crop = (slice(None), slice(None)) + tuple(slice(0, s) for s in size)
        logits = logits[crop]
        if self.mask_weight is not None:
            prior = self.mask_weight * (2 * mask - 1)
            if self.out_channels == 2:
                logits = logits + torch.cat([-prior / 2, prior / 2], dim=1)
            else:
                logits = logits + prior
        if gate is not None:
            logits = gated_logits(logits, mask, gate)
        return logits

    @staticmethod
    def probabilities(logits: torch.Tensor) -> torch.Tensor:
        """Foreground probability (B, 1, *spatial) from 1- or 2-channel logits."""
        if logits.shape[1] == 1:
            return torch.sigmoid(logits)
        return torch.softmax(logits, dim=1)[:, 1:2]
