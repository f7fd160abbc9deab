"""Dataset registry: real bundled datasets read; absent published datasets say what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from neurorefiner.data import available, get_dataset
from neurorefiner.errors import InputError


def test_builtin_datasets_registered() -> None:
    names = available()
    for name in ("diadem", "bigneuron_gold", "bigneuron", "cwmbs", "zbfwb"):
        assert name in names


def test_diadem_splits_hold_out_op7_to_op9() -> None:
    ds = get_dataset("diadem")
    assert [c.name for c in ds.cases("dev")] == [f"OP_{k}" for k in range(1, 7)]
    assert [c.name for c in ds.cases("test")] == ["OP_7", "OP_8", "OP_9"]
    assert all(c.split == "test" for c in ds.cases("test"))
    with pytest.raises(ValueError, match="splits"):
        ds.cases("train")


def test_bigneuron_gold_index() -> None:
    ds = get_dataset("bigneuron_gold")
    cases = ds.cases("all")
    assert len(cases) == 114
    pairs = ds.cases("with_app2")
    assert len(pairs) == 51 and all(c.info["app2"].exists() for c in pairs)
    first = cases[0]
    assert first.spacing == (0.38, 0.38, 0.38) and first.info["organism"] == "Fruitfly"
    assert len(first.gold()) == 912


@pytest.mark.parametrize("name", ["bigneuron", "cwmbs", "zbfwb"])
def test_absent_published_dataset_explains_layout(name: str, tmp_path: Path) -> None:
    ds = get_dataset(name, root=tmp_path / name)
    with pytest.raises(InputError, match="images/<case>.tif"):
        ds.cases("test")


def test_published_layout_is_read(tmp_path: Path) -> None:
    import json

    import numpy as np

    from neurorefiner.io import write_volume

    root = tmp_path / "zbfwb"
    (root / "images").mkdir(parents=True)
    (root / "swc").mkdir()
    for n in ("a", "b"):
        write_volume(root / "images" / f"{n}.tif", np.zeros((3, 4, 5), np.uint8))
        (root / "swc" / f"{n}.swc").write_text("1 1 1 1 1 1 -1\n")
    (root / "splits.json").write_text(json.dumps({"train": ["a"], "test": ["b"]}))
    cases = get_dataset("zbfwb", root=root).cases("test")
    assert [c.name for c in cases] == ["b"]
    assert cases[0].spacing == (1.0, 0.5, 0.5) and len(cases[0].gold()) == 1
