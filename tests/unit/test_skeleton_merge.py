"""The whole-volume run's one SWC: tile skeletons joined across tile borders, and nowhere else."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.io.swc import Tree, read_swc, write_swc
from neurorefiner.refine.whole_volume.skeleton_merge import merge_tile_skeletons


def _line(path: Path, xs: list[float], y: float = 10.0, z: float = 5.0) -> Path:
    """A straight piece along x as one SWC (um)."""
    zyx = np.array([[z, y, x] for x in xs], float)
    return write_swc(path, Tree.from_points(zyx, np.arange(len(xs)) - 1, 1.0))


def test_a_neurite_cut_by_a_tile_border_becomes_one_piece(tmp_path: Path) -> None:
    left = _line(tmp_path / "tile_00000.swc", [0.0, 10.0, 20.0, 31.0])     # tile x < 32 um, ends at its face
    right = _line(tmp_path / "tile_00001.swc", [32.0, 45.0, 60.0])          # the next tile starts one voxel on
    tree, counts = merge_tile_skeletons([left, right], spacing=(1.0, 1.0, 1.0))
    assert counts == {"nodes": 7, "pieces in tiles": 2, "border joins": 1, "pieces": 1}
    assert len(tree.roots()) == 1 and len(tree) == 7
    assert np.isclose(tree.total_length(), 60.0)


def test_a_gap_inside_one_tile_stays_open(tmp_path: Path) -> None:
    """Two pieces of the same tile 1 um apart are a break the refiner left: the file must show it, not close it."""
    tile = tmp_path / "tile_00000.swc"
    zyx = np.array([[5, 10, x] for x in (0.0, 10.0, 20.0, 21.0, 30.0)], float)
    write_swc(tile, Tree.from_points(zyx, np.array([-1, 0, 1, -1, 3]), 1.0))
    far = _line(tmp_path / "tile_00001.swc", [80.0, 90.0])                 # another tile, nowhere near
    tree, counts = merge_tile_skeletons([tile, far], spacing=(2.0, 1.0, 1.0))
    assert counts["border joins"] == 0 and counts["pieces"] == 3 and len(tree.roots()) == 3


def test_each_end_joins_at_most_one_other_tile_and_the_file_reads_back(tmp_path: Path) -> None:
    """Three tiles' ends meet near one corner: the closest pair is joined, the third end stays an end rather than
    making a node with two extra parents."""
    a = _line(tmp_path / "tile_00000.swc", [0.0, 31.0])
    b = _line(tmp_path / "tile_00001.swc", [31.5, 50.0])
    c = _line(tmp_path / "tile_00002.swc", [32.5, 70.0], y=10.5)
    tree, counts = merge_tile_skeletons([a, b, c], spacing=(1.0, 1.0, 1.0))
    assert counts["border joins"] == 1 and counts["pieces"] == 2
    out = write_swc(tmp_path / "merged.swc", tree)
    again = read_swc(out)                           # validated: ids, parents, no cycles
    assert len(again) == 6 and (again.parent_index < np.arange(len(again))).all()


def test_empty_tiles_give_an_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "tile_00000.swc"
    empty.write_text("# kimimaro skeleton of an empty tile\n")
    tree, counts = merge_tile_skeletons([empty], spacing=(1.0, 1.0, 1.0))
    assert len(tree) == 0 and counts["pieces"] == 0
