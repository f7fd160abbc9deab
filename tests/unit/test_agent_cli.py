"""``neurorefiner inspect``: the Inspector's verdict per block, nothing edited."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.io import write_volume

runner = CliRunner()


def test_inspect_names_the_broken_block_and_the_speck(tmp_path: Path) -> None:
    m = np.zeros((16, 64, 64), bool)
    m[7:10, 40:43, 2:28] = True
    m[7:10, 40:43, 33:62] = True
    m[3:5, 5:7, 50:52] = True
    img = np.where(m, 200, 10).astype(np.uint8)
    img[7:10, 40:43, 28:33] = 200
    write_volume(tmp_path / "img.tif", img)
    write_volume(tmp_path / "msk.tif", m)
    result = runner.invoke(app, ["inspect", str(tmp_path / "img.tif"), str(tmp_path / "msk.tif"),
                                 "--block-size", "32", "--all", "--agent", "heuristic"])
    assert result.exit_code == 0, result.output
    assert "block   3" in result.output and "FN" in result.output     # the gap at y 40, x 28-33
    assert "block   1" in result.output and "speck of 8 voxels" in result.output
    assert "2 of 4 blocks flagged" in result.output


def test_inspect_empty_and_mismatched(tmp_path: Path) -> None:
    write_volume(tmp_path / "img.tif", np.zeros((4, 8, 8), np.uint8))
    write_volume(tmp_path / "msk.tif", np.zeros((4, 8, 8), bool))
    write_volume(tmp_path / "bad.tif", np.zeros((4, 8, 9), bool))
    result = runner.invoke(app, ["inspect", str(tmp_path / "img.tif"), str(tmp_path / "msk.tif")])
    assert result.exit_code == 0 and "empty mask" in result.output
    result = runner.invoke(app, ["inspect", str(tmp_path / "img.tif"), str(tmp_path / "bad.tif")])
    assert result.exit_code == 2 and "bad.tif" in result.output


def test_inspect_uses_the_learned_roles_by_default_as_refine_py(tmp_path: Path, monkeypatch) -> None:
    """`neurorefiner inspect` used the heuristic Inspector while refine.py runs the learned one by default."""
    import neurorefiner.refine.inspect as module
    from neurorefiner.paths import conf_dir

    used = []
    monkeypatch.setattr(module, "inspect_volume", lambda *a, agent, **k: used.append(agent) or [])
    write_volume(tmp_path / "img.tif", np.zeros((4, 8, 8), np.uint8))
    write_volume(tmp_path / "msk.tif", np.ones((4, 8, 8), bool))
    for extra in ([], ["--agent", "heuristic"]):
        result = runner.invoke(app, ["inspect", str(tmp_path / "img.tif"), str(tmp_path / "msk.tif"), *extra])
        assert result.exit_code == 0, result.output
    refine_default = [line for line in (conf_dir() / "refine.yaml").read_text().splitlines() if "- agent:" in line]
    assert used == ["learned", "heuristic"] and "agent: learned" in refine_default[0]
