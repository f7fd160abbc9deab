"""experiments/segmenters/archive_shipped.py keeps only the shipped U-Net's rows, under the round's tag."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "segmenters" / "archive_shipped.py"
spec = importlib.util.spec_from_file_location("archive_shipped", SCRIPT)
arch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arch)


def test_only_the_shipped_unet_rows_are_kept_and_renamed():
    rows = [{"method": "naive floor: Otsu -> APP2", "case": "OP_7"},
            {"method": "unet3d (threshold 0.8, dust 0, keep largest 1) -> APP2", "case": "OP_7"},
            {"method": "unet3d:r2 (threshold 0.6 only, no component filter) -> APP2", "case": "OP_7"},
            {"method": "unet3d (threshold 0.8 only, no component filter) -> APP2", "case": "OP_8"}]
    got = arch.renamed_rows(rows, "r4")
    assert [r["method"] for r in got] == ["unet3d:r4 (threshold 0.8, dust 0, keep largest 1) -> APP2",
                                         "unet3d:r4 (threshold 0.8 only, no component filter) -> APP2"]
    assert [r["case"] for r in got] == ["OP_7", "OP_8"]
