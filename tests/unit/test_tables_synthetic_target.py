"""`make tables-synthetic` rebuilds every SYNTHETIC Table 1-2 config there is: a new stand-in table cannot be left
out of the one command, and a removed one cannot linger in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_target_sweeps_every_synthetic_table_config() -> None:
    makefile = (ROOT / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if "evaluate.py -m experiment=" in x and "table_1_synthetic" in x)
    swept = set(re.search(r"experiment=([\w,]+)", line).group(1).split(","))
    configs = {p.stem for p in (ROOT / "conf" / "experiment").glob("table_[12]_synthetic_*.yaml")}
    assert swept == configs and len(configs) == 4


def test_the_target_sweeps_every_segmenter_the_tables_list() -> None:
    """The tables list rows on the U-Net's and the nnU-Net-style masks; one run covers one segmenter, so the
    target must sweep each, or the nnU-Net rows stay "not run"."""
    from omegaconf import OmegaConf

    makefile = (ROOT / "Makefile").read_text()
    line = next(x for x in makefile.splitlines() if "evaluate.py -m experiment=" in x and "table_1_synthetic" in x)
    match = re.search(r"segmenter=([\w,]+)", line)
    swept = set(match.group(1).split(",")) if match else set()
    listed = {row["segmenter"] for p in (ROOT / "conf" / "experiment").glob("table_[12]_synthetic_*.yaml")
              for row in OmegaConf.load(p).table.rows}
    assert listed == {"unet3d", "nnunet_style"} and swept == listed
