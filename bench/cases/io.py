"""I/O and rasterisation speed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from bench.core import Case
from neurorefiner.paths import data_dir


def _diadem():
    from neurorefiner.io import read_swc, read_volume

    root = data_dir() / "diadem_op"
    return read_volume(root / "OP_1.tif"), read_swc(root / "OP_1.swc")


def _tmp_tiff_roundtrip(arg):
    from neurorefiner.io import read_volume, write_volume

    vol, _ = arg
    with tempfile.TemporaryDirectory() as d:
        write_volume(Path(d) / "x.tif", vol)
        read_volume(Path(d) / "x.tif")


def _raw_numpy_copy(arg):
    vol, _ = arg
    np.array(vol.array, copy=True)


CASES = [
    Case("io/tiff_roundtrip_OP_1", _diadem, _tmp_tiff_roundtrip, reference=_raw_numpy_copy,
         reference_name="in-memory copy", repeats=3),
    Case("io/rasterize_OP_1_gold", _diadem,
         lambda a: a[1].rasterize(a[0].shape, (1.0, 0.33, 0.33), radius=1.5), repeats=3, budget_s=1.0),
]
