"""Sliding-window inference for the baseline segmenters, and their checkpoints.

A segmenter checkpoint is either a Lightning ``.ckpt`` written during training or the compact ``.pt``
exported at the end of it (weights + how to rebuild the network + the patch size it was trained on).
Both carry ``net_config`` (``_target_`` + constructor arguments), so a checkpoint alone is enough to
segment a stack; a checkpoint of another architecture or a foreign file fails with a message naming it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from neurorefiner.data.segmentation import normalization_spec, normalize_image, percentiles_of
from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path

CHECKPOINT_FORMAT = "neurorefiner-segmenter/1"
ALLOWED_PREFIX = "neurorefiner.models.segmenters."


@dataclass
class Segmenter:
    """A network ready for inference, with what it needs to be used the way it was trained."""

    net: nn.Module
    arch: str
    patch_size: tuple[int, int, int]
    net_config: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    normalization: tuple[float, float] | None = None  # percentiles; None: min-max (checkpoints before 12/2026)


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


def export_segmenter(net: nn.Module, net_config: dict[str, Any], path: str | Path,
                     patch_size: Sequence[int], meta: dict[str, Any] | None = None,
                     normalization: dict[str, Any] | None = None) -> Path:
    """Write the compact inference checkpoint (weights + rebuild recipe + input normalisation record, as
    ``normalization_spec`` writes it; None records min-max), atomically."""
    payload = {"format": CHECKPOINT_FORMAT, "arch": arch_of(net_config), "net_config": dict(net_config),
               "patch_size": [int(p) for p in patch_size],
               "normalization": dict(normalization) if normalization else normalization_spec(None),
               "meta": dict(meta or {}), "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def _read_checkpoint(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise InputError("checkpoint not found", path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - Lightning checkpoints may hold non-tensor objects
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"not a readable PyTorch checkpoint ({type(exc).__name__})", path) from exc


def load_segmenter(path: str | Path, expected_arch: str | None = None) -> Segmenter:
    """Load a ``.pt`` export or a Lightning ``.ckpt``; ``expected_arch`` (e.g. 'unet3d') guards against a
    checkpoint of another network."""
    path = Path(path)
    ckpt = _read_checkpoint(path)
    if not isinstance(ckpt, dict):
        raise InputError("not a neurorefiner segmenter checkpoint", path)
    if ckpt.get("format") == CHECKPOINT_FORMAT:
        net_config, state, patch, meta = ckpt["net_config"], ckpt["state_dict"], ckpt["patch_size"], ckpt["meta"]
        norm = ckpt.get("normalization")
    elif "hyper_parameters" in ckpt and "net_config" in (ckpt.get("hyper_parameters") or {}):
        hp = ckpt["hyper_parameters"]
        net_config, patch, meta = dict(hp["net_config"]), hp.get("patch_size"), {"lightning": True}
        norm = hp.get("normalization")
        state = {k[len("net."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("net.")}
    else:
        raise InputError("not a neurorefiner segmenter checkpoint (no network recipe inside; TopoRefineNet "
                         "and foreign checkpoints cannot segment)", path)
    arch = arch_of(net_config)
    if expected_arch is not None and arch != expected_arch:
        raise InputError(f"checkpoint holds a {arch!r} network, expected {expected_arch!r}", path)
    net = build_from_config(net_config, str(path))
    own = net.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    mismatched = [k for k, v in state.items() if k in own and tuple(own[k].shape) != tuple(v.shape)]
    if missing or unexpected or mismatched:
        raise InputError(f"weights do not fit a {arch!r} network ({len(missing)} missing, {len(unexpected)} "
                         f"unexpected, {len(mismatched)} mis-shaped tensors): checkpoint of another "
                         "architecture or size", path)
    net.load_state_dict(state, strict=True)
    net.eval()
    patch_t = tuple(int(p) for p in (patch or (32, 96, 96)))
    return Segmenter(net, arch, patch_t, dict(net_config), dict(meta),  # type: ignore[arg-type]
                     percentiles_of(norm))


def sliding_window_probs(net: nn.Module, image: np.ndarray | torch.Tensor, patch_size: Sequence[int],
                         overlap: float = 0.25, mode: str = "gaussian", sigma_scale: float = 0.125,
                         sw_batch_size: int = 4, device: str | torch.device = "cpu",
                         progress: bool = False) -> np.ndarray:
    """Foreground probability (float32 ZYX) of a normalised image, window by window.

    Windows overlap by ``overlap`` (fraction of the patch) and are blended with a Gaussian (``mode``
    'gaussian') or uniformly ('constant'); volumes smaller than the patch are zero-padded by MONAI and
    cropped back. Accepts a ZYX array or an (N, C, D, H, W) tensor (returns the first item).
    ``sw_batch_size`` windows go through the network together: on CPU, batches of 4 ran ~5x faster per
    window than single windows (measured with the CPU U-Net, 16x64x64 windows, one thread).
    """
    from monai.inferers import sliding_window_inference

    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    if mode not in ("gaussian", "constant"):
        raise ValueError(f"mode must be 'gaussian' or 'constant', got {mode!r}")
    x = torch.as_tensor(np.asarray(image, dtype=np.float32)) if isinstance(image, np.ndarray) else image
    if x.ndim == 3:
        x = x[None, None]
    if not torch.isfinite(x).all():
        raise InputError("image holds NaN/inf voxels")
    x = x.to(device=device, dtype=torch.float32)
    members = getattr(net, "averaged_members", None)
    if members is not None:  # an averaged ensemble: the mean of its members' maps, each blended as its own
        # logits (blending the ensemble's log-probabilities instead differs where windows overlap)
        return np.mean([sliding_window_probs(m, x, patch_size, overlap, mode, sigma_scale, sw_batch_size, device,
                                             progress) for m in members()], axis=0)
    net = net.to(device)
    was_training = net.training
    net.eval()
    with torch.inference_mode():
        logits = sliding_window_inference(x, roi_size=tuple(int(p) for p in patch_size),
                                          sw_batch_size=sw_batch_size, predictor=net, overlap=overlap,
                                          mode=mode, sigma_scale=sigma_scale, progress=progress,
                                          padding_mode="constant", cval=0.0)
        probs = torch.softmax(logits.float(), dim=1)[:, 1] if logits.shape[1] > 1 else torch.sigmoid(logits[:, 0])
    net.train(was_training)
    return probs[0].cpu().numpy().astype(np.float32)


@dataclass(frozen=True)
class PostProcess:
    """How a probability map becomes the mask handed to APP2 (and to refinement as M_init).

    threshold: foreground probability cut.
    dust_voxels: drop 26-connected components smaller than this (speckle); 0 keeps all.
    keep_largest: keep only the k largest components (APP2 traces from one root, and a bright blob
        elsewhere can take the root); 0 keeps all.
    bridge_um: join fragments to the largest component across gaps up to this many micrometres
        (:func:`neurorefiner.models.gap_bridging.bridge_gaps`, before the component filters; needs the
        voxel spacing); 0 leaves breaks as they are.
    A checkpoint may record the setting chosen for it on validation data (:func:`record_postprocess`,
    ``experiments/segmenters/postprocess_dev.py``); that is then its default. Checkpoints without a record
    get :data:`DEFAULT_POSTPROCESS` (plain threshold 0.5).
    """

    threshold: float = 0.5
    dust_voxels: int = 0
    keep_largest: int = 0
    bridge_um: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.dust_voxels < 0 or self.keep_largest < 0:
            raise ValueError(f"dust_voxels and keep_largest must be >= 0, got {self.dust_voxels}, "
                             f"{self.keep_largest}")
        if not self.bridge_um >= 0:
            raise ValueError(f"bridge_um must be >= 0, got {self.bridge_um}")

    def as_dict(self) -> dict[str, Any]:
        """The setting as recorded in checkpoints and caches; ``bridge_um`` only when used, so settings
        recorded before it existed keep their keys (and the caches keyed on them)."""
        d: dict[str, Any] = {"threshold": self.threshold, "dust_voxels": self.dust_voxels,
                             "keep_largest": self.keep_largest}
        if self.bridge_um:
            d["bridge_um"] = self.bridge_um
        return d


DEFAULT_POSTPROCESS = PostProcess()


def recorded_postprocess(segmenter: Segmenter) -> PostProcess:
    """The post-processing recorded in the segmenter's checkpoint, else :data:`DEFAULT_POSTPROCESS`."""
    rec = segmenter.meta.get("postprocess")
    return PostProcess(**rec) if isinstance(rec, dict) else DEFAULT_POSTPROCESS


def record_postprocess(path: str | Path, post: PostProcess, chosen_on: str) -> Path:
    """Store ``post`` (and what it was chosen on) in an exported ``.pt`` checkpoint, atomically; inference
    with that checkpoint then uses it by default."""
    path = Path(path)
    ckpt = _read_checkpoint(path)
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise InputError("only exported segmenter checkpoints (.pt) can record post-processing", path)
    meta = ckpt.get("meta") or {}
    if meta.get("postprocess") == post.as_dict() and meta.get("postprocess_chosen_on") == chosen_on:
        return path  # already recorded: leave the file (and its hash, which keys the mask caches) alone
    ckpt["meta"] = dict(meta, postprocess=post.as_dict(), postprocess_chosen_on=chosen_on)
    with atomic_path(path) as tmp:
        torch.save(ckpt, tmp)
    return path


def postprocess_mask(probs: np.ndarray, post: PostProcess = DEFAULT_POSTPROCESS,
                     spacing: Sequence[float] | None = None) -> np.ndarray:
    """Binary mask (bool ZYX) of a foreground-probability map: threshold, gap bridging, dust removal, largest
    components. ``spacing`` (z, y, x um) is needed only when ``post.bridge_um`` is set."""
    import cc3d

    mask = np.asarray(probs) > post.threshold
    if post.bridge_um and mask.any():
        if spacing is None:
            raise ValueError("gap bridging (bridge_um) needs the voxel spacing")
        from neurorefiner.models.gap_bridging import bridge_gaps

        mask = bridge_gaps(mask, spacing, post.bridge_um)
    if not mask.any() or (post.dust_voxels == 0 and post.keep_largest == 0):
        return mask
    if post.dust_voxels > 0:
        mask = cc3d.dust(mask, threshold=int(post.dust_voxels), connectivity=26, in_place=True)
    if post.keep_largest > 0 and mask.any():
        mask = cc3d.largest_k(mask, k=int(post.keep_largest), connectivity=26, binary_image=True) > 0
    return mask.astype(bool, copy=False)


DEFAULT_WINDOW: tuple[int, int, int] = (64, 256, 256)
"""Inference window when none is given: wide windows (the network is fully convolutional) cost about half
the time of training-patch-sized ones (bench ``segmentation``: 22.3 s vs 41.6 s on 256^3)."""


def default_window(train_patch: Sequence[int], shape: Sequence[int],
                   wide: Sequence[int] = DEFAULT_WINDOW,
                   max_input: Sequence[int] | None = None) -> tuple[int, int, int]:
    """Per axis: at least the training patch, up to ``wide``, never beyond the volume (no padding waste)
    unless the volume is smaller than the training patch (then MONAI pads). ``max_input``: the largest
    input the network accepts (a ViT's fixed ``img_size``, see :func:`max_input_of`) caps the window."""
    window = [max(int(t), min(int(w), int(s))) for t, w, s in zip(train_patch, wide, shape, strict=True)]
    if max_input is not None:
        window = [min(w, int(m)) for w, m in zip(window, max_input, strict=True)]
    return tuple(window)  # type: ignore[return-value]


def max_input_of(net: nn.Module) -> tuple[int, int, int] | None:
    """The largest (z, y, x) input a network accepts, or None when any size works: networks with a fixed
    input (UNETR's ViT) say so with a ``max_input_size`` attribute."""
    size = getattr(net, "max_input_size", None)
    return tuple(int(s) for s in size) if size is not None else None  # type: ignore[return-value]


def segment_array(segmenter: Segmenter, image: np.ndarray, threshold: float | None = None, overlap: float = 0.25,
                  mode: str = "gaussian", sw_batch_size: int = 4, device: str = "cpu",
                  patch_size: Sequence[int] | None = None, progress: bool = False,
                  source: str | None = None, post: PostProcess | None = None,
                  spacing: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(mask bool, probability float32) of a raw ZYX image: normalised as the checkpoint was trained,
    windowed (``patch_size`` None: :func:`default_window`), then :func:`postprocess_mask` with ``post``
    (default: the checkpoint's recorded setting, :func:`recorded_postprocess`; ``threshold`` overrides
    its threshold). ``spacing`` (z, y, x um): for gap bridging."""
    import dataclasses

    if image.ndim != 3:
        raise InputError(f"expected a 3D (z, y, x) stack, got shape {image.shape}", source)
    post = post or recorded_postprocess(segmenter)
    if threshold is not None:
        post = dataclasses.replace(post, threshold=float(threshold))
    if post.bridge_um and spacing is None:  # before the slow part
        raise InputError(f"post-processing {post.as_dict()} bridges gaps in micrometres: the image needs a "
                         "voxel spacing", source)
    norm = normalize_image(image, source, segmenter.normalization)
    window = patch_size or default_window(segmenter.patch_size, image.shape, max_input=max_input_of(segmenter.net))
    probs = sliding_window_probs(segmenter.net, norm, window, overlap, mode,
                                 sw_batch_size=sw_batch_size, device=device, progress=progress)
    return postprocess_mask(probs, post, spacing), probs


def windows_count(shape: Sequence[int], patch: Sequence[int], overlap: float) -> int:
    """How many windows MONAI places on ``shape`` (for the windowing-overhead figure)."""
    n = 1
    for s, p in zip(shape, patch, strict=True):
        p = min(p, s) if s < p else p
        step = max(1, int(p * (1 - overlap)))
        n *= 1 if s <= p else math.ceil((s - p) / step) + 1
    return n
