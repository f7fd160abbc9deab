"""Methods are config nodes (conf/method/): the runner builds each, writes one row per (split, segmenter,
method, protocol, volume) with the method's seconds, keeps rows of different method settings apart, and
the agent loop's edit counts reach the rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[2] / "conf"


def _cfg(tmp_path: Path, *overrides: str):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name="evaluate", overrides=[
            "dataset=tiny", "split=test", "limit=1", f"out_dir={tmp_path / 'out'}", "segmenter=otsu",
            f"dataset.root={tmp_path / 'synth'}", "dataset.n_train=0", "dataset.n_val=0", "dataset.n_test=1",
            "paths.output_dir=/tmp/nr-test-out", "protocols=[root_seeded]", "progress=false", *overrides])


def _run(cfg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from hydra.utils import instantiate

    from neurorefiner.evaluation.runner import evaluate
    from neurorefiner.inference import init_masks

    monkeypatch.setattr(init_masks, "cache_dir", lambda: tmp_path / "cache")
    dataset = instantiate(cfg.dataset)
    return evaluate(cfg, dataset, dataset.cases(cfg.split))


class KeepEditor:
    """An editor that changes nothing (the loop and its bookkeeping without the network)."""

    def edit(self, image_block: np.ndarray, mask_block: np.ndarray, instruction: object) -> np.ndarray:
        return np.asarray(mask_block, bool)


def keep_editor() -> KeepEditor:
    return KeepEditor()


def test_every_method_config_composes_and_builds(tmp_path: Path) -> None:
    from neurorefiner.evaluation.methods import build_method, method_node

    cfg = _cfg(tmp_path)
    for path in sorted((CONF / "method").glob("*.yaml")):
        node = method_node(cfg, path.stem)
        method = build_method(node)
        assert callable(method), path.stem


def test_registry_overrides_reach_the_method_and_its_key(tmp_path: Path) -> None:
    from neurorefiner.evaluation.methods import build_method, method_key, method_node

    a = method_node(_cfg(tmp_path), "classical")
    b = method_node(_cfg(tmp_path, "method_registry.classical.max_gap=7"), "classical")
    assert build_method(b).params["max_gap"] == 7
    assert method_key(a) != method_key(b)


def test_a_method_only_in_conf_method_is_found(tmp_path: Path) -> None:
    from neurorefiner.evaluation.methods import method_node

    cfg = _cfg(tmp_path)
    OmegaConf.set_struct(cfg, False)
    del cfg.method_registry["classical"]
    assert method_node(cfg, "classical")._target_.endswith("Classical")


def test_rows_per_method_with_timing_and_edit_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = f"{__name__}.keep_editor"
    rows = _run(_cfg(tmp_path, "methods=[initial,classical,neurorefiner,gold_mask]",
                     "method_registry.neurorefiner.t_max=2", "~method_registry.neurorefiner.editor",
                     f"+method_registry.neurorefiner.editor._target_={target}",
                     "+method_registry.neurorefiner.editor._partial_=true"), tmp_path, monkeypatch)
    assert [r["method"] for r in rows] == ["initial", "classical", "neurorefiner", "gold_mask"]
    assert all(r["protocol"] == "root_seeded" and "F1" in r and r["seconds_method"] >= 0 for r in rows)
    nr = rows[2]
    assert {"edits_accepted", "edits_rejected", "edits_escalated", "rounds"} <= set(nr)
    traces = list((tmp_path / "out" / "traces" / "test" / "otsu").glob("neurorefiner-*/*.jsonl"))
    assert len(traces) == 1
    # a second run reads every row back: same numbers, nothing recomputed
    again = _run(_cfg(tmp_path, "methods=[initial,classical]"), tmp_path, monkeypatch)
    assert [r["F1"] for r in again] == [r["F1"] for r in rows[:2]]


def test_unknown_method_names_the_known_ones(tmp_path: Path) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.evaluation.methods import method_node

    with pytest.raises(InputError, match="unknown method 'nope'.*classical"):
        method_node(_cfg(tmp_path), "nope")


def test_cases_selects_volumes_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from neurorefiner.errors import InputError

    with pytest.raises(InputError, match="not in split"):
        _run(_cfg(tmp_path, "methods=[gold_mask]", "cases=[nope]"), tmp_path, monkeypatch)


TABLES = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml") if p.stem.startswith(("table_", "figure_")))


@pytest.mark.parametrize("name", TABLES)
def test_every_table_config_composes_and_names_known_methods(name: str) -> None:
    from neurorefiner.evaluation.methods import build_method, method_node

    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="evaluate", overrides=[f"experiment={name}", "paths.output_dir=/tmp/nr-test-out"])
    assert cfg.table.name == name and cfg.table.rows
    assert ("synthetic" in name) == cfg.dataset.name.startswith("synthetic")
    for method in cfg.methods:
        assert callable(build_method(method_node(cfg, str(method)))), method
    assert {r.method for r in cfg.table.rows} >= set(cfg.methods)
