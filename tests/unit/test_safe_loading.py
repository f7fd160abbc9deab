"""A checkpoint from elsewhere must not run code: every loader reads with ``weights_only=True`` and refuses a
pickle that names a callable, with a clear error, before anything in it has run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neurorefiner.errors import InputError


class _Payload:
    """Unpickling this calls ``Path.touch(marker)``: a stand-in for ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


@pytest.fixture()
def evil_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "code_ran"
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"net_config": _Payload(marker)}}, path)
    assert not marker.exists()
    return path, marker


def test_plain_torch_load_would_run_it(evil_checkpoint: tuple[Path, Path]) -> None:
    """The fixture is a real threat: the unsafe reader runs the payload."""
    path, marker = evil_checkpoint
    torch.load(path, weights_only=False)
    assert marker.exists()


def test_load_checkpoint_refuses_and_runs_nothing(evil_checkpoint: tuple[Path, Path]) -> None:
    from neurorefiner.io.checkpoints import load_checkpoint

    path, marker = evil_checkpoint
    with pytest.raises(InputError, match="refused to load"):
        load_checkpoint(path)
    assert not marker.exists()


def test_editor_refuses_it(evil_checkpoint: tuple[Path, Path]) -> None:
    from neurorefiner.inference.refiner import TopoRefiner

    path, marker = evil_checkpoint
    with pytest.raises(InputError, match="evil.ckpt: refused"):
        TopoRefiner.load(path)
    assert not marker.exists()


def test_segmenter_loader_refuses_it(evil_checkpoint: tuple[Path, Path]) -> None:
    from neurorefiner.inference.segmenter import load_segmenter

    path, marker = evil_checkpoint
    with pytest.raises(InputError, match="refused"):
        load_segmenter(path)
    assert not marker.exists()


def test_stage_two_init_refuses_it(evil_checkpoint: tuple[Path, Path]) -> None:
    from neurorefiner.training.refiner import load_net_weights

    path, marker = evil_checkpoint
    with pytest.raises(InputError, match="refused"):
        load_net_weights(torch.nn.Linear(1, 1), path)
    assert not marker.exists()


def test_cli_edit_refuses_it_with_one_line(evil_checkpoint: tuple[Path, Path], tmp_path: Path) -> None:
    import numpy as np
    from typer.testing import CliRunner

    from neurorefiner.cli.main import app
    from neurorefiner.io import write_volume

    path, marker = evil_checkpoint
    write_volume(tmp_path / "img.tif", np.zeros((8, 16, 16), np.uint8))
    write_volume(tmp_path / "mask.tif", np.zeros((8, 16, 16), bool))
    result = CliRunner().invoke(app, ["edit", str(tmp_path / "img.tif"), str(tmp_path / "mask.tif"),
                                      "--instruction", "Repair break at center-center-center",
                                      "--out", str(tmp_path / "out.tif"), "--checkpoint", str(path)])
    assert result.exit_code == 2
    assert "refused" in result.output
    assert not marker.exists()
    assert not (tmp_path / "out.tif").exists()


def test_a_file_that_is_no_checkpoint_is_called_so(evil_checkpoint: tuple[Path, Path], tmp_path: Path) -> None:
    """Random bytes used to be "refused ... it holds Python objects beyond tensors" with torch's text cut
    mid-sentence; a refused pickle keeps torch's line naming what it blocked, whole."""
    from neurorefiner.io.checkpoints import load_checkpoint

    (tmp_path / "random.ckpt").write_bytes(bytes(range(256)) * 16)
    (tmp_path / "empty.ckpt").write_bytes(b"")
    with pytest.raises(InputError, match=r"random.ckpt: not a PyTorch checkpoint: torch.save writes") as exc:
        load_checkpoint(tmp_path / "random.ckpt")
    assert "Python objects" not in str(exc.value)
    with pytest.raises(InputError, match="empty.ckpt: not a PyTorch checkpoint: the file is empty"):
        load_checkpoint(tmp_path / "empty.ckpt")
    with pytest.raises(InputError, match=r"when read \([^()]*GLOBAL [^()]*\)\. Only"):
        load_checkpoint(evil_checkpoint[0])
