"""Whole-volume use of the learned refinement baselines (SegFix-, SegRefiner-, Mask Transfiner-style).

:func:`load_baseline` reads a checkpoint written by :func:`neurorefiner.training.refinement_baselines.train_baseline`
(``weights_only``; the network class comes from the recorded kind, never from a name in the file);
:class:`BaselineRefiner` refines a whole (image, mask) pair window by window: the network runs on overlapping
windows of the training patch size, blended with a Gaussian (MONAI's sliding-window inferer, as
:func:`neurorefiner.models.sliding_window.sliding_window_probs`). Windows whose mask holds no foreground are not
passed through the network (their output is the network's "nothing here" value): a refinement of the mask has
nothing to refine there, and neuron masks leave most windows of a stack empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from neurorefiner.errors import InputError
from neurorefiner.io.checkpoints import load_checkpoint
from neurorefiner.models.baselines.segfix import SegFixNet3D, segfix_relabel
from neurorefiner.models.baselines.segrefiner import SegRefinerNet3D, segrefiner_reverse
from neurorefiner.models.baselines.transfiner import TransfinerNet3D, octree_uncertain, transfiner_apply
from neurorefiner.paths import project_root

NETS: dict[str, type[nn.Module]] = {"segfix": SegFixNet3D, "segrefiner": SegRefinerNet3D,
                                    "transfiner": TransfinerNet3D}
EMPTY_LOGIT = -20.0  # the output of a skipped window: "no boundary" / "background"


def shipped_checkpoint(kind: str) -> Path:
    return project_root() / "checkpoints" / f"{kind}.ckpt"


def load_baseline(kind: str, path: str | Path | None = None) -> tuple[nn.Module, dict]:
    """(network in eval mode, the checkpoint's record without weights) of baseline ``kind`` from ``path``
    (default: the shipped ``checkpoints/<kind>.ckpt``). A missing, unreadable or foreign file, or one of
    another baseline, is an :class:`InputError` naming the file."""
    if kind not in NETS:
        raise ValueError(f"unknown refinement baseline {kind!r}; use one of {sorted(NETS)}")
    p = Path(path) if path else shipped_checkpoint(kind)
    if not p.exists():
        hint = (f"the shipped {kind} checkpoint is missing; rebuild it with `python train.py experiment={kind}`"
                if path is None else f"{kind} checkpoint not found")
        raise InputError(hint, p)
    ckpt = load_checkpoint(p, f"{kind} checkpoint")
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "net_config" not in ckpt:
        raise InputError(f"not a refinement-baseline checkpoint (no network config/weights); write one with "
                         f"`python train.py experiment={kind}`", p)
    if ckpt.get("kind") != kind:
        raise InputError(f"checkpoint holds a {ckpt.get('kind')!r} baseline, not {kind!r}", p)
    try:
        net = NETS[kind](**dict(ckpt["net_config"]))
        net.load_state_dict(ckpt["state_dict"], strict=True)
    except (TypeError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0][:200]
        raise InputError(f"checkpoint does not fit the {kind} network ({first})", p) from None
    record = {k: v for k, v in ckpt.items() if k != "state_dict"}
    return net.eval(), record


def window_maps(net: nn.Module, inputs: np.ndarray, patch_size: Sequence[int], n_out: int, overlap: float = 0.25,
                sw_batch_size: int = 4, gate_channel: int = 1, device: str = "cpu") -> np.ndarray:
    """The network's outputs (n_out, D, H, W) over a volume ``inputs`` (C, D, H, W), window by window.

    A window whose ``gate_channel`` (the mask) is empty is not computed: its output is :data:`EMPTY_LOGIT` on the
    first channel and 0 on the others."""
    from monai.inferers import sliding_window_inference

    if inputs.ndim != 4:
        raise ValueError(f"inputs must be (C, D, H, W), got {inputs.shape}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    x = torch.from_numpy(np.ascontiguousarray(inputs, dtype=np.float32))[None].to(device)
    net = net.to(device).eval()

    def predictor(batch: torch.Tensor) -> torch.Tensor:
        out = torch.zeros((batch.shape[0], n_out, *batch.shape[2:]), dtype=torch.float32, device=batch.device)
        out[:, 0] = EMPTY_LOGIT
        active = batch[:, gate_channel].flatten(1).amax(1) > 0.5
        if bool(active.any()):
            out[active] = net(batch[active]).float()
        return out

    with torch.inference_mode():
        y = sliding_window_inference(x, roi_size=tuple(int(s) for s in patch_size), sw_batch_size=int(sw_batch_size),
                                     predictor=predictor, overlap=float(overlap), mode="gaussian",
                                     padding_mode="constant", cval=0.0)
    return y[0].cpu().numpy()


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-np.clip(x, -50, 50)))).astype(np.float32)


class BaselineRefiner:
    """A loaded baseline that refines whole volumes: ``refine(image, mask) -> mask``.

    Args:
        kind: ``segfix`` | ``segrefiner`` | ``transfiner``.
        net: its network.
        settings: the inference settings recorded at training (``step``/``threshold``; ``steps``; ``cell``,
            ``neighbours``, ``threshold``), overridden by ``overrides``.
        patch_size: window size (z, y, x); default the training crop.
        overlap, sw_batch_size, device: sliding-window settings.
    """

    def __init__(self, kind: str, net: nn.Module, settings: dict | None = None,
                 patch_size: Sequence[int] = (32, 64, 64),
                 overlap: float = 0.25, sw_batch_size: int = 4, device: str = "cpu", source: str = "",
                 **overrides: Any) -> None:
        if kind not in NETS:
            raise ValueError(f"unknown refinement baseline {kind!r}; use one of {sorted(NETS)}")
        self.kind, self.net, self.source = kind, net.eval(), source
        self.settings = {**(settings or {}), **overrides}
        self.patch_size = tuple(int(s) for s in patch_size)
        if len(self.patch_size) != 3 or min(self.patch_size) < 1:
            raise ValueError(f"patch_size must be three positive sizes, got {patch_size}")
        self.overlap, self.sw_batch_size, self.device = float(overlap), int(sw_batch_size), device
        self.last_calls = 0  # network passes over the volume in the last refine (SegRefiner: its steps)

    @classmethod
    def load(cls, kind: str, checkpoint: str | Path | None = None, patch_size: Sequence[int] | None = None,
             **kwargs: Any) -> BaselineRefiner:
        net, record = load_baseline(kind, checkpoint)
        patch = patch_size or record.get("train_patch") or (32, 64, 64)
        return cls(kind, net, dict(record.get("settings") or {}), patch, source=str(checkpoint or
                                                                                    shipped_checkpoint(kind)), **kwargs)

    def _maps(self, inputs: np.ndarray, n_out: int) -> np.ndarray:
        return window_maps(self.net, inputs, self.patch_size, n_out, self.overlap, self.sw_batch_size, 1, self.device)

    def refine(self, image: np.ndarray, mask: np.ndarray) -> np.ndarray:
        img = np.asarray(image, dtype=np.float32)
        m = np.asarray(mask, dtype=bool)
        if img.ndim != 3 or img.shape != m.shape:
            raise InputError(f"image {img.shape} and mask {m.shape} must be 3D volumes of one shape")
        self.last_calls = 0
        if not m.any():
            return m.copy()
        s = self.settings
        if self.kind == "segfix":
            out = self._maps(np.stack([img, m.astype(np.float32)]), 4)
            self.last_calls = 1
            return segfix_relabel(m, _sigmoid(out[0]), out[1:], int(s.get("step", 1)), float(s.get("threshold", 0.5)))
        if self.kind == "transfiner":
            sel = octree_uncertain(m, s.get("cell", (2, 8, 8)), int(s.get("neighbours", 1)))
            prob = _sigmoid(self._maps(np.stack([img, m.astype(np.float32)]), 1)[0])
            self.last_calls = 1
            return transfiner_apply(m, prob, sel, float(s.get("threshold", 0.5)))
        steps = int(s.get("steps", 6))

        def predict(x: np.ndarray, t: int) -> np.ndarray:
            tc = np.full(img.shape, t / steps, np.float32)
            return _sigmoid(self._maps(np.stack([img, x.astype(np.float32), tc]), 1)[0])

        refined, self.last_calls = segrefiner_reverse(predict, m, steps, float(s.get("threshold", 0.5)))
        return refined
