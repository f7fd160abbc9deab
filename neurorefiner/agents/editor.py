"""The editor behind the loop: built lazily, called on editor-sized frames.

The loop needs only "edit this box with this instruction". The real editor (TopoRefineNet) is imported
only when the first edit is asked for, so inspecting a volume, replaying a trace or testing the loop
with a stand-in never loads torch weights. The network was trained on 32 x 64 x 64 (ZYX) crops; the
loop cuts a window of that size around the named place and pads it where the volume is smaller.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from neurorefiner.agents.roles import EditFrame, Editor
from neurorefiner.topology.blocks import centred_window
from neurorefiner.topology.instructions import Instruction


def load_topo_refiner(checkpoint: str | None = None, threshold: float = 0.5, confine_margin: int | None = 4,
                      device: str = "cpu") -> Editor:
    """The shipped TopoRefineNet editor (or ``checkpoint``); imported here, never at module import."""
    try:
        from neurorefiner.inference.refiner import TopoRefiner
    except ImportError:  # the editor's older home, before the inference package existed
        from neurorefiner.models.refiner import TopoRefiner  # type: ignore[no-redef]
    return TopoRefiner.load(checkpoint, device=device, threshold=threshold, confine_margin=confine_margin)


class LazyEditor:
    """Builds its editor on the first :meth:`edit` (thread-safe), so runs with nothing to edit stay light."""

    def __init__(self, factory: Any, **kwargs: Any) -> None:
        self._factory, self._kwargs = factory, kwargs
        self._editor: Editor | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._editor is not None

    def edit(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: str | Instruction) -> Any:
        if self._editor is None:
            with self._lock:
                if self._editor is None:
                    self._editor = self._factory(**self._kwargs)
        return self._editor.edit(image_block, mask_block, instruction)


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


def frame_around(centre: Sequence[float], size: Sequence[int], region_shape: Sequence[int]) -> EditFrame:
    """An editor frame of ``size`` centred on ``centre`` (region coordinates), moved inside the region;
    padded (evenly) only along axes where the region is smaller than the editor."""
    window = centred_window(centre, size, region_shape)
    pad = []
    for s, n in zip(window, size):
        short = int(n) - (s.stop - s.start)
        pad.append((short // 2, short - short // 2) if short > 0 else (0, 0))
    return EditFrame(window, tuple(pad))


def run_editor(editor: Editor, frame: EditFrame, image: np.ndarray, mask: np.ndarray,
               instruction: Instruction) -> tuple[np.ndarray, str | None]:
    """Edit the frame of a region: crop, pad, call the editor, crop back. Returns the window's new mask
    and the editor's reason, if it gave one."""
    img = np.asarray(image[frame.window], dtype=np.float32)
    msk = np.asarray(mask[frame.window], dtype=bool)
    if any(a or b for a, b in frame.pad):
        img = np.pad(img, frame.pad)
        msk = np.pad(msk, frame.pad)
    result = editor.edit(img, msk, instruction)
    out = result_mask(result, img.shape)
    if any(a or b for a, b in frame.pad):
        out = out[tuple(slice(a, n - b) for (a, b), n in zip(frame.pad, out.shape))]
    return out, result_reason(result)
