"""Segmenter checkpoints' cards are written from the checkpoint's own metadata by a command
(neurorefiner.training.segmenter_cards, `neurorefiner make segmenter-card` / `standin-card`), never by an inline
``python -c`` in an experiments script: whole or not at all, with the command that made the checkpoint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurorefiner.cli.main import app
from neurorefiner.errors import InputError
from neurorefiner.training.segmenter_cards import THRESHOLD_GRID, write_standin_card

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", ["segmenter-card", "standin-card"])
def test_help(command: str) -> None:
    done = CliRunner().invoke(app, ["make", command, "--help"])
    assert done.exit_code == 0 and "Usage" in done.output


def test_a_checkpoint_gets_its_card_with_the_command(tmp_path: Path) -> None:
    from neurorefiner.inference.segmenter import export_segmenter
    from neurorefiner.models.segmenters import build_segmenter

    net = build_segmenter("unet3d", features=(4, 8, 16))
    cfg = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "features": [4, 8, 16]}
    ck = export_segmenter(net, cfg, tmp_path / "segmenter.pt", (8, 16, 16), meta={"global_step": 256})
    card = tmp_path / "cards" / "vnet_card.md"
    done = CliRunner().invoke(app, ["make", "segmenter-card", str(ck), "--command", "STEP=networks bash run.sh",
                                    "--title", "vnet on DIADEM dev (256 steps)", "--out", str(card)])
    assert done.exit_code == 0, done.output
    text = card.read_text()
    assert text.startswith("# vnet on DIADEM dev (256 steps)\n") and "256 optimiser steps" in text
    assert "## Command\n\n```bash\nSTEP=networks bash run.sh\n```" in text


def test_a_missing_checkpoint_is_one_line_and_writes_no_card(tmp_path: Path) -> None:
    card = tmp_path / "card.md"
    done = CliRunner().invoke(app, ["make", "segmenter-card", str(tmp_path / "none.pt"), "--command", "x",
                                    "--out", str(card)])
    assert done.exit_code == 2 and "checkpoint not found" in done.output and not card.exists()


def test_a_card_for_an_unknown_or_untrained_segmenter_is_one_clear_error() -> None:
    with pytest.raises(InputError, match="no stand-in segmenter 'swinunetr'"):
        write_standin_card("synthetic_cwmbs_weak", "swinunetr")
    with pytest.raises(InputError, match="train it: python train.py experiment=nnunet_style_synthetic_nope_cpu"):
        write_standin_card("synthetic_nope", "nnunet_style")


def test_the_cards_cite_the_grid_and_flags_run_sh_chooses_with() -> None:
    """A card's `make postprocess` line must be the one run.sh ran (it cited a 0.1 threshold run.sh never tried)."""
    choose = ROOT / "experiments" / "standins" / "run.sh"
    step = choose.read_text().split("    choose)", 1)[1].split(";;", 1)[0]
    assert tuple(float(t) for t in re.findall(r"--threshold (\S+)", step)) == THRESHOLD_GRID
    assert "--bridge 0 --keep 0" in step and "--protocol root_seeded" in step


def test_diadem_networks_get_their_post_processing_chosen_on_their_validation_stack() -> None:
    """experiments/segmenters/run.sh once typed the CPU U-Net's threshold 0.6 into each network's checkpoint; each
    network's own setting is chosen on OP_6 (the stack that validated it) and recorded before its test rows."""
    script = (ROOT / "experiments" / "segmenters" / "run.sh").read_text()
    step = script.split("\nnetworks)", 1)[1].split("  done ;;", 1)[0]
    assert "record_postprocess" not in step and "PostProcess(" not in step
    choose, rows, card = (step.index(s) for s in ("make postprocess", "make segmenter-rows", "make segmenter-card"))
    assert choose < rows < card
    assert "--dataset diadem --split dev --case OP_6" in step and "--record" in step[choose:rows]
