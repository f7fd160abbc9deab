"""A judge that sees the image: a small 3D network over a candidate's crop (image, mask, the edit;
:mod:`neurorefiner.agents.learned.crops`) with the candidate's hand features beside it.

Three strided MONAI convolution blocks take the 3 x 12 x 24 x 24 crop to 32 x 3 x 6 x 6; average and max
pooling give 64 numbers; the standardised hand features join them in a two-layer head that gives one logit.
About 20 k weights: it trains on one CPU thread in minutes (offline: :mod:`neurorefiner.adaptation.judge.model_fit`)
and scores a mask's few hundred candidates in milliseconds. Stored as a state dict with its architecture and feature
scaling (plain tensors and numbers), so it loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from neurorefiner.agents.learned.crops import CHANNELS, as_float


class CropNet(nn.Module):
    """Crop encoder (MONAI ``Convolution`` blocks) + hand-feature head -> one logit per candidate."""

    def __init__(self, n_features: int, channels: tuple[int, ...] = (8, 16, 32), hidden: int = 32,
                 dropout: float = 0.1) -> None:
        super().__init__()
        from monai.networks.blocks import Convolution

        layers, c_in = [], len(CHANNELS)
        for i, c in enumerate(channels):
            layers.append(Convolution(3, c_in, c, strides=2 if i < 2 else 1, kernel_size=3, act="RELU",
                                      norm="BATCH"))
            c_in = c
        self.encoder = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(2 * c_in + n_features, hidden), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(hidden, 1))
        self.n_features = n_features

    def forward(self, crops: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        h = self.encoder(crops)
        pooled = torch.cat([h.mean(dim=(2, 3, 4)), h.amax(dim=(2, 3, 4))], dim=1)
        return self.head(torch.cat([pooled, features], dim=1)).squeeze(1)


class CropNetModel:
    """A trained :class:`CropNet` with its feature scaling: ``predict(x, crops)`` -> probabilities."""

    uses_crops = True

    def __init__(self, net: CropNet, mean: np.ndarray, scale: np.ndarray, arch: dict) -> None:
        self.net, self.arch = net.eval(), dict(arch)
        self.mean, self.scale = np.asarray(mean, np.float32), np.asarray(scale, np.float32)

    def scaled_features(self, x: np.ndarray) -> torch.Tensor:
        z = (np.asarray(x, np.float32) - self.mean) / self.scale
        return torch.from_numpy(np.clip(np.nan_to_num(z), -10, 10).astype(np.float32))

    @torch.no_grad()
    def predict(self, x: np.ndarray, crops: np.ndarray, batch: int = 256) -> np.ndarray:
        out = []
        for i in range(0, len(x), batch):
            c = torch.from_numpy(as_float(crops[i:i + batch]))
            out.append(torch.sigmoid(self.net(c, self.scaled_features(x[i:i + batch]))).numpy())
        return np.concatenate(out).astype(np.float64) if out else np.zeros(0)

    def to_state(self) -> dict:
        return {"type": "crop_net", "arch": self.arch, "mean": torch.from_numpy(self.mean),
                "scale": torch.from_numpy(self.scale), "state_dict": self.net.state_dict()}

    @classmethod
    def from_state(cls, state: dict) -> CropNetModel:
        arch = dict(state["arch"])
        net = CropNet(int(arch["n_features"]), tuple(arch["channels"]), int(arch["hidden"]))
        net.load_state_dict(state["state_dict"])
        return cls(net, state["mean"].numpy(), state["scale"].numpy(), arch)
