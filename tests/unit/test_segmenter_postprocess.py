"""A segmenter's post-processing chooser (neurorefiner.adaptation.segmenter_postprocess, `neurorefiner make
postprocess`: a step of making a segmenter, not a study) follows the rule in its doc (postprocessing.choose.
choose_setting, shared with the DIADEM cross-validation): best mean F1, within 0.01 the lower SSD, then no bridging,
then 0.5; on a preset's val split or named validation cases of a split without one (DIADEM OP_6), never test."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import neurorefiner.adaptation.segmenter_postprocess as cp
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError
from neurorefiner.postprocessing.choose import choose_setting


def _row(case: str, thr: float, bridge: float, f1: float, ssd: float) -> dict:
    return {"case": case, "threshold": thr, "bridge_um": bridge, "PRE": f1, "REC": f1, "F1": f1, "SD": ssd,
            "SSD": ssd}


def test_means_over_volumes_then_the_rule():
    rows = [_row("v0", 0.5, 0.0, 0.40, 20.0), _row("v1", 0.5, 0.0, 0.60, 20.0),  # mean 0.50
            _row("v0", 0.4, 3.0, 0.55, 12.0), _row("v1", 0.4, 3.0, 0.49, 12.0),  # mean 0.52: best F1
            _row("v0", 0.3, 0.0, 0.20, 5.0), _row("v1", 0.3, 0.0, 0.20, 5.0)]
    summary = cp.summarise(rows)
    assert [s["threshold"] for s in summary] == [0.4, 0.5, 0.3]
    assert summary[0]["F1"] == pytest.approx(0.52) and summary[0]["volumes"] == 2
    chosen = choose_setting(summary)
    assert (chosen["threshold"], chosen["bridge_um"]) == (0.4, 3.0)  # 0.50 is not within 0.01


def test_ties_go_to_lower_ssd_then_no_bridging_then_threshold_near_half():
    summary = cp.summarise([_row("v", 0.5, 3.0, 0.60, 10.0), _row("v", 0.6, 0.0, 0.595, 10.0),
                            _row("v", 0.4, 0.0, 0.595, 10.0), _row("v", 0.3, 0.0, 0.65, 30.0)])
    assert choose_setting(summary)["threshold"] == 0.3  # 0.65 beats the others by more than 0.01
    summary = [s for s in summary if s["threshold"] != 0.3]
    chosen = choose_setting(summary)
    assert chosen["bridge_um"] == 0.0 and chosen["threshold"] in (0.4, 0.6)
    summary.append({**summary[0], "threshold": 0.55, "bridge_um": 0.0, "F1": 0.6, "SSD": 9.0})
    assert choose_setting(summary)["threshold"] == 0.55  # lower SSD first


def test_the_rule_refuses_an_empty_summary():
    with pytest.raises(ValueError, match="no setting"):
        choose_setting([])


def test_the_markdown_names_the_choice_and_the_command():
    summary = cp.summarise([_row("v", 0.5, 3.0, 0.60, 10.0), _row("v", 0.6, 0.0, 0.40, 10.0)])
    text = cp.markdown("vnet_prior", "synthetic_x", "ck.pt", 1, summary, choose_setting(summary))
    assert "**Chosen: threshold 0.5, gap bridging 3 um, keep largest** (F1 0.600, SSD 10.00)" in text
    assert "Command: `neurorefiner make postprocess`" in text
    assert text.count("\n| 0.") == 2


def test_a_missing_checkpoint_is_a_one_line_error(tmp_path):
    done = CliRunner().invoke(app, ["make", "postprocess", "--dataset", "synthetic_zbfwb", "--arch", "vnet",
                                    "--model", str(tmp_path / "none.pt"), "--out", str(tmp_path)])
    assert done.exit_code == 2 and "checkpoint not found" in done.output


def test_a_split_the_dataset_lacks_is_a_one_line_error(tmp_path):
    model = tmp_path / "ck.pt"
    model.write_bytes(b"")
    done = CliRunner().invoke(app, ["make", "postprocess", "--dataset", "diadem", "--arch", "vnet", "--model",
                                    str(model), "--out", str(tmp_path)])
    assert done.exit_code == 2 and "has splits" in done.output and "Traceback" not in done.output


def test_a_tie_in_the_last_bits_of_ssd_goes_to_the_simpler_setting() -> None:
    """Two masks that trace the same tree give SSD means that differ by float noise (seen on a SYNTHETIC val
    split: 13.2063...01 vs ...99); the component filter must not win on that noise."""
    base = {"threshold": 0.4, "bridge_um": 2.0, "F1": 0.719, "SSD": 13.206346014283}
    summary = [{**base, "keep_largest": 1, "SSD": 13.206346014283 - 4e-15}, {**base, "keep_largest": 0}]
    assert choose_setting(summary)["keep_largest"] == 0


class _Case:
    def __init__(self, name: str):
        self.name, self.image_path, self.spacing, self.info = name, f"{name}.tif", (1.0, 1.0, 1.0), {"synthetic": True}

    def image(self):
        import numpy as np

        return type("Img", (), {"load": staticmethod(lambda: np.zeros((2, 4, 4), np.float32))})()

    def gold(self):
        return None


def test_several_checkpoints_are_chosen_with_their_threshold_and_the_winner_ships(tmp_path, monkeypatch):
    """A run's snapshots as candidates: the checkpoint is chosen with its setting on the whole val volumes, the
    markdown names it, and --ship-to gets a copy of the winner with the choice recorded (the candidates untouched)."""
    import json

    import numpy as np

    import neurorefiner.inference.segmenter as inference
    import neurorefiner.postprocessing.choose as choose
    from neurorefiner.models.segmenters import build_segmenter

    net = build_segmenter("unet3d", features=(4, 8, 16))
    cfg = {"_target_": "neurorefiner.models.segmenters.unet3d.UNet3D", "features": [4, 8, 16]}
    early, late = (inference.export_segmenter(net, cfg, tmp_path / f"step{s:06d}.pt", (8, 16, 16),
                                              meta={"global_step": s}) for s in (300, 1800))
    monkeypatch.setattr(cp, "validation_cases", lambda *a: [_Case("val_000"), _Case("val_001")])
    # the 300-step snapshot traces best at threshold 0.2, the 1800-step one is best (but worse) at 0.5
    monkeypatch.setattr(inference, "segment_array", lambda seg, image, **kw: (None, np.full(
        (1,), float(seg.meta["global_step"]))))
    quality = {(300.0, 0.2): 0.87, (300.0, 0.5): 0.70, (1800.0, 0.2): 0.50, (1800.0, 0.5): 0.54}

    def fake_scores(probs, gold, spacing, grid, root_seeded=False):
        for post in grid:
            f1 = quality[(float(probs[0]), post.threshold)]
            yield post, {"PRE": f1, "REC": f1, "F1": f1, "SD": 1.0, "SSD": 10.0}

    monkeypatch.setattr(choose, "score_settings", fake_scores)
    shipped = tmp_path / "ship" / "unet3d_x_cpu.pt"
    text = cp.choose_postprocess("synthetic_x", "unet3d", [early, late], tmp_path / "out", thresholds=(0.2, 0.5),
                                 bridge=(0.0,), keep=(0,), record=True, ship_to=shipped)
    assert "**Chosen: checkpoint step000300, threshold 0.2" in text
    assert "| step001800 | 0.5 | 0 | 0 |" in text  # each checkpoint's own best is listed
    picked = json.loads((tmp_path / "out" / "synthetic_x_unet3d_postprocess_val.json").read_text())
    assert picked["checkpoint"] == str(early) and picked["threshold"] == 0.2
    meta = inference.load_segmenter(shipped).meta
    assert meta["global_step"] == 300 and meta["postprocess"]["threshold"] == 0.2
    assert "checkpoint step000300 of 2 candidates" in meta["postprocess_chosen_on"]
    assert "postprocess" not in inference.load_segmenter(early).meta  # the candidate itself is left alone


def test_a_missing_candidate_fails_before_any_scoring(tmp_path):
    model = tmp_path / "ck.pt"
    model.write_bytes(b"")
    done = CliRunner().invoke(app, ["make", "postprocess", "--dataset", "synthetic_zbfwb", "--arch", "unet3d",
                                    "--model", str(model), "--model", str(tmp_path / "none.pt"), "--out",
                                    str(tmp_path)])
    assert done.exit_code == 2 and "none.pt" in done.output and "checkpoint not found" in done.output


def test_candidates_can_be_named_and_names_must_differ(tmp_path):
    """NAME=PATH names a candidate from another run (the shipped file, a short schedule) in the tables."""
    from pathlib import Path

    assert cp.split_candidate("300steps=runs/a/segmenter.pt") == ("300steps", Path("runs/a/segmenter.pt"))
    assert cp.split_candidate("runs/x=1/step000300.pt") == (None, Path("runs/x=1/step000300.pt"))
    assert cp.candidate_names([Path("a/segmenter.pt"), Path("b/step000600.pt")], ["short", None]) == \
        ["short", "step000600"]
    assert cp.candidate_names([Path("a/s.pt"), Path("b/s.pt")]) == ["a/s.pt", "b/s.pt"]
    model = tmp_path / "ck.pt"
    model.write_bytes(b"")
    done = CliRunner().invoke(app, ["make", "postprocess", "--dataset", "synthetic_zbfwb", "--arch", "unet3d",
                                    "--model", f"a={model}", "--model", f"a={model}", "--out", str(tmp_path)])
    assert done.exit_code == 2 and "share a name" in done.output, done.output


def test_help_names_the_validation_cases() -> None:
    done = CliRunner().invoke(app, ["make", "postprocess", "--help"])
    assert done.exit_code == 0 and "--case" in done.output and "--record" in done.output


def test_diadem_is_chosen_on_its_named_dev_stack_never_on_test() -> None:
    """DIADEM has no val split: a network trained by segment_diadem_cpu is validated on OP_6, so its
    post-processing is chosen there (experiments/segmenters/run.sh, STEP=networks); a test split is refused and a
    case the split lacks is one clear error."""
    assert [c.name for c in cp.validation_cases("diadem", "dev", ["OP_6"])] == ["OP_6"]
    assert cp.cases_phrase("dev", ["OP_6"]) == "dev split: OP_6" and cp.cases_phrase("val") == "val split"
    with pytest.raises(InputError, match="never on a test split"):
        cp.validation_cases("diadem", "test")
    with pytest.raises(InputError, match="no case OP_7 in its dev split"):
        cp.validation_cases("diadem", "dev", ["OP_7"])


def test_a_real_markdown_says_synthetic_only_for_synthetic_data() -> None:
    summary = cp.summarise([_row("v", 0.6, 0.0, 0.70, 10.0)])
    text = cp.markdown("vnet", "diadem", "ck.pt", 1, summary, choose_setting(summary), on="dev split: OP_6",
                       synthetic=False)
    assert text.startswith("# vnet on diadem: post-processing chosen on the dev split: OP_6")
    assert "SYNTHETIC" not in text and "1 volumes of the dev split: OP_6" in text
