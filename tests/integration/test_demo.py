"""make demo: a real DIADEM test crop, the shipped U-Net's mask, refined by the learned agents and the
shipped editor; the before/after table and the output paths are printed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neurorefiner.cli.demo import crop_tree


def test_crop_tree_keeps_the_nodes_inside_shifted_to_the_crop() -> None:
    from neurorefiner.io.swc import Tree

    tree = Tree.from_points(np.array([[1.0, 5.0, 5.0], [1.0, 5.0, 15.0], [1.0, 5.0, 25.0]]), np.array([-1, 0, 1]))
    cropped = crop_tree(tree, (slice(None), slice(0, 10), slice(10, 30)), (4, 10, 40))
    assert len(cropped) == 2
    assert sorted(cropped.zyx[:, 2].tolist()) == [5.0, 15.0]
    assert len(cropped.roots()) == 1


def test_the_table_names_the_agents_the_demo_ran(tmp_path: Path) -> None:
    """The printed table said "heuristic agents" while the demo ran refine.py's default, the learned ones."""
    from neurorefiner.cli.demo import method_label, refine_cfg

    cfg = refine_cfg(tmp_path / "i.tif", tmp_path / "m.tif", tmp_path / "o", (1.0, 1.0, 1.0))
    assert cfg.agent.backend == "learned" and method_label(cfg) == "NeuroRefiner (learned agents)"
    cfg = refine_cfg(tmp_path / "i.tif", tmp_path / "m.tif", tmp_path / "o", (1.0, 1.0, 1.0), extra=["agent=heuristic"])
    assert method_label(cfg) == "NeuroRefiner (heuristic agents)"


def test_a_demo_rerun_replaces_an_older_run_in_its_folder(tmp_path: Path) -> None:
    """`make demo` on a machine whose outputs/demo holds an older run (other inputs: another crop, U-Net or
    code) refines into it instead of being refused; the demo's refine config with a scripted editor."""
    from neurorefiner.cli.demo import refine_cfg
    from neurorefiner.io import read_mask, read_volume
    from neurorefiner.refine.local import refine_volume
    from tests.integration.test_refine_loop import synthetic
    from tests.integration.test_refine_output_folder import FAKE, refine_here

    older, newer, out = tmp_path / "older", tmp_path / "newer", tmp_path / "demo"
    older.mkdir()
    newer.mkdir()
    image_a, mask_a = synthetic(older, n_blocks=1)
    refine_here([f"image={image_a}", f"mask={mask_a}", f"out={out}", *FAKE])
    image_b, mask_b = synthetic(newer, n_blocks=2)
    cfg = refine_cfg(image_b, mask_b, out, (1.0, 0.5, 0.5), extra=FAKE)
    refine_volume(read_volume(image_b), read_mask(mask_b), cfg)
    assert read_volume(out / "refined_mask.tif").shape == (32, 64, 128)
    assert (out / "trace.jsonl").read_text().count('"type":"run"') == 1


@pytest.mark.slow
def test_demo_on_a_small_crop_prints_the_table_and_the_paths(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from neurorefiner.cli.demo import main

    assert main(out_dir=tmp_path, crop=(slice(0, 32), slice(300, 372), slice(56, 184))) == 0
    out = capsys.readouterr().out
    assert "3D U-Net (initial)" in out and "NeuroRefiner (learned agents)" in out and "F1" in out
    for name in ("refined_mask.tif", "refined_mask_root_seeded.swc", "report.html", "trace.jsonl"):
        assert (tmp_path / name).exists(), name
        assert str(tmp_path / name) in out
