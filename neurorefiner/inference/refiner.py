"""Inference API for TopoRefineNet: load a checkpoint, edit one block with one instruction.

Used by the agents' loop, ``refine.py`` and ``neurorefiner edit``. A checkpoint written by
``train_refiner`` carries the network and text-encoder configs, so ``TopoRefiner.load(path)`` needs
nothing else. With no path it loads the shipped checkpoint ``checkpoints/toporefinenet.ckpt``.

Edits are confined to the place the instruction names (``confine_margin``, on by default): voxels more
than a few voxels outside the named sub-region keep their input value. The agents' loop asks for one
edit at one place per instruction; a change elsewhere in the block is one nobody asked for and one the
Change Validator would have to catch. The margin (4 voxels) covers the defects whose voxels spill over
a cell boundary: on the stage-1 validation defects (OP_6, 32 x 64 x 64 crops) 94 % of the defect voxels
lie inside the named cells and 99.6 % within 4 voxels of them. ``confine_margin=None`` returns the
network's raw output (what the instruction-following experiments measure first).

Decoding (``decoding="topology"``, the default): the network's probability is read per component by
:mod:`neurorefiner.inference.decoding`: *remove* deletes only isolated pieces the network rejects (a
neurite crossing the named cell is never cut), *connect / repair* joins the components that meet the named
place along the least-cost path and paints a tube of their radius, or leaves the mask unchanged with the
reason when the bridge is too long or too dark. Thresholding alone cut true neurites and filled about a
third of a break's gap. ``decoding="raw"`` is the threshold plus confinement above (the network's own
output, one switch away for experiments). :meth:`TopoRefiner.edit_result` says what was done and why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neurorefiner import paths
from neurorefiner.errors import InputError
from neurorefiner.inference.decoding import (
    Context,
    DecodingConfig,
    EditResult,
    decode,
    raw_decode,
    remove_decided_without_network,
)
from neurorefiner.io.checkpoints import load_checkpoint
from neurorefiner.paths import project_root
from neurorefiner.topology.instructions import Instruction, InstructionParseError, parse_instruction

SHIPPED_CHECKPOINT = "checkpoints/toporefinenet.ckpt"
ADDING_OPS = frozenset({"connect", "repair"})  # operations that may only add voxels; remove may only delete
DECODINGS = ("topology", "raw")
DEFAULT_CROP_MARGIN = 16  # voxels of context around the named place for the network pass (see crop_box)


def crop_box(region: np.ndarray, margin: int, multiple: int) -> tuple[slice, ...]:
    """The box the network sees for an edit at ``region``: the region's bounding box grown by ``margin``
    voxels, its start rounded down and its end up to multiples of ``multiple`` (the network's size
    multiple, so the crop's feature grid is the whole block's grid: a bottleneck cell covers the same
    voxels either way), clipped to the block. An axis the crop would not shorten keeps the whole block."""
    shape = region.shape
    idx = np.argwhere(region)
    if len(idx) == 0:
        return tuple(slice(0, n) for n in shape)
    lo, hi = idx.min(axis=0), idx.max(axis=0) + 1
    out = []
    for a, b, n in zip(lo, hi, shape, strict=True):
        start = max(0, (int(a) - margin) // multiple * multiple)
        stop = min(n, -(-(int(b) + margin) // multiple) * multiple)
        out.append(slice(start, stop))
    return tuple(out)


@contextmanager
def _block_positions(net: torch.nn.Module, offset: Sequence[int], block: Sequence[int]) -> Iterator[None]:
    """While active, the network's position embedding gives each bottleneck cell of a crop the
    coordinates it has in the whole block (``offset`` = the crop's start, ``block`` = the block's shape),
    not the crop's own: the instruction names places of the block ("top-left-rear"), and a crop whose own
    corner were taken for the block's corner would be told a different place."""
    if getattr(net, "position", None) is None or not hasattr(net, "_position"):
        yield
        return

    def position(feat: torch.Tensor, size: tuple[int, ...]) -> torch.Tensor:
        axes = []
        for n, o, s in zip(feat.shape[2:], offset, block, strict=True):
            centre = o + (torch.arange(n, device=feat.device, dtype=feat.dtype) + 0.5) * net.min_size
            axes.append(centre / max(int(s), 1) * 2 - 1)
        grid = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)
        emb = net.position(grid)
        return emb.permute(-1, *range(net.spatial_dims)).unsqueeze(0)

    net._position = position  # an instance attribute shadows the method for this pass only
    try:
        yield
    finally:
        del net._position


def gate_by_operation(prob: np.ndarray, foreground: np.ndarray, op: str) -> np.ndarray:
    """The network's probability with the edits the operation forbids taken out: a connect or repair may only
    add voxels (the input's foreground stays at least as likely as the network says, and at least 1), a
    remove may only delete them. The grammar's operation fixes the direction of an obedient edit, so an
    editor told to remove noise never fills a gap, and one told to connect never erases a neurite; what
    the text still has to carry is where, and whether anything at all is to be done there."""
    fg = np.asarray(foreground, dtype=np.float32)
    return np.maximum(prob, fg) if op in ADDING_OPS else np.minimum(prob, fg)


def default_checkpoint() -> Path:
    return project_root() / SHIPPED_CHECKPOINT


class TopoRefiner:
    """A trained TopoRefineNet plus its frozen text encoder, ready to edit numpy blocks.

    Args:
        net: the network (eval mode is set here).
        text_encoder: object with ``encode(list[str]) -> (N, d)``.
        device: torch device for the network.
        threshold: foreground-probability threshold for the output mask.
        confine_margin: voxels of slack around the named sub-region outside which :meth:`edit` keeps the
            input mask; None = no confinement (with ``decoding="raw"``: the network's raw output; the
            topology decoding then uses its configured margin).
        decoding: ``"topology"`` (default: component-wise decoding, see the module docstring) or ``"raw"``
            (threshold + confinement).
        decoding_config: settings of the topology decoding (:class:`DecodingConfig` or a mapping);
            ``threshold`` and ``confine_margin`` given here override its threshold and margin.
        crop_margin: for the topology decoding the network runs on a crop around the named place (the
            named sub-region grown by this many voxels of context, rounded to the network's size multiple;
            see :func:`crop_box`) and the input mask stands for its output elsewhere, where the decoding
            changes nothing; None = the whole block (the network's view in training, several times slower
            on large blocks). The raw decoding always sees the whole block (see :meth:`probabilities`).
    """

    def __init__(self, net: torch.nn.Module, text_encoder: Any, device: str = "cpu", threshold: float = 0.5,
                 source: str = "", confine_margin: int | None = 4, decoding: str = "topology",
                 decoding_config: DecodingConfig | dict | None = None,
                 crop_margin: int | None = DEFAULT_CROP_MARGIN, operation_gate: bool = False) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        if confine_margin is not None and confine_margin < 0:
            raise ValueError(f"confine_margin must be >= 0 or None, got {confine_margin}")
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {DECODINGS}, got {decoding!r}")
        if crop_margin is not None and crop_margin < 0:
            raise ValueError(f"crop_margin must be >= 0 or None, got {crop_margin}")
        self.crop_margin = crop_margin
        self.operation_gate = bool(operation_gate)
        self.net = net.to(device).eval()
        self.text_encoder = text_encoder
        self.device, self.threshold, self.source = device, float(threshold), source
        self.confine_margin = confine_margin
        self.decoding = decoding
        cfg = DecodingConfig.build(decoding_config)
        if crop_margin is not None:
            # the crop must hold everything a decoding may change or read the network's output at
            needed = max(cfg.margin, cfg.connect_margin, confine_margin or 0)
            if crop_margin < needed:
                raise ValueError(f"crop_margin {crop_margin} is below the decoding's reach ({needed} voxels)")
        overrides = {"threshold": float(threshold)}
        if confine_margin is not None:
            overrides["margin"] = int(confine_margin)
        self.decoding_config = DecodingConfig(**{**cfg.__dict__, **overrides})

    @classmethod
    def load(cls, ckpt_path: str | Path | None = None, device: str = "cpu", text_encoder: Any = None,
             cache_dir: str | Path | None = None, threshold: float = 0.5,
             confine_margin: int | None = 4, decoding: str = "topology",
             decoding_config: DecodingConfig | dict | None = None,
             crop_margin: int | None = DEFAULT_CROP_MARGIN, operation_gate: bool = False) -> TopoRefiner:
        """Rebuild the network and text encoder recorded in ``ckpt_path`` (default: the shipped one).

        ``text_encoder`` replaces the recorded one (it must have the same embedding size). The
        embedding cache is ``cache_dir`` or, by default, ``<cache_dir()>/text_embeddings`` of this
        checkout (never the path recorded on the machine that trained the model)."""
        from hydra.utils import instantiate

        path = Path(ckpt_path) if ckpt_path else default_checkpoint()
        if not path.exists():
            hint = ("the shipped checkpoint is missing from this checkout; train one with "
                    "`python train.py +stage=1` then `+stage=2`" if ckpt_path is None else "no such checkpoint")
            raise InputError(hint, path=str(path))
        ckpt = load_checkpoint(path, "TopoRefineNet checkpoint")
        hp = ckpt.get("hyper_parameters", {}) if isinstance(ckpt, dict) else {}
        net_cfg, te_cfg = hp.get("net_config"), hp.get("text_encoder_config")
        if not net_cfg or "state_dict" not in ckpt:
            raise InputError("checkpoint has no TopoRefineNet config/weights (was it written by train_refiner?)",
                             path=str(path))
        net = instantiate(net_cfg)
        state = {k[len("net."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
        net.load_state_dict(state)
        if text_encoder is None:
            if not te_cfg:
                raise InputError("checkpoint records no text encoder; pass text_encoder=", path=str(path))
            te_cfg = dict(te_cfg)
            if "cache_dir" in te_cfg or cache_dir is not None:
                te_cfg["cache_dir"] = str(cache_dir if cache_dir is not None else
                                          paths.cache_dir() / "text_embeddings")
            text_encoder = instantiate(te_cfg)
        if int(text_encoder.dim) != int(net.text_dim):
            raise InputError(f"text encoder gives {text_encoder.dim}-d embeddings but the network expects "
                             f"{net.text_dim}-d", path=str(path))
        return cls(net, text_encoder, device=device, threshold=threshold, source=str(path),
                   confine_margin=confine_margin, decoding=decoding, decoding_config=decoding_config,
                   crop_margin=crop_margin, operation_gate=operation_gate)

    @staticmethod
    def parse(instruction: str | Instruction) -> Instruction:
        """The instruction read by the grammar; unreadable text -> InputError listing the grammar."""
        try:
            return parse_instruction(instruction)
        except InstructionParseError as exc:
            raise InputError(str(exc)) from None

    @torch.inference_mode()
    def probabilities(self, image_block: np.ndarray, mask_block: np.ndarray,
                      instruction: str | Instruction, crop: bool = True) -> np.ndarray:
        """Foreground probability (float32, block shape) after applying ``instruction`` (not confined).

        With ``crop_margin`` set (and ``crop`` True) the network sees only the crop around the named place
        (:func:`crop_box`); outside it the input mask (0 / 1) stands for the network's output. Without
        confinement (``confine_margin=None``: the network's raw output over the block) it sees the block.
        :meth:`edit_result` crops for the topology decoding only: near the named place, where that
        decoding reads the probability, the crop's output matches the whole block's (the probe's decoded
        figures are the same either way), while the thresholded raw output, read voxel by voxel, fills
        less of a gap on a crop (instance norm then takes its statistics from the crop alone), so the raw
        decoding keeps the network's view of the whole block as in training."""
        image = np.asarray(image_block, dtype=np.float32)
        mask = np.asarray(mask_block)
        if image.shape != mask.shape:
            raise InputError(f"image block {image.shape} and mask block {mask.shape} differ in shape")
        if image.ndim != self.net.spatial_dims:
            raise InputError(f"blocks must be {self.net.spatial_dims}-D (ZYX), got shape {image.shape}")
        if image.size == 0:
            raise InputError("empty block")
        if not str(instruction).strip():
            raise InputError("empty instruction")
        parsed = self.parse(instruction)
        fg = mask.astype(np.float32) > 0
        region = parsed.region(image.shape)
        box = tuple(slice(0, n) for n in image.shape)
        if crop and self.crop_margin is not None and self.confine_margin is not None:
            box = crop_box(region, int(self.crop_margin), int(getattr(self.net, "min_size", 1)))
        emb = self.text_encoder.encode([parsed.format()]).to(self.device)

        def tensor(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))[None, None].to(self.device)

        x, m = tensor(image[box]), tensor(fg[box])
        with _block_positions(self.net, [b.start for b in box], image.shape):
            if getattr(self.net, "region_channel", False):
                logits = self.net(x, m, emb, region=tensor(region[box]))
            else:
                logits = self.net(x, m, emb)
        part = self.net.probabilities(logits)[0, 0].float().cpu().numpy()
        if part.shape == image.shape:
            out = part
        else:
            out = fg.astype(np.float32)
            out[box] = part
        return gate_by_operation(out, fg, parsed.op) if self.operation_gate else out

    def allowed_region(self, instruction: str | Instruction, shape: tuple[int, ...]) -> np.ndarray:
        """Where :meth:`edit` may change the mask: the named sub-region grown by ``confine_margin`` voxels
        (everywhere when confinement is off)."""
        if self.confine_margin is None:
            return np.ones(shape, dtype=bool)
        region = self.parse(instruction).region(shape)
        if self.confine_margin > 0:
            from scipy import ndimage as ndi

            region = ndi.binary_dilation(region, iterations=int(self.confine_margin))
        return region

    def edit(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: str | Instruction,
             context: Context = None) -> np.ndarray:
        """The edited mask (bool, block shape), changed only near the named place (see the module
        docstring). ``image_block`` is expected in [0, 1] (normalised); ``context`` tells the decoding
        what lies outside the block (see :meth:`edit_result`)."""
        return self.edit_result(image_block, mask_block, instruction, context).mask

    def edit_result(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: str | Instruction,
                    context: Context = None) -> EditResult:
        """Edit one block and say what was done: an :class:`EditResult` (mask, changed, reason, voxels
        added and removed).

        ``context`` (topology decoding only) is the mask with a halo around the block (shape = block +
        2 * halo per axis), or per face of the block whether foreground continues outside it (a mapping
        front/rear/top/bottom/left/right -> bool); None = unknown, so a piece touching the block's border
        is taken to continue beyond it and is never removed. A block smaller than the network's minimum
        size is padded by the network (and cropped back). An instruction with nothing to do at its
        place returns the mask unchanged, with the reason."""
        parsed = self.parse(instruction) if str(instruction).strip() else instruction
        if self.decoding == "topology" and isinstance(parsed, Instruction):
            image = np.asarray(image_block, dtype=np.float32)
            if image.shape == np.shape(mask_block):
                try:
                    decided = remove_decided_without_network(np.asarray(mask_block) > 0, image, parsed,
                                                             self.decoding_config, context)
                except ValueError as exc:  # a context of the wrong shape or faces: the caller's input
                    raise InputError(str(exc)) from None
                if decided is not None:
                    return decided
        prob = self.probabilities(image_block, mask_block, parsed, crop=self.decoding == "topology")
        return self.decode_probabilities(image_block, mask_block, parsed, prob, context)

    def decode_probabilities(self, image_block: np.ndarray, mask_block: np.ndarray,
                             instruction: str | Instruction, prob: np.ndarray, context: Context = None,
                             decoding: str | None = None) -> EditResult:
        """The decoding step of :meth:`edit_result` on probabilities already computed (``decoding``
        overrides this refiner's choice), so one network pass can be decoded both ways."""
        decoding = self.decoding if decoding is None else decoding
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {DECODINGS}, got {decoding!r}")
        parsed = self.parse(instruction)
        mask = np.asarray(mask_block) > 0
        if decoding == "raw":
            return raw_decode(mask, prob, self.allowed_region(parsed, mask.shape), self.threshold)
        try:
            return decode(mask, prob, np.asarray(image_block, dtype=np.float32), parsed, self.decoding_config,
                          context)
        except ValueError as exc:  # a context of the wrong shape or faces: the caller's input
            raise InputError(str(exc)) from None
