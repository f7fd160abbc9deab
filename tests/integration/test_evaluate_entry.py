"""`python evaluate.py` end to end: masks -> APP2 -> metrics -> per-volume CSV and the paper-style table."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


@pytest.mark.slow
def test_evaluate_gold_masks_score_perfectly(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=diadem", "split=dev",
                          "methods=[gold_mask]", "limit=1", "protocols=[full_volume]", f"out_dir={out}",
                          f"hydra.run.dir={tmp_path / 'h'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = list(csv.DictReader(open(out / "per_volume.csv")))
    assert [r["case"] for r in rows] == ["OP_1"]
    assert float(rows[0]["F1"]) > 0.99 and float(rows[0]["SD"]) < 1.5
    table = (out / "table.md").read_text()
    assert "real data" in table and "| gold_mask (full_volume) | 1 |" in table


def test_evaluate_absent_dataset_is_one_clear_line(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=zbfwb",
                          f"dataset.root={tmp_path / 'nothing'}", f"hydra.run.dir={tmp_path / 'h'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert "zbfwb dataset is not here" in run.stderr and "Traceback" not in run.stderr


def test_evaluate_absent_dataset_names_its_stand_in_and_the_data_readme(tmp_path: Path) -> None:
    """`python evaluate.py dataset=zbfwb` is what a user types first; without the data it says what to run."""
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=zbfwb", f"paths.log_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NEUROREFINER_DATA": str(tmp_path / "data")})
    err = run.stderr.strip()
    assert run.returncode == 2 and len(err.splitlines()) == 1, err
    assert "dataset=synthetic_zbfwb" in err and "data/README.md" in err


@pytest.mark.parametrize(("name", "subset", "stand_in"), [
    ("zbfwb", None, "synthetic_zbfwb"), ("bigneuron", None, "synthetic_bigneuron"),
    ("cwmbs", "weak", "synthetic_cwmbs_weak"), ("cwmbs", "noise", "synthetic_cwmbs_noise"),
])
def test_every_published_dataset_names_its_stand_in(tmp_path: Path, name: str, subset: str | None,
                                                    stand_in: str) -> None:
    from neurorefiner.data.published import PublishedDataset
    from neurorefiner.errors import InputError

    with pytest.raises(InputError) as exc:
        PublishedDataset(name, tmp_path / name, subset).cases("test")
    assert f"dataset={stand_in} " in str(exc.value) and "data/README.md" in str(exc.value)
    assert (CONF / "dataset" / f"{stand_in}.yaml").is_file()


def _fake_published(root: Path, with_gold: bool = True) -> Path:
    import numpy as np
    import tifffile

    (root / "images").mkdir(parents=True)
    (root / "swc").mkdir()
    tifffile.imwrite(root / "images" / "c1.tif", np.zeros((8, 16, 16), np.uint8))
    if with_gold:
        (root / "swc" / "c1.swc").write_text("1 2 8 8 4 1 -1\n2 2 9 8 4 1 1\n")
    return root


def test_data_without_a_shipped_segmenter_names_the_line_that_trains_it(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from neurorefiner.inference.init_masks import shipped_checkpoint
    from neurorefiner.training.shipping import shipped_path

    root = _fake_published(tmp_path / "cwmbs" / "noise")
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=cwmbs", "dataset.subset=noise",
                          f"dataset.root={tmp_path / 'cwmbs'}", f"paths.log_dir={tmp_path / 'logs'}"],
                         capture_output=True, text=True, timeout=300)
    err = run.stderr.strip()
    assert run.returncode == 2 and len(err.splitlines()) == 1, err
    line = err.split("train and ship one with: ")[1].split("; or give")[0]
    assert line.startswith("python train.py ") and "dataset.subset=noise" in line and root.exists()
    overrides = [w.strip("'") for w in line.split()[2:]]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="train", overrides=overrides)
    assert cfg.task == "segment" and cfg.dataset.subset == "noise" and cfg.ship is True
    assert shipped_path(cfg, Path(cfg.segmentation.export_path)) == shipped_checkpoint("unet3d", "cwmbs", "noise")


def test_a_case_without_gold_is_one_line(tmp_path: Path) -> None:
    _fake_published(tmp_path / "zbfwb", with_gold=False)
    run = subprocess.run([sys.executable, str(ROOT / "evaluate.py"), "dataset=zbfwb", "methods=[gold_mask]",
                          f"dataset.root={tmp_path / 'zbfwb'}", f"paths.log_dir={tmp_path / 'logs'}"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and "has no gold SWC" in run.stderr and "Traceback" not in run.stderr
