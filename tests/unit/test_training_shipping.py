"""Training never overwrites shipped files and never unpickles: ``+stage=1`` writes under outputs/, shipping
is ``ship=true``, a resume reads ``last.ckpt`` weights-only, and a segmenter name cannot lead outside the
checkpoint and cache folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"


def _train_cfg(*overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="train", overrides=list(overrides))


def test_stage_1_as_the_readme_types_it_writes_under_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    from neurorefiner.training.refiner import output_checkpoint

    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    cfg = _train_cfg("+stage=1")
    out = output_checkpoint(cfg).resolve()
    assert (ROOT / "outputs").resolve() in out.parents
    assert out != (ROOT / "checkpoints" / "toporefinenet_stage1.ckpt").resolve()
    # stage 2 continues from the stage 1 just trained, not from the shipped one
    assert Path(_train_cfg("+stage=2").stages["2"].init_from).resolve() == out


def test_a_run_onto_a_shipped_checkpoint_is_refused_before_training(monkeypatch: pytest.MonkeyPatch) -> None:
    from neurorefiner.training.refiner import train_refiner

    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    cfg = _train_cfg("+stage=1", f"paths.checkpoint_dir={ROOT / 'checkpoints'}")
    shipped = ROOT / "checkpoints" / "toporefinenet_stage1.ckpt"
    before = shipped.stat().st_mtime_ns
    with pytest.raises(InputError, match="overwrite a shipped checkpoint"):
        train_refiner(cfg)
    assert shipped.stat().st_mtime_ns == before


def test_ship_true_copies_the_checkpoint_and_its_card(tmp_path: Path) -> None:
    from neurorefiner.training.shipping import ship, with_cards

    run = tmp_path / "outputs" / "ck"
    (run / "segmenters").mkdir(parents=True)
    ckpt = run / "segmenters" / "net.pt"
    ckpt.write_bytes(b"weights")
    ckpt.with_suffix(".md").write_text("card")
    paths = {"checkpoint_dir": str(run), "shipped_dir": str(tmp_path / "shipped")}
    cfg = OmegaConf.create({"ship": False, "paths": paths})
    assert ship(cfg, with_cards(ckpt)) == [] and not (tmp_path / "shipped").exists()
    cfg.ship = True
    copies = ship(cfg, with_cards(ckpt))
    assert sorted(p.name for p in copies) == ["net.md", "net.pt"]
    assert (tmp_path / "shipped" / "segmenters" / "net.pt").read_bytes() == b"weights"


class _RunsCode:
    """Unpickling this creates a file: what a crafted checkpoint could do with os.system instead."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (str(self.marker), "w"))


def test_a_crafted_last_ckpt_does_not_run_code_on_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neurorefiner.training.segmenter import train_segmenter
    from tests.unit.test_segment_training import _cfg

    (tmp_path / "data").mkdir()
    (tmp_path / "ck").mkdir()
    marker = tmp_path / "code_ran"
    torch.save({"state_dict": {}, "evil": _RunsCode(marker)}, tmp_path / "ck" / "last.ckpt")
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(InputError, match="refused to load"):
        train_segmenter(_cfg(tmp_path, 2))
    assert not marker.exists()
    assert os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"


@pytest.mark.parametrize("name", ["../../../elsewhere/evil", "..", "unet3d/../../x", "/nonexistent/evil.pt"])
def test_a_segmenter_name_cannot_leave_the_checkpoint_folders(name: str) -> None:
    from neurorefiner.inference.init_masks import shipped_checkpoint
    from neurorefiner.paths import init_mask_dir

    with pytest.raises(InputError):
        shipped_checkpoint(name, "diadem")
    with pytest.raises(InputError):
        init_mask_dir("diadem", name)


def test_an_explicit_existing_checkpoint_file_is_accepted(tmp_path: Path) -> None:
    from neurorefiner.inference.init_masks import shipped_checkpoint
    from neurorefiner.paths import init_mask_dir

    own = tmp_path / "my seg.pt"
    own.write_bytes(b"x")
    assert shipped_checkpoint(str(own), "diadem") == own
    folder = init_mask_dir("diadem", str(own), tmp_path / "cache")
    assert folder.parent == tmp_path / "cache" / "diadem" and folder.name.startswith("my_seg-")
    assert shipped_checkpoint("unet3d", "diadem") == ROOT / "checkpoints" / "segmenters" / "unet3d_diadem_cpu.pt"


@pytest.mark.parametrize("subset", ["weak", "noise"])
def test_each_cwmbs_subset_has_its_own_shipped_segmenter(subset: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """CWMBS's weak and noise stacks are one dataset name with a subset: evaluate's check, the training line it
    prints and the initial masks all look the segmenter up by the full name, so the noisy stacks are never
    segmented by the net shipped for the weak ones (filed by the name alone, both were unet3d_cwmbs_cpu.pt)."""
    from neurorefiner.evaluation.entry import check_segmenter
    from neurorefiner.inference.init_masks import write_init_masks

    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    expect = ROOT / "checkpoints" / "segmenters" / f"unet3d_cwmbs_{subset}_cpu.pt"
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="evaluate", overrides=["dataset=cwmbs", f"dataset.subset={subset}",
                                                         "methods=[initial]", "segmenter=unet3d"])
    with pytest.raises(InputError) as err:
        check_segmenter(cfg)
    assert Path(str(err.value.path)) == expect and f"/{expect.name}' ship=true" in err.value.problem
    (tmp_path / subset / "images").mkdir(parents=True)
    (tmp_path / subset / "images" / "case.tif").write_bytes(b"")
    with pytest.raises(InputError) as err:
        write_init_masks("cwmbs", "unet3d", split="all", out_dir=tmp_path / "masks", progress=False,
                         dataset_kwargs={"root": str(tmp_path), "subset": subset})
    assert Path(str(err.value.path)) == expect
