"""Open a ``refine.py`` output folder: the run's trace, its inputs and its outputs, checked file by file.

A refine folder holds ``trace.jsonl`` (whose ``run`` record names the image and the initial mask it was
run on), ``refined_mask.tif`` and, usually, ``refined_mask.swc`` and ``report.html``. The image and the
initial mask are not copied there, so they are read from where the run found them unless the caller
names other copies (they moved, or the folder came from another machine). Every problem is an
:class:`~neurorefiner.errors.InputError` that names the file, so a person gets one line, not a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurorefiner.agents.trace import read_trace
from neurorefiner.errors import InputError
from neurorefiner.io import Tree, read_mask, read_swc, read_volume
from neurorefiner.refine.local import TRACE
from neurorefiner.topology.blocks import Block, grid_blocks

REFINED = "refined_mask.tif"
SWC = "refined_mask.swc"
REVIEWED = "reviewed_mask.tif"
WHOLE_VOLUME = "refined_mask.ome.zarr"   # executor=dask writes this instead of REFINED


@dataclass
class RunFolder:
    """One refine run as a person reviews it: arrays ZYX (image as stored, masks bool), ``spacing`` z,y,x
    in um, every trace record, and the block grid the run used (so block ids mean what they meant)."""

    path: Path
    records: list[dict]
    header: dict
    image: np.ndarray
    initial: np.ndarray
    refined: np.ndarray
    spacing: tuple[float, float, float]
    blocks: list[Block]
    tree: Tree | None = None
    sources: dict = field(default_factory=dict)

    @property
    def trace_path(self) -> Path:
        return self.path / TRACE


def run_input_path(folder: Path, header: dict, key: str, given: str | Path | None) -> Path:
    """Where the run's ``key`` input is now: the caller's copy, else the recorded path (absolute, or relative
    to the folder or to the working directory)."""
    if given is not None:
        p = Path(given)
        if not p.exists():
            raise InputError(f"the {key} given for review does not exist", p)
        return p
    recorded = (header.get("inputs") or {}).get(key)
    if not recorded:
        raise InputError(f"the run record names no {key}; pass it (neurorefiner review DIR --{key} FILE)",
                         folder / TRACE)
    p = Path(recorded)
    for candidate in ([p] if p.is_absolute() else [folder / p, p]):
        if candidate.exists():
            return candidate
    raise InputError(f"the run's {key} is not there any more (moved or on another machine); pass its copy with "
                     f"--{key} FILE", p)


def read_run_records(folder: str | Path) -> tuple[list[dict], dict]:
    """The trace's records and the last ``run`` header; :class:`InputError` if ``folder`` is no refine folder."""
    path = Path(folder)
    if not path.exists():
        raise InputError("no such folder", path)
    if not path.is_dir():
        raise InputError("not a folder (give the out= folder of a refine.py run)", path)
    trace = path / TRACE
    if not trace.is_file():
        raise InputError(f"not a refine.py output folder: no {TRACE} (refine.py image=... mask=... out=FOLDER "
                         "writes one)", trace)
    try:
        records = read_trace(trace, repair=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the trace ({exc})", trace) from None
    runs = [r for r in records if isinstance(r, dict) and r.get("type") == "run"]
    if not runs:
        raise InputError("holds no run record: not a refine.py trace, or empty", trace)
    return [r for r in records if isinstance(r, dict)], runs[-1]


def open_folder(folder: str | Path, image: str | Path | None = None, mask: str | Path | None = None) -> RunFolder:
    """Read everything a review needs from ``folder`` (see the module docstring); ``image``/``mask`` replace
    the paths the run recorded."""
    path = Path(folder)
    records, header = read_run_records(path)
    refined_path = path / REFINED
    if not refined_path.is_file() and (path / WHOLE_VOLUME).exists():
        raise InputError(f"a whole-volume run (executor=dask, {WHOLE_VOLUME}): decisions are reviewed on in-memory "
                         f"runs ({REFINED}) only; `napari {path}` opens this one to look at (image, masks, skeleton), "
                         "or refine a crop with executor=local and review that", path)
    if not refined_path.is_file():
        raise InputError(f"missing: the run did not finish (run the same refine.py command again to resume it; "
                         f"{TRACE} keeps its decisions)", refined_path)
    image_path = run_input_path(path, header, "image", image)
    mask_path = run_input_path(path, header, "mask", mask)
    img = read_volume(image_path)
    initial = read_mask(mask_path)
    refined = read_mask(refined_path)
    for name, vol in (("initial mask", initial), ("refined mask", refined)):
        if vol.shape != img.shape:
            raise InputError(f"{name} has shape {vol.shape} but the image {image_path} has {img.shape}: "
                             "not the run's inputs", vol.source)
    settings = header.get("settings") or {}
    blocks = grid_blocks(img.shape, settings.get("block_size", 128), settings.get("block_depth"))
    tree = read_swc(path / SWC) if (path / SWC).is_file() else None
    return RunFolder(path, records, header, np.asarray(img.load()), np.asarray(initial.load(), bool),
                     np.asarray(refined.load(), bool), tuple(float(s) for s in img.spacing), blocks, tree,
                     {"image": str(image_path), "mask": str(mask_path), "refined": str(refined_path)})
