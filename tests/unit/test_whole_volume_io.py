"""The whole-volume engine's pieces that need no cluster: the OME-Zarr round trip (what napari's ome-zarr reader
sees: NGFF 0.4 on Zarr v2, a pyramid, the spacing), the tile plan's alignments, the border guard, and bad
input to ``refine.py executor=dask`` refused with one line naming the file before any cluster starts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neurorefiner.agents.roles import CallInfo, Defect, Flag, GlobalView, Inspection
from neurorefiner.errors import InputError
from neurorefiner.io.ome_zarr import (
    create_mask_store,
    finish_pyramid,
    open_ome_zarr,
    write_ome_zarr_volume,
    write_region,
)
from neurorefiner.refine.whole_volume.guard import BorderGuard, continuing_face_points
from neurorefiner.refine.whole_volume.tiles import Occupancy, check_plan, chunk_boxes, occupied, plan_tiles
from neurorefiner.topology.blocks import grid_blocks


def test_ome_zarr_round_trip_with_pyramid(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 4000, (20, 300, 280)).astype(np.uint16)
    write_ome_zarr_volume(tmp_path / "img.ome.zarr", image, (2.0, 0.5, 0.5), (8, 128, 128))
    source, spacing = open_ome_zarr(tmp_path / "img.ome.zarr")
    assert spacing == (2.0, 0.5, 0.5) and source.shape == image.shape
    np.testing.assert_array_equal(source[...], image)
    np.testing.assert_array_equal(source.read((slice(3, 9), slice(100, 200), slice(7, 8))), image[3:9, 100:200, 7:8])

    mask = rng.random(image.shape) > 0.999
    level0 = create_mask_store(tmp_path / "out.ome.zarr", mask.shape, (8, 128, 128))
    write_region(level0, (slice(0, 20), slice(0, 300), slice(0, 280)), mask)
    levels = finish_pyramid(tmp_path / "out.ome.zarr", (2.0, 0.5, 0.5), min_side=64)
    assert levels == 4 and (tmp_path / "out.ome.zarr" / ".zattrs").exists()  # Zarr v2: what Fiji's readers read

    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader

    node = next(iter(Reader(parse_url(str(tmp_path / "out.ome.zarr")))()))  # napari-ome-zarr's own reader
    pyramid = node.data
    assert [tuple(p.shape) for p in pyramid] == [(20, 300, 280), (20, 150, 140), (20, 75, 70), (10, 38, 35)]
    np.testing.assert_array_equal(np.asarray(pyramid[0]) > 0, mask)
    # z is halved only once x and y are as coarse (2 um); every level is the max of the one before, so a
    # one-voxel neurite stays visible zoomed out
    assert (np.asarray(pyramid[1]) > 0).sum() == (mask.reshape(20, 150, 2, 140, 2).any(axis=(2, 4))).sum()
    scales = [t[0]["scale"] for t in node.metadata["coordinateTransformations"]]
    assert scales == [[2.0, 0.5, 0.5], [2.0, 1.0, 1.0], [2.0, 2.0, 2.0], [4.0, 4.0, 4.0]]
    assert [a["name"] for a in node.metadata["axes"]] == ["z", "y", "x"]


def test_not_ome_zarr_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="plain: not a Zarr store"):
        open_ome_zarr(tmp_path / "plain")
    import zarr

    zarr.open_group(str(tmp_path / "group.zarr"), mode="w")
    with pytest.raises(InputError, match="group.zarr: .*multiscales"):
        open_ome_zarr(tmp_path / "group.zarr")
    with pytest.raises(InputError, match="missing.ome.zarr: file not found"):
        open_ome_zarr(tmp_path / "missing.ome.zarr")


def test_tiles_cover_the_volume_once_and_align_to_blocks() -> None:
    shape = (40, 300, 520)
    tile, halo, _ = check_plan((32, 128, 256), (8, 64, 128), (16, 64, 128), block_size=64, block_depth=None)
    tiles = plan_tiles(shape, tile, halo, (1, 64, 64))
    cover = np.zeros(shape, np.int32)
    for t in tiles:
        cover[t.interior] += 1
        assert all(r.start <= i.start and i.stop <= r.stop for i, r in zip(t.interior, t.region))
        # a border tile's region is pushed inward, not cut: every task reads about as much (flat memory)
        for axis, want in ((1, 128 + 2 * 64), (2, 256 + 2 * 128)):
            assert want <= t.region[axis].stop - t.region[axis].start < want + 64
        # the loop's blocks over the region are the volume's blocks there (same grid)
        for b in grid_blocks([s.stop - s.start for s in t.region], 64):
            assert all((b.slices[a].start + t.region[a].start) % 64 == 0 for a in (1, 2))
    assert (cover == 1).all()
    with pytest.raises(InputError, match="multiple of executor.chunks"):
        check_plan((32, 128, 256), (8, 64, 128), (32, 96, 128), block_size=64, block_depth=None)
    with pytest.raises(InputError, match="loop.block_size=64"):
        check_plan((32, 128, 256), (8, 32, 128), (16, 64, 128), block_size=64, block_depth=None)


def test_the_plan_skips_exactly_the_tiles_whose_region_holds_no_foreground() -> None:
    """Each chunk's foreground box, taken in the run's chunked pass over the mask, decides which tiles are
    scheduled: on masks of a few voxels or short runs (a box is then its foreground) the tiles kept are exactly
    those whose region (tile + halo) holds foreground, over chunks that do not align with the regions."""
    import dask.array as da

    rng = np.random.default_rng(0)
    shape = (96, 700, 900)
    tiles = plan_tiles(shape, (32, 128, 256), (8, 64, 128), (1, 64, 64))
    seen = set()
    for _ in range(12):
        mask = np.zeros(shape, bool)
        for _ in range(int(rng.integers(0, 4))):
            z, y, x = (int(rng.integers(0, n)) for n in shape)
            mask[z, y, x: x + int(rng.integers(1, 40))] = True
        dmask = da.from_array(mask, chunks=(16, 96, 160))
        occupancy = Occupancy.of(chunk_boxes(dmask).compute(), dmask.chunks)
        keep, skip = occupied(tiles, occupancy)
        assert [t.id for t in keep] == [t.id for t in tiles if mask[t.region].any()]
        assert sorted(t.id for t in keep + skip) == [t.id for t in tiles]
        seen.add(len(keep))
    assert 0 in seen and len(seen) > 2   # empty masks skip everything; the others some tiles
    # a box is conservative, never wrong: foreground at two corners of one chunk keeps what lies between
    mask = np.zeros(shape, bool)
    mask[0, 0, 0] = mask[15, 95, 159] = True
    dmask = da.from_array(mask, chunks=(16, 96, 160))
    occupancy = Occupancy.of(chunk_boxes(dmask).compute(), dmask.chunks)
    assert occupancy.touches((slice(5, 6), slice(50, 51), slice(80, 81)))
    assert not occupancy.touches((slice(16, 96), slice(0, 700), slice(0, 900)))


class _Flags:
    """An inspector that calls every piece noise."""

    name = "scripted"

    def inspect(self, view: GlobalView) -> Inspection:
        from neurorefiner.topology.components import label_components

        labels, n = label_components(view.mask)
        defects = tuple(Defect("FP", (tuple(int(v) for v in np.argwhere(labels == i)[0]),), 1) for i in range(1, n + 1))
        return Inspection({0: Flag(0, "FP", defects)}, CallInfo("scripted"))


def test_guard_keeps_pieces_that_continue_past_the_region() -> None:
    volume = np.zeros((8, 32, 64), bool)
    volume[4, 10, 20:50] = True     # a fibre crossing x = 32, the region's cut face
    volume[4, 25, 5:8] = True       # a speck inside the region
    volume[2, 2, 40] = True         # something outside the region only
    region = (slice(0, 8), slice(0, 32), slice(0, 32))
    faces = continuing_face_points(region, volume.shape, lambda sl: volume[sl])
    view = GlobalView(0, np.zeros((8, 32, 32), np.float32), volume[region], grid_blocks((8, 32, 32), 32))
    kept = BorderGuard(_Flags(), faces).inspect(view)
    anchors = [d.anchors[0] for f in kept.flags.values() for d in f.defects]
    assert anchors == [(4, 25, 5)], anchors  # the speck may go, the fibre's end may not
    assert "continues past" in " ".join(kept.info.notes)
    whole = (slice(0, 8), slice(0, 32), slice(0, 64))   # one tile = the volume: nothing is held back
    view = GlobalView(0, np.zeros(volume.shape, np.float32), volume, grid_blocks(volume.shape, 32))
    assert len(continuing_face_points(whole, volume.shape, lambda sl: volume[sl])) == 0
    assert len(BorderGuard(_Flags(), np.zeros((0, 3))).inspect(view).flags[0].defects) == 3


def test_the_soma_goes_to_the_tiles_whose_region_holds_it() -> None:
    """executor=dask grows the piece at the soma in the tile that holds it (region coordinates, halo
    included), as the in-memory run does; other tiles, which meet the neuron through their faces, grow their
    largest piece. Before, no tile was told the soma."""
    from neurorefiner.refine.whole_volume.task import tile_root

    region = (slice(0, 32), slice(64, 192), slice(128, 256))
    assert tile_root(None, region) is None
    assert tile_root((5.0, 70.0, 130.5), region) == (5.0, 6.0, 2.5)
    assert tile_root((5.0, 40.0, 130.0), region) is None
    assert tile_root((5.0, 192.0, 130.0), region) is None   # stop is outside
