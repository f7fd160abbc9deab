"""scripts/weights_only.py keeps what init_from and the editor read and drops the optimiser."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "weights_only.py"


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("weights_only", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_copy_keeps_weights_and_drops_the_optimiser(tmp_path: Path) -> None:
    src, dst = tmp_path / "last.ckpt", tmp_path / "w.ckpt"
    torch.save({"state_dict": {"net.w": torch.ones(2)}, "hyper_parameters": {"net_config": {"a": 1}},
                "global_step": 2394, "epoch": 3, "optimizer_states": [{"big": torch.zeros(10)}],
                "loops": {"x": 1}}, src)
    assert _module().weights_only(src, dst) == 2394
    out = torch.load(dst, weights_only=False)
    assert set(out) == {"state_dict", "hyper_parameters", "global_step", "epoch"}
    assert torch.equal(out["state_dict"]["net.w"], torch.ones(2))


def test_not_a_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    src = tmp_path / "x.ckpt"
    torch.save([1, 2], src)
    with pytest.raises(SystemExit, match="not a Lightning checkpoint"):
        _module().weights_only(src, tmp_path / "y.ckpt")
    assert not (tmp_path / "y.ckpt").exists()
