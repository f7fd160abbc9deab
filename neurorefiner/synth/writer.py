"""Write one rendered stack as the three files every tool here (and Fiji, Vaa3D, napari) reads:
``<name>_image.tif`` and ``<name>_label.tif`` (ImageJ TIFFs with the voxel size) and ``<name>_gold.swc``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neurorefiner.io.stacks import write_volume
from neurorefiner.io.swc import write_swc
from neurorefiner.synth.params import SynthParams


def write_rendering(folder: Path, name: str, params: SynthParams | str | dict, seed: int) -> dict[str, Any]:
    """Render ``params`` with ``seed`` and write its files atomically; returns the rendering's info."""
    from neurorefiner.synth.render import render

    r = render(params, seed)
    folder.mkdir(parents=True, exist_ok=True)
    write_volume(folder / f"{name}_image.tif", r.image, r.spacing)
    write_volume(folder / f"{name}_label.tif", r.label, r.spacing)
    write_swc(folder / f"{name}_gold.swc", r.gold)
    return r.info
