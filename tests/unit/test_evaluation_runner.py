"""The evaluation runner uses the tracing and metric settings it is given, keeps rows of different settings
apart, seeds APP2 at the gold root when asked, and makes the initial masks it needs."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from neurorefiner.errors import InputError

CONF = Path(__file__).resolve().parents[2] / "conf"


def _cfg(tmp_path: Path, *overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="evaluate", overrides=[
            "dataset=tiny", "split=test", "methods=[gold_mask]", "limit=1", f"out_dir={tmp_path / 'out'}",
            f"dataset.root={tmp_path / 'synth'}", "dataset.n_train=0", "dataset.n_val=0", "dataset.n_test=1",
            "paths.output_dir=/tmp/nr-test-out", *overrides])


def _run(cfg):  # type: ignore[no-untyped-def]
    from hydra.utils import instantiate

    from neurorefiner.evaluation.runner import evaluate

    dataset = instantiate(cfg.dataset)
    return evaluate(cfg, dataset, dataset.cases(cfg.split))


def test_overriding_a_tracing_setting_changes_the_result(tmp_path: Path) -> None:
    base = _run(_cfg(tmp_path, "protocols=[full_volume]"))
    changed = _run(_cfg(tmp_path, "protocols=[full_volume]", "tracing.length_thresh=60", "tracing.leaf_prune=false"))
    assert len(base) == len(changed) == 1
    assert base[0]["F1"] != changed[0]["F1"] or base[0]["SD"] != changed[0]["SD"]
    # the two settings keep their own row files: the second run did not read back the first one's rows
    assert len(list((tmp_path / "out" / "rows").iterdir())) == 2


def test_overriding_a_metric_setting_changes_the_result(tmp_path: Path) -> None:
    loose = _run(_cfg(tmp_path, "protocols=[full_volume]", "metrics.tau=8"))
    strict = _run(_cfg(tmp_path, "protocols=[full_volume]", "metrics.tau=0.5"))
    assert strict[0]["F1"] < loose[0]["F1"]


def test_both_protocols_give_rows_and_a_table(tmp_path: Path) -> None:
    rows = _run(_cfg(tmp_path))
    assert sorted(r["protocol"] for r in rows) == ["full_volume", "root_seeded"]
    table = (tmp_path / "out" / "table.md").read_text()
    assert "SYNTHETIC" in table and "gold_mask (root_seeded)" in table
    with open(tmp_path / "out" / "per_volume.csv") as fh:
        assert len(list(csv.DictReader(fh))) == 2


def test_unknown_method_and_protocol_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown method 'no_such_method'"):
        _run(_cfg(tmp_path, "methods=[no_such_method]"))
    with pytest.raises(InputError, match="unknown protocol"):
        _run(_cfg(tmp_path, "protocols=[guess]"))


def test_root_marker_is_the_mask_voxel_nearest_the_gold_root() -> None:
    from neurorefiner.io.swc import Tree
    from neurorefiner.tracing.seeding import marker_nearest_root

    gold = Tree.from_points(np.array([[5.0, 10.0, 10.0], [5.0, 10.0, 20.0]]), np.array([-1, 0]))
    mask = np.zeros((10, 30, 30), bool)
    mask[5, 12, 11] = mask[5, 25, 25] = True
    assert marker_nearest_root(mask, gold) == (11.0, 12.0, 5.0)  # x, y, z
    assert marker_nearest_root(np.zeros_like(mask), gold) is None


def test_initial_masks_are_made_on_first_use_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh clone has no cached masks: the runner makes them (here with the naive floor, which needs no
    checkpoint) instead of stopping with "make them first"."""
    from neurorefiner.inference import init_masks

    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    rows = _run(_cfg(tmp_path, "methods=[initial]", f"segmenter={init_masks.NAIVE}", "protocols=[root_seeded]"))
    assert len(rows) == 1 and rows[0]["method"] == "initial"
    assert list((tmp_path / "cache" / "init_masks" / "tiny" / init_masks.NAIVE).glob("*.tif"))


def test_a_table_reads_rows_of_earlier_runs_with_the_current_method_settings(tmp_path: Path) -> None:
    """Rows of an earlier run (another segmenter, e.g. a multirun job) join the table; rows of stale
    method settings do not."""
    import json

    from neurorefiner.evaluation.cache_keys import row_key, table_rows
    from neurorefiner.evaluation.methods import method_node

    cfg = _cfg(tmp_path)
    key = row_key(method_node(cfg, "classical"), "nnunet_style", "tiny")
    split_dir = tmp_path / "rows" / "s" / "test"
    (split_dir / "nnunet_style").mkdir(parents=True)
    row = {"segmenter": "nnunet_style", "method": "classical", "protocol": "root_seeded", "case": "a", "F1": 0.5}
    (split_dir / "nnunet_style" / f"classical-{key}__root_seeded__a.json").write_text(json.dumps(row))
    stale = split_dir / "nnunet_style" / "classical-stale000__root_seeded__b.json"
    stale.write_text(json.dumps({**row, "case": "b"}))
    got = table_rows(cfg, split_dir, [])
    assert [r["case"] for r in got] == ["a"]


def test_no_server_is_said_not_guessed() -> None:
    from neurorefiner.evaluation.plan import server_answers

    assert "no VLM server answered at http://127.0.0.1:9" in server_answers("http://127.0.0.1:9/v1", timeout=1)


def test_two_init_mask_runs_on_one_folder_keep_each_others_cases(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that writes its manifest after another run on the same folder (another split, or the same one
    at the same time) keeps the other's entries: the last writer used to drop them, and the next evaluation
    remade those masks."""
    import json

    from neurorefiner.inference import init_masks

    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    kwargs = {"root": str(tmp_path / "synth"), "n_train": 0, "n_val": 1, "n_test": 1}
    out = tmp_path / "masks"
    stale = None

    real = init_masks._record_cases

    def record_after_the_other_run(path, header, new):  # type: ignore[no-untyped-def]
        nonlocal stale
        if stale is None:  # the first case of the first run: the other run finishes in between
            stale = True
            init_masks.write_init_masks("tiny", init_masks.NAIVE, split="val", out_dir=out, progress=False,
                                        dataset_kwargs=kwargs)
        real(path, header, new)

    monkeypatch.setattr(init_masks, "_record_cases", record_after_the_other_run)
    init_masks.write_init_masks("tiny", init_masks.NAIVE, split="test", out_dir=out, progress=False,
                                dataset_kwargs=kwargs)
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(c["split"] for c in manifest["cases"].values()) == ["test", "val"]
    assert manifest["splits"] == ["test", "val"]


def test_synthetic_comes_from_the_dataset_config_not_its_name(tmp_path: Path) -> None:
    """A dataset config says ``synthetic``; the runner's title follows it (the name used to decide)."""
    _run(_cfg(tmp_path, "protocols=[full_volume]", "figures=false"))
    assert "SYNTHETIC" in (tmp_path / "out" / "table.md").read_text()
    _run(_cfg(tmp_path, "protocols=[full_volume]", "figures=false", "dataset.synthetic=false"))
    assert "(real data)" in (tmp_path / "out" / "table.md").read_text()


def test_the_config_is_not_changed_by_a_run(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    cfg = _cfg(tmp_path, "protocols=[full_volume]", "figures=false")
    before = OmegaConf.to_yaml(cfg)
    _run(cfg)
    assert OmegaConf.to_yaml(cfg) == before


def test_a_new_checkpoint_or_method_version_invalidates_the_cached_row(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows used to be reused while the method's settings matched, whatever code or weights made them."""
    from omegaconf import OmegaConf

    from neurorefiner.evaluation import methods
    from neurorefiner.evaluation.cache_keys import row_key
    from neurorefiner.evaluation.methods import method_node

    cfg = _cfg(tmp_path)
    ckpt = tmp_path / "editor.ckpt"
    ckpt.write_bytes(b"weights one")
    node = OmegaConf.merge(method_node(cfg, "gold_mask"), {"editor": {"checkpoint": str(ckpt)}})
    first = row_key(node, "otsu", "tiny")
    assert row_key(node, "otsu", "tiny") == first                      # stable while nothing changes
    ckpt.write_bytes(b"weights two")
    second = row_key(node, "otsu", "tiny")
    assert second != first                                              # other checkpoint bytes
    monkeypatch.setattr(methods.GoldMask, "cache_version", "2")
    assert row_key(node, "otsu", "tiny") not in (first, second)         # other method code
    # end to end: a run after the version bump recomputes instead of reading the row back
    rows = _run(_cfg(tmp_path, "protocols=[full_volume]", "figures=false"))
    monkeypatch.setattr(methods.GoldMask, "cache_version", "3")
    again = _run(_cfg(tmp_path, "protocols=[full_volume]", "figures=false"))
    assert rows[0]["method_key"] != again[0]["method_key"]
    assert len(list((tmp_path / "out" / "rows").rglob("gold_mask-*.json"))) == 2


def test_the_key_does_not_depend_on_where_the_checkout_lives(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge path under the checkout root made every worktree key its rows apart, so a table built in one
    worktree left another's rows of the same settings "not run"."""
    from omegaconf import OmegaConf

    from neurorefiner.evaluation.methods import method_key

    keys = []
    for root in (tmp_path / "clone_a", tmp_path / "clone_b"):
        monkeypatch.setenv("PROJECT_ROOT", str(root))
        keys.append(method_key(OmegaConf.create({"agent": {"judge": f"{root}/checkpoints/judge.json"}})))
    assert keys[0] == keys[1]
    assert method_key(OmegaConf.create({"agent": {"judge": "/elsewhere/judge.json"}})) != keys[1]


def test_a_new_switch_at_its_old_behaviour_keeps_the_key_and_any_other_value_changes_it() -> None:
    """Adding loop.retry_declined (true = what the loop always did) changed every neurorefiner row's key, so every
    cached row would have been remade for the same computation."""
    from omegaconf import OmegaConf

    from neurorefiner.evaluation.methods import method_key

    before = {"t_max": 5, "loop": {"roles": "full"}}
    at_old = method_key(OmegaConf.create({"t_max": 5, "loop": {"roles": "full", "retry_declined": True}}))
    assert at_old == method_key(OmegaConf.create(before))
    assert method_key(OmegaConf.create({"t_max": 5, "loop": {"roles": "full", "retry_declined": False}})) != at_old


def test_a_retrained_judge_invalidates_the_cached_row(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    from neurorefiner.evaluation.cache_keys import row_key
    from neurorefiner.evaluation.methods import method_node

    cfg = _cfg(tmp_path)
    judge = tmp_path / "judge.json"
    judge.write_text('{"thresholds": {"join": 0.9}}')
    node = OmegaConf.merge(method_node(cfg, "gold_mask"), {"agent": {"inspector": {"judge": str(judge)}}})
    first = row_key(node, "otsu", "tiny")
    judge.write_text('{"thresholds": {"join": 0.5}}')
    assert row_key(node, "otsu", "tiny") != first


def test_a_retrained_default_judge_invalidates_the_cached_row(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``judge: null`` (conf/agent/learned.yaml) the learned Inspector loads checkpoints/judge.json: the key
    held the editor's default file but nothing of the judge's, so a retrained judge reused the old judge's rows."""
    from neurorefiner.evaluation.cache_keys import row_key
    from neurorefiner.evaluation.methods import method_node
    from neurorefiner.inference.init_masks import NAIVE

    learned = method_node(_cfg(tmp_path), "neurorefiner")
    heuristic = method_node(_cfg(tmp_path, "agent=heuristic"), "neurorefiner")
    assert learned.agent.inspector.judge is None
    root = tmp_path / "checkout"
    (root / "checkpoints").mkdir(parents=True)
    monkeypatch.setenv("PROJECT_ROOT", str(root))   # checkpoints/ of this checkout: the shipped judge is ours
    judge = root / "checkpoints" / "judge.json"
    judge.write_text('{"thresholds": {"join": 0.9}}')
    first, other = row_key(learned, NAIVE, "tiny"), row_key(heuristic, NAIVE, "tiny")
    judge.write_text('{"thresholds": {"join": 0.55, "prune": 0.7}}')
    assert row_key(learned, NAIVE, "tiny") != first
    assert row_key(heuristic, NAIVE, "tiny") == other      # agents that load no judge keep their key


def test_the_segmenters_checkpoint_is_in_the_key_of_methods_that_start_from_it(tmp_path: Path) -> None:
    from neurorefiner.evaluation.cache_keys import method_checkpoints
    from neurorefiner.evaluation.methods import method_node

    cfg = _cfg(tmp_path)
    shipped = Path(__file__).resolve().parents[2] / "checkpoints" / "segmenters" / "unet3d_diadem_cpu.pt"
    assert shipped in method_checkpoints(method_node(cfg, "initial"), "unet3d", "diadem")
    assert shipped not in method_checkpoints(method_node(cfg, "gold_mask"), "unet3d", "diadem")


def test_an_initial_mask_is_remade_when_its_case_holds_another_image(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The same case name under another dataset seed (fresh volumes of a preset) or a regenerated preset holds
    another image: the cached mask of the old image was reused, so a fresh-volume evaluation scored old masks."""
    from neurorefiner.baselines.naive import otsu_mask
    from neurorefiner.data import get_dataset
    from neurorefiner.inference import init_masks
    from neurorefiner.io.stacks import read_mask

    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    out = tmp_path / "masks"
    for seed in (0, 1):
        kwargs = {"root": str(tmp_path / "synth"), "n_train": 0, "n_val": 0, "n_test": 1, "seed": seed}
        (path,) = init_masks.write_init_masks("tiny", init_masks.NAIVE, split="test", out_dir=out, progress=False,
                                              dataset_kwargs=kwargs)
        (case,) = get_dataset("tiny", **kwargs).cases("test")
        assert np.array_equal(read_mask(path).load() > 0, otsu_mask(case.image().load()))


def test_a_row_made_on_other_data_is_not_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows were kept by the method and the scoring settings alone: fresh volumes (another dataset seed and root,
    the same case names) evaluated into the same out_dir read back the first volumes' rows and reported their
    F1 (tiny, Otsu masks: 44.64 reported where the fresh volumes score 7.04)."""
    from neurorefiner.evaluation.cache_keys import table_rows
    from neurorefiner.inference import init_masks

    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    common = ("methods=[initial]", f"segmenter={init_masks.NAIVE}", "protocols=[root_seeded]", "figures=false")
    first = _run(_cfg(tmp_path, *common, "dataset.seed=0"))
    fresh = ("dataset.seed=7", f"dataset.root={tmp_path / 'synth7'}")
    other = _run(_cfg(tmp_path, *common, *fresh))
    alone = _run(_cfg(tmp_path, *common, *fresh, f"out_dir={tmp_path / 'alone'}"))
    assert first[0]["F1"] != alone[0]["F1"]                      # the two seeds' volumes score apart
    assert other[0]["F1"] == alone[0]["F1"] and other[0]["data_key"] != first[0]["data_key"]
    # a table of the fresh volumes takes the fresh row only; a row from before rows carried the key is left out
    split_dir = tmp_path / "out" / "rows" / other[0]["settings_key"] / "test"
    cfg = _cfg(tmp_path, *common, *fresh)
    got = table_rows(cfg, split_dir, [], data_keys={other[0]["case"]: other[0]["data_key"]})
    assert [r["F1"] for r in got] == [alone[0]["F1"]]
    assert table_rows(cfg, split_dir, [], data_keys={"tiny_test_000": "legacy"}) == []
    # back on the first volumes: their row is made again, not the fresh volumes' row read back, and the fresh
    # volume's saved mask, which a figure would have drawn beside that row, is gone when no mask is saved
    saved = list((tmp_path / "out" / "masks").rglob("*.tif"))
    assert len(saved) == 1
    assert _run(_cfg(tmp_path, *common, "dataset.seed=0", "save_masks=false"))[0]["F1"] == first[0]["F1"]
    assert not saved[0].exists()
