"""A whole-volume run's folder opens in napari view only: lazy image and initial mask from the run's OME-Zarr
inputs, the refined mask's whole pyramid, the merged skeleton in voxels; `neurorefiner review` says how."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.errors import InputError
from neurorefiner.io.ome_zarr import create_mask_store, finish_pyramid, write_ome_zarr_volume, write_region
from neurorefiner.io.swc import Tree, write_swc

SPACING = (2.0, 0.5, 0.5)


def _dask_folder(tmp_path: Path) -> Path:
    """What refine.py executor=dask leaves: trace header naming the inputs, the pyramid, the merged SWC."""
    rng = np.random.default_rng(0)
    image = rng.random((8, 64, 96)).astype(np.float32)
    mask = np.zeros(image.shape, bool)
    mask[4, 30:33, 10:80] = True
    write_ome_zarr_volume(tmp_path / "image.ome.zarr", image, SPACING, chunks=(8, 32, 32))
    write_ome_zarr_volume(tmp_path / "mask.ome.zarr", mask, SPACING, chunks=(8, 32, 32))
    out = tmp_path / "run"
    out.mkdir()
    level0 = create_mask_store(out / "refined_mask.ome.zarr", image.shape, (8, 32, 32))
    write_region(level0, (slice(0, 8), slice(0, 64), slice(0, 96)), mask)
    finish_pyramid(out / "refined_mask.ome.zarr", SPACING, min_side=16)
    header = {"type": "run", "engine": "dask", "inputs": {"image": str(tmp_path / "image.ome.zarr"),
                                                          "mask": str(tmp_path / "mask.ome.zarr")}}
    (out / "trace.jsonl").write_text(json.dumps(header) + "\n")
    zyx = np.array([[4, 31, x] for x in (10, 40, 79)], float) * SPACING   # um, as the run writes it
    write_swc(out / "refined_skeleton.swc", Tree.from_points(zyx, np.array([-1, 0, 1]), 0.5))
    return out


def test_a_dask_folder_opens_lazily_with_its_pyramid_and_skeleton(tmp_path):
    import dask.array as da

    from neurorefiner.review.napari_reader import get_reader

    out = _dask_folder(tmp_path)
    layers = get_reader(str(out))(str(out))
    by_name = {kw["name"]: (data, kw, kind) for data, kw, kind in layers}
    assert list(by_name) == ["image", "initial mask", "refined mask", "skeleton (refined, tiles joined)"]
    assert isinstance(by_name["image"][0], da.Array) and by_name["image"][1]["scale"] == SPACING
    pyramid = by_name["refined mask"][0]
    assert by_name["refined mask"][1]["multiscale"] and len(pyramid) >= 2
    assert pyramid[0].shape == (8, 64, 96) and pyramid[1].shape[-1] < 96
    assert int(pyramid[0].sum().compute()) == 3 * 70 and set(np.unique(pyramid[-1].compute())) == {0, 1}
    vectors = by_name["skeleton (refined, tiles joined)"][0]
    assert vectors.shape == (2, 2, 3) and np.allclose(vectors[0, 0], [4, 31, 10])   # back in voxels
    assert np.allclose(vectors[:, 1].sum(axis=0), [0, 0, 69])


def test_the_review_command_points_to_the_view(tmp_path):
    from neurorefiner.review.folder import open_folder

    out = _dask_folder(tmp_path)
    with pytest.raises(InputError, match=f"`napari {out}` opens this one to look at"):
        open_folder(out)


def test_an_unfinished_pyramid_is_one_clear_error(tmp_path):
    from neurorefiner.review.whole_volume_layers import refined_pyramid

    create_mask_store(tmp_path / "refined_mask.ome.zarr", (4, 8, 8), (4, 8, 8))   # level 0, no metadata yet
    with pytest.raises(InputError, match="not a finished refined mask"):
        refined_pyramid(tmp_path / "refined_mask.ome.zarr")


def test_napari_takes_the_layers_as_they_are(tmp_path):
    """The tuples go into a napari viewer model (no Qt needed): the refined mask becomes a multiscale layer and
    every layer spans the same um."""
    pytest.importorskip("napari", reason="the viewer extra is not installed (pip install -e '.[viewer]')")
    from napari.components import ViewerModel

    from neurorefiner.review.whole_volume_layers import whole_volume_layers

    viewer = ViewerModel()
    layers = whole_volume_layers(_dask_folder(tmp_path))
    added = [getattr(viewer, f"add_{kind}")(data, **kw) for data, kw, kind in layers]
    assert [layer.multiscale for layer in added[:3]] == [False, False, True]
    assert all(np.allclose(layer.extent.world[1], added[0].extent.world[1]) for layer in added[:3])
