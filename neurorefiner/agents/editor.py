"""The editor behind the loop: built lazily, called on editor-sized frames.

The loop needs only "edit this box with this instruction". The real editor (TopoRefineNet) is imported
only when the first edit is asked for, so inspecting a volume, replaying a trace or testing the loop
with a stand-in never loads torch weights. The network was trained on 32 x 64 x 64 (ZYX) crops; the
loop cuts a window of that size around the named place and pads it where the volume is smaller.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from neurorefiner.agents.roles import EditFrame, Editor
from neurorefiner.errors import InputError
from neurorefiner.topology.blocks import centred_window
from neurorefiner.topology.instructions import Instruction
from neurorefiner.topology.positions import locate


def load_topo_refiner(checkpoint: str | None = None, threshold: float = 0.5, confine_margin: int | None = 4,
                      device: str = "cpu", decoding: Mapping[str, Any] | None = None,
                      decoding_mode: str = "topology") -> Editor:
    """The shipped TopoRefineNet editor (or ``checkpoint``); imported here, never at module import.
    ``decoding``: settings of its topology decoding (``neurorefiner.inference.decoding.DecodingConfig``).
    ``decoding_mode``: ``topology`` (default) or ``raw``, the network's own thresholded output confined to the
    named place: what an ablation of the network runs, since the topology decoding makes most joins by itself."""
    from neurorefiner.inference.refiner import DECODINGS, TopoRefiner

    if decoding_mode not in DECODINGS:
        raise InputError(f"editor decoding_mode {decoding_mode!r}: choose from {', '.join(DECODINGS)}")
    return TopoRefiner.load(checkpoint, device=device, threshold=threshold, confine_margin=confine_margin,
                            decoding=decoding_mode, decoding_config=dict(decoding) if decoding else None)


class LazyEditor:
    """Builds its editor on the first :meth:`edit` (thread-safe), so runs with nothing to edit stay light."""

    def __init__(self, factory: Any, **kwargs: Any) -> None:
        self._factory, self._kwargs = factory, kwargs
        self._editor: Editor | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._editor is not None

    def edit(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: str | Instruction,
             context: np.ndarray | None = None) -> Any:
        """The editor's answer; through ``edit_result`` when it has one (the reason travels with the mask)."""
        if self._editor is None:
            with self._lock:
                if self._editor is None:
                    self._editor = self._factory(**self._kwargs)
        fn = getattr(self._editor, "edit_result", None) or self._editor.edit
        if context is not None and accepts(fn, "context"):
            return fn(image_block, mask_block, instruction, context=context)
        return fn(image_block, mask_block, instruction)


def accepts(fn: Any, name: str) -> bool:
    """Whether ``fn`` takes a keyword argument ``name`` (the editor's optional context)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def result_mask(result: Any, shape: Sequence[int]) -> np.ndarray:
    """The bool mask of an editor's result (a plain array, or an object carrying ``.mask``)."""
    mask = getattr(result, "mask", result)
    out = np.asarray(mask).astype(bool)
    if out.shape != tuple(shape):
        raise ValueError(f"editor returned shape {out.shape}, expected {tuple(shape)}")
    return out


def result_reason(result: Any) -> str | None:
    reason = getattr(result, "reason", None)
    return None if reason is None else str(reason)


def result_declined(result: Any) -> bool:
    """Whether the editor refused the edit on the evidence (:attr:`EditResult.declined`); an editor that
    returns a bare mask never declines."""
    return bool(getattr(result, "declined", False))


class EditorOutput(NamedTuple):
    """What :func:`run_editor` hands the loop: the window's new mask, the editor's reason (if it gave one)
    and whether it declined the edit on the evidence."""

    mask: np.ndarray
    reason: str | None
    declined: bool


def frame_around(centre: Sequence[float], size: Sequence[int], region_shape: Sequence[int]) -> EditFrame:
    """An editor frame of ``size`` centred on ``centre`` (region coordinates), moved inside the region;
    padded (evenly) only along axes where the region is smaller than the editor."""
    window = centred_window(centre, size, region_shape)
    pad = []
    for s, n in zip(window, size):
        short = int(n) - (s.stop - s.start)
        pad.append((short // 2, short - short // 2) if short > 0 else (0, 0))
    return EditFrame(window, tuple(pad))


def frame_position(points: np.ndarray, frame: EditFrame):  # type: ignore[no-untyped-def]
    """The cell of ``frame`` holding most of ``points`` (region coordinates) that fall inside it."""
    f = frame.to_frame(points)
    keep = np.all((f >= 0) & (f < np.array(frame.shape)), axis=1)
    f = f[keep] if keep.any() else np.clip(f, 0, np.array(frame.shape) - 1)
    return locate(f.astype(float), frame.shape)


def frame_context(frame: EditFrame, mask: np.ndarray, halo: int) -> np.ndarray | None:
    """The region's mask around the frame, ``halo`` voxels wider on every side (what lies just outside the
    frame, so the editor's decoding does not take a fibre cut by the frame for an isolated piece). Beyond
    the region the border voxels are repeated: foreground that reaches the region's edge is taken to go on.
    None when the frame is padded (a volume smaller than the editor)."""
    if halo <= 0 or any(a or b for a, b in frame.pad):
        return None
    grown = tuple(slice(max(0, s.start - halo), min(n, s.stop + halo)) for s, n in zip(frame.window, mask.shape))
    crop = np.asarray(mask[grown], dtype=bool)
    pad = [(s.start - g.start, g.stop - s.stop) for s, g in zip(frame.window, grown)]
    return np.pad(crop, [(halo - a, halo - b) for a, b in pad], mode="edge")


def run_editor(editor: Editor, frame: EditFrame, image: np.ndarray, mask: np.ndarray,
               instruction: Instruction, context_halo: int = 4) -> EditorOutput:
    """Edit the frame of a region: crop, pad, call the editor (with the frame's surroundings when it takes
    a ``context``), crop back."""
    img = np.asarray(image[frame.window], dtype=np.float32)
    msk = np.asarray(mask[frame.window], dtype=bool)
    if any(a or b for a, b in frame.pad):
        img = np.pad(img, frame.pad)
        msk = np.pad(msk, frame.pad)
    context = frame_context(frame, mask, context_halo) if accepts(editor.edit, "context") else None
    if context is not None:
        result = editor.edit(img, msk, instruction, context=context)
    else:
        result = editor.edit(img, msk, instruction)
    out = result_mask(result, img.shape)
    if any(a or b for a, b in frame.pad):
        out = out[tuple(slice(a, n - b) for (a, b), n in zip(frame.pad, out.shape))]
    return EditorOutput(out, result_reason(result), result_declined(result))
