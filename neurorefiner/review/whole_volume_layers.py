"""A whole-volume run's folder (``refine.py executor=dask``) as napari layers, view only.

The review's decisions (accept/reject each edit, paint, save a reviewed mask) hold the image and both masks in
memory, which a whole brain does not fit; so a dask folder opens for looking, lazily: the image and the initial
mask are the run's OME-Zarr inputs (level 0, read chunk by chunk as napari draws), the refined mask is its
pyramid (``refined_mask.ome.zarr``, every level, so zooming out reads the coarse levels), and
``refined_skeleton.swc`` (the tiles' skeletons joined across tile borders) is drawn as line segments. Everything
is scaled to um. To decide on edits, refine a crop with ``executor=local`` and review that folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.ome_zarr import open_ome_zarr
from neurorefiner.io.swc import read_swc
from neurorefiner.refine.whole_volume.skeleton_merge import MERGED_SWC
from neurorefiner.review.folder import WHOLE_VOLUME, read_run_records, run_input_path
from neurorefiner.review.layers import labels_colours

LayerData = tuple[object, dict, str]


def is_whole_volume_folder(folder: str | Path) -> bool:
    """A dask run's folder: its pyramid is there and no in-memory ``refined_mask.tif``."""
    p = Path(folder)
    return (p / WHOLE_VOLUME).is_dir() and not (p / "refined_mask.tif").is_file()


def refined_pyramid(store: Path) -> list:
    """Every level of the refined mask's pyramid as lazy Dask arrays, finest first (napari's multiscale)."""
    import dask.array as da
    import zarr

    try:
        root = zarr.open_group(str(store), mode="r")
        datasets = dict(root.attrs)["multiscales"][0]["datasets"]
        return [da.from_zarr(root[d["path"]]) for d in datasets]
    except (KeyError, IndexError, FileNotFoundError) as exc:
        raise InputError(f"not a finished refined mask (no multiscales levels: {type(exc).__name__}); run the "
                         "same refine.py command again to finish it", store) from None


def skeleton_vectors(path: Path, spacing: tuple[float, float, float]) -> np.ndarray:
    """``refined_skeleton.swc`` (um) as napari vectors in ZYX voxels: (N, 2, 3) of (start, direction)."""
    tree = read_swc(path)
    if len(tree) == 0:
        return np.zeros((0, 2, 3))
    zyx = tree.zyx / np.asarray(spacing, float)
    pi = tree.parent_index
    child = np.nonzero(pi >= 0)[0]
    return np.stack([zyx[pi[child]], zyx[child] - zyx[pi[child]]], axis=1)


def whole_volume_layers(folder: str | Path) -> list[LayerData]:
    """The layers of a dask run's folder (see the module's doc); inputs that moved are an :class:`InputError`."""
    path = Path(folder)
    _, header = read_run_records(path)
    image, spacing = open_ome_zarr(run_input_path(path, header, "image", None))
    mask, _ = open_ome_zarr(run_input_path(path, header, "mask", None))
    scale = tuple(float(s) for s in spacing)
    layers: list[LayerData] = [
        (image.as_dask(), {"name": "image", "scale": scale, "colormap": "gray", "blending": "additive"}, "image"),
        ((mask.as_dask() != 0).astype(np.uint8), {"name": "initial mask", "scale": scale, "opacity": 0.35,
                                                  "visible": False, **labels_colours({1: "#ffd000"})}, "labels"),
        ([(level != 0).astype(np.uint8) for level in refined_pyramid(path / WHOLE_VOLUME)],
         {"name": "refined mask", "scale": scale, "opacity": 0.35, "multiscale": True,
          **labels_colours({1: "#3c8cff"})}, "labels"),
    ]
    if (path / MERGED_SWC).is_file():
        vectors = skeleton_vectors(path / MERGED_SWC, scale)
        if len(vectors):
            layers.append((vectors, {"name": "skeleton (refined, tiles joined)", "scale": scale,
                                     "edge_color": "orange", "edge_width": 0.6, "vector_style": "line"}, "vectors"))
    return layers
