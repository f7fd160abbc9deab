"""``neurorefiner adapt``: its settings are checked before any work, its folder records each finished step (the same
command resumes, other settings are refused), the card is written from the record, and ``refiner=adapted`` loads
the folder's editor and judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurorefiner.adaptation import run as adapt_run
from neurorefiner.adaptation.card import rebuild_command
from neurorefiner.adaptation.settings import AdaptSettings, check_dataset
from neurorefiner.adaptation.state import AdaptFolder
from neurorefiner.cli.main import app
from neurorefiner.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
#: tiny has no shipped segmenter: its runs learn from the naive floor's masks (no checkpoint to make them with)
NAIVE = AdaptSettings("tiny", segmenters=("otsu",))


@pytest.mark.parametrize("bad", [{"editor_steps": 0}, {"stage1_samples": -3}, {"segmenters": ()},
                                 {"faint_gap": 1.5}, {"judge_min_support": 0}, {"baselines": ("segfx",)},
                                 {"judge_tree_root": "soma"}, {"judge_reach_um": 0.0}])
def test_settings_out_of_range_are_refused(bad: dict) -> None:
    with pytest.raises(InputError):
        AdaptSettings("tiny", **bad)


def test_a_dataset_without_a_training_split_or_name_is_refused() -> None:
    assert check_dataset("tiny") == ("train", "val")
    assert check_dataset("diadem") == ("dev", None)  # the last dev case validates; OP_7-OP_9 never read
    with pytest.raises(InputError, match="no such dataset"):
        check_dataset("tinny")


def test_the_folder_refuses_other_settings_and_continues_its_own(tmp_path: Path) -> None:
    folder = AdaptFolder(tmp_path / "r")
    mine = AdaptSettings("tiny").record()
    folder.claim(mine)
    folder.finish("masks", 1.0, 0.5, {"masks": {"unet3d/train": 4}})
    assert folder.claim(mine)["steps"]["masks"]["masks"] == {"unet3d/train": 4}
    with pytest.raises(InputError, match="editor_steps: 1500 here, 10 asked"):
        folder.claim(AdaptSettings("tiny", editor_steps=10).record())


def test_a_folder_made_before_a_setting_existed_continues_at_that_settings_default(tmp_path: Path) -> None:
    folder = AdaptFolder(tmp_path / "r")
    older = {k: v for k, v in AdaptSettings("tiny").record().items() if not k.startswith("judge_tree_root")
             and k != "judge_reach_um"}  # a record written before the judge's piece and reach were settings
    folder.claim(older)
    folder.finish("masks", 1.0, 0.5)  # a step made under the older record: a folder with something to build on
    defaults = AdaptSettings("tiny").record()
    folder.claim(AdaptSettings("tiny").record(), defaults)  # the defaults: the same run, continued
    with pytest.raises(InputError, match="judge_tree_root: 'largest' here, 'gold' asked"):
        folder.claim(AdaptSettings("tiny", judge_tree_root="gold").record(), defaults)


def test_the_judge_step_learns_on_the_piece_and_reach_it_is_told(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import neurorefiner.adaptation.judge.training as training
    import neurorefiner.adaptation.steps as steps

    seen: dict = {}

    def fake_fit(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(kwargs)
        return tmp_path / "judge.json", tmp_path / "judge.md"

    monkeypatch.setattr(training, "train_judge", fake_fit)
    steps.train_judge(AdaptSettings("tiny", judge_tree_root="gold", judge_reach_um=16.0), AdaptFolder(tmp_path))
    assert seen["tree_root"] == "gold" and seen["reach_um"] == 16.0
    assert "--judge-tree-root gold --judge-reach-um 16.0" in rebuild_command(
        AdaptSettings("tiny", judge_tree_root="gold", judge_reach_um=16.0).record(), "out")


def _fake_steps(calls: list[str], fail: str | None = None) -> dict:
    def make(name: str):  # type: ignore[no-untyped-def]
        def step(settings: AdaptSettings, folder: AdaptFolder) -> dict:
            calls.append(name)
            if name == fail:
                raise RuntimeError("stopped")
            return {"made": name}
        return step
    return {name: make(name) for name in ("masks", "stage1_shards", "stage2_shards", "editor", "judge", "baselines")}


def test_a_stopped_run_resumes_at_the_step_that_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import neurorefiner.adaptation.steps as steps

    calls: list[str] = []
    monkeypatch.setattr(steps, "PRODUCTS", {})
    monkeypatch.setattr(steps, "STEPS", _fake_steps(calls, fail="editor"))
    with pytest.raises(RuntimeError):
        adapt_run.adapt(NAIVE, tmp_path / "r", progress=False)
    assert calls == ["masks", "stage1_shards", "stage2_shards", "editor"]
    assert not (tmp_path / "r" / "README.md").exists()  # no card for a half-made refiner
    calls.clear()
    monkeypatch.setattr(steps, "STEPS", _fake_steps(calls))
    card = adapt_run.adapt(NAIVE, tmp_path / "r", progress=False)
    assert calls == ["editor", "judge", "baselines"]  # the finished steps are not redone
    record = json.loads((tmp_path / "r" / "adapt.json").read_text())
    assert list(record["steps"]) == ["masks", "stage1_shards", "stage2_shards", "editor", "judge", "baselines"]
    text = card.read_text()
    assert "neurorefiner adapt --dataset tiny --out" in text and "| all |" in text


def test_a_step_whose_files_are_gone_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh checkout holds a refiner's record but not its ignored shards: Table 6 on that preset needs them."""
    import neurorefiner.adaptation.steps as steps

    calls: list[str] = []
    shards = tmp_path / "r" / "work" / "shards" / "stage1" / "train" / "manifest.json"
    monkeypatch.setattr(steps, "PRODUCTS", {"stage1_shards": lambda settings, folder: [shards]})
    monkeypatch.setattr(steps, "STEPS", _fake_steps(calls))
    adapt_run.adapt(NAIVE, tmp_path / "r", progress=False)
    calls.clear()
    adapt_run.adapt(NAIVE, tmp_path / "r", progress=False)
    assert calls == ["stage1_shards"]  # recorded as done, but its manifest is not there
    shards.parent.mkdir(parents=True)
    shards.write_text("{}")
    calls.clear()
    adapt_run.adapt(NAIVE, tmp_path / "r", progress=False)
    assert calls == []


def test_each_step_names_the_files_it_leaves(tmp_path: Path) -> None:
    import neurorefiner.adaptation.steps as steps

    assert set(steps.PRODUCTS) == set(steps.STEPS)
    folder = AdaptFolder(tmp_path)
    settings = AdaptSettings("tiny", baselines=("segfix",))
    made = {name: steps.PRODUCTS[name](settings, folder) for name in steps.STEPS}
    assert made["editor"] == [tmp_path / "editor.ckpt"] and made["baselines"] == [tmp_path / "segfix.ckpt"]
    assert all(p.name == "manifest.json" for p in made["stage2_shards"]) and len(made["stage2_shards"]) == 2
    assert made["masks"] and all(p.suffix == ".tif" and "tiny" in p.parts for p in made["masks"])


def test_the_rebuild_command_names_only_what_differs_from_the_defaults() -> None:
    record = AdaptSettings("synthetic_zbfwb", segmenters=("unet3d", "nnunet_style"), editor_steps=900).record()
    line = rebuild_command(record, "checkpoints/refiners/synthetic_zbfwb")
    assert line == ("neurorefiner adapt --dataset synthetic_zbfwb --out checkpoints/refiners/synthetic_zbfwb "
                    "--segmenters unet3d,nnunet_style --editor-steps 900")


def test_the_command_refuses_a_bad_dataset_in_one_line_writing_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["adapt", "--dataset", "tinny", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "no such dataset" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_own_stacks_without_a_voxel_size_are_refused(tmp_path: Path) -> None:
    from neurorefiner.data.registry import get_dataset

    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.tif").write_bytes(b"")
    with pytest.raises(InputError, match="spacing.json"):
        get_dataset("own", root=tmp_path).cases("train")


def test_refiner_adapted_loads_the_folders_editor_and_judge(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from neurorefiner.io.refiner_plans import write_plan

    write_plan(tmp_path, {"kind": "agents", "judge": "judge.json", "editor": "editor.ckpt"}, {})
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        for name in ("refine", "evaluate"):
            cfg = compose(config_name=name, overrides=["refiner=adapted", f"refiner_dir={tmp_path}",
                                                       "image=a.tif", "mask=b.tif"] if name == "refine"
                          else ["refiner=adapted", f"refiner_dir={tmp_path}"])
            assert cfg.editor.checkpoint == str(tmp_path.resolve() / "editor.ckpt")
            assert cfg.agent.inspector.judge == str(tmp_path.resolve() / "judge.json")
            shipped = compose(config_name=name, overrides=["image=a.tif", "mask=b.tif"] if name == "refine" else [])
            assert shipped.editor.checkpoint is None


@pytest.mark.slow
def test_adapt_end_to_end_on_tiny_data(tmp_path: Path) -> None:
    """Every step for real on the tiny built-in data (naive threshold masks, one training step): the folder holds a
    loadable editor, a judge and a card; the same command again redoes nothing."""
    from neurorefiner.inference.refiner import TopoRefiner

    out = tmp_path / "refiner"
    args = ["adapt", "--dataset", "tiny", "--out", str(out), "--segmenters", "otsu", "--editor-steps", "1",
            "--stage1-samples", "4", "--stage2-samples", "4", "--val-samples", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for name in ("editor.ckpt", "judge.json", "judge.md", "README.md", "plans.json", "choose.md"):
        assert (out / name).exists(), name
    TopoRefiner.load(out / "editor.ckpt")
    card = (out / "README.md").read_text()
    assert "chosen on validation" in card and "| classical | classical |" in card   # the classical row is shown
    before = (out / "adapt.json").read_text()
    assert CliRunner().invoke(app, args).exit_code == 0
    assert (out / "adapt.json").read_text() == before


def test_the_card_names_the_folder_as_the_user_gave_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neurorefiner.adaptation.card import adapted_card

    monkeypatch.chdir(tmp_path)
    absolute = str((tmp_path / "r").resolve())
    record = {"settings": AdaptSettings("tiny").record(),
              "steps": {"editor": {"wall_s": 1.0, "cpu_s": 1.0, "steps": 2,
                                   "command": f"python train.py experiment=adapt_editor adapt_dir={absolute}"}}}
    text = adapted_card(record, "r", "abc1234")
    assert "adapt_dir=r" in text and absolute not in text


def test_a_training_step_that_fails_or_writes_nothing_is_one_error_naming_its_folder(tmp_path: Path) -> None:
    import neurorefiner.adaptation.steps as steps

    made = tmp_path / "editor" / "editor.ckpt"
    with pytest.raises(InputError, match=r"the editor's training stopped \(exit code 3\).*resume it") as failed:
        steps._train(["python", "-c", "raise SystemExit(3)"], made, "the editor's training", "resume it")
    assert str(made.parent) in str(failed.value)
    with pytest.raises(InputError, match=r"exit code 0"):  # ran, but left no checkpoint
        steps._train(["python", "-c", "pass"], made, "the editor's training", "resume it")
    made.parent.mkdir(parents=True)
    made.write_bytes(b"x")
    steps._train(["python", "-c", "pass"], made, "the editor's training", "resume it")  # made: no error


def test_the_command_refuses_an_unknown_judge_piece_in_one_line_writing_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["adapt", "--dataset", "tiny", "--out", str(tmp_path / "r"),
                                      "--judge-tree-root", "soma", "--judge-reach-um", "16"])
    assert result.exit_code == 2
    assert "--judge-tree-root soma: choose from gold, largest" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()
