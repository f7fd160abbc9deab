"""``neurorefiner edit`` with the shipped editor mends a cut it is told about: one ball (radius 4.5
voxels) cut through the real DIADEM OP_1 gold neurite near one of its tips, centred in a 32 x 64 x 64 block, and
``Repair break at center-center-center`` on that block. The cut leaves a 34-voxel stub the decoding's shape test
took for a blob of noise ("nothing to connect: one component at the named place", 0 voxels changed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.defects import betti0
from neurorefiner.io import read_mask, read_swc, read_volume, write_volume

OP_1 = Path(__file__).resolve().parents[2] / "data" / "diadem_op" / "OP_1"
CENTRE = (34, 168, 372)                        # on the gold, 8 voxels from a tip
CROP = (slice(0, 60), slice(120, 216), slice(324, 420))   # the stack around the block (a lighter test)
SPACING = (1.0, 0.33, 0.33)


def cut_gold(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """The image and the gold mask with the ball cut, both cropped to CROP, written as TIFFs."""
    image = np.asarray(read_volume(OP_1.with_suffix(".tif")).load())
    gold = read_swc(OP_1.with_suffix(".swc")).rasterize(image.shape, spacing=SPACING, strict=False)
    z, y, x = np.ogrid[tuple(slice(-c, n - c) for c, n in zip(CENTRE, image.shape, strict=True))]
    cut = gold & ((z ** 2 + y ** 2 + x ** 2) > 4.5 ** 2)
    write_volume(tmp_path / "image.tif", image[CROP], spacing=SPACING)
    write_volume(tmp_path / "cut.tif", cut[CROP], spacing=SPACING)
    return tmp_path / "image.tif", tmp_path / "cut.tif", cut[CROP]


def test_edit_repairs_a_ball_cut_through_a_real_gold_neurite(tmp_path: Path) -> None:
    image, mask, cut = cut_gold(tmp_path)
    centre = [c - s.start for c, s in zip(CENTRE, CROP, strict=True)]
    block = tuple(slice(c - h, c + h) for c, h in zip(centre, (16, 32, 32), strict=True))
    assert betti0(cut) == 2 and betti0(cut[block]) == 2
    text = ",".join(f"{s.start}:{s.stop}" for s in block)
    out = tmp_path / "out.tif"
    res = CliRunner().invoke(app, ["edit", str(image), str(mask), "--instruction",
                                   "Repair break at center-center-center", "--block", text, "--out", str(out)])
    assert res.exit_code == 0, res.output
    mended = np.asarray(read_mask(out).load(), dtype=bool)
    assert betti0(mended[block]) == 1 and betti0(mended) == 1, res.output
    assert not (cut & ~mended).any() and "one component" not in res.output
