"""Table 6 (ablating TopoRefineNet) is one evaluate line over trained variants, so its configs must agree:
every variant in ``conf/experiment/table_6/`` differs from the CAB reference only in what it ablates (else a
row would measure two things at once), writes under ``checkpoints/runs/table_6/<variant>/``, and the table
config ``table_6_toporefinenet`` scores exactly that file as the editor of its row. Composition only: fast.

The variants live in a sub-folder because ``tests/unit/test_methods_registry.py`` treats every top-level
``conf/experiment/table_*.yaml`` as an evaluation table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from neurorefiner.evaluation.methods import method_node
from neurorefiner.training.refiner import checkpoint_name, output_checkpoint

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
RUNS = ROOT / "checkpoints" / "runs" / "table_6"
TABLE = "table_6_toporefinenet"
REFERENCE = "cab"
# variant -> the resolved keys it may change relative to the CAB reference (besides where it writes)
ABLATES: dict[str, set[str]] = {
    "cab": set(),
    "adaln": {"model.net.fusion"},
    "cdp": {"model.net.fusion"},
    "hashing": {"text_encoder._target_", "text_encoder.name", "text_encoder.device"},
    "scratch_two_stage": {"stages.1.init_from", "stages.1.init_exclude"},
    "scratch_one_stage": {"stages.2.init_from", "stages.2.max_steps", "stages.2.datamodule.replay_prob"},
}
ONE_STAGE = {"scratch_one_stage"}  # trained in stage 2 only; the others run stage=1, then stage=2
VARIANTS = sorted(p.stem for p in (CONF / "experiment" / "table_6").glob("*.yaml"))


def _compose(config_name: str, overrides: list[str], monkeypatch: pytest.MonkeyPatch) -> DictConfig:
    monkeypatch.setenv("PROJECT_ROOT", str(ROOT))
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name=config_name, overrides=[*overrides, "paths.output_dir=/tmp/nr-test-out"])


def _variant(name: str, monkeypatch: pytest.MonkeyPatch, *extra: str) -> DictConfig:
    return _compose("train", [f"experiment=table_6/{name}", *extra], monkeypatch)


def _flat(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted key -> leaf value of a resolved config (lists compared whole)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), node


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    return dict(_flat(OmegaConf.to_container(cfg, resolve=True)))


def test_every_variant_is_known_and_the_reference_exists() -> None:
    assert set(VARIANTS) == set(ABLATES), "a table_6 variant without an ABLATES entry (or one missing)"


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_differs_from_the_reference_only_in_what_it_ablates(name: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ref, own = _resolved(_variant(REFERENCE, monkeypatch)), _resolved(_variant(name, monkeypatch))
    where = {"paths.checkpoint_dir", "stages.2.init_from"}  # a variant's own folder (and its stage 1 in it)
    differ = {k for k in ref.keys() | own.keys() if ref.get(k, "<absent>") != own.get(k, "<absent>")}
    assert differ - where <= ABLATES[name], f"{name} also changes {sorted(differ - where - ABLATES[name])}"
    assert own["paths.checkpoint_dir"] == str(RUNS / name)


def test_what_each_variant_ablates(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _variant(REFERENCE, monkeypatch)
    assert ref.model.net.fusion == "cab" and ref.stages["1"].init_exclude == ["fusion."]
    assert Path(ref.stages["1"].init_from) == ROOT / "checkpoints" / checkpoint_name(1)  # the shipped stage 1
    assert _variant("adaln", monkeypatch).model.net.fusion == "adaln"
    assert _variant("cdp", monkeypatch).model.net.fusion == "cdp"
    hashing = _variant("hashing", monkeypatch)
    assert hashing.text_encoder._target_.endswith("HashingEncoder") and hashing.text_encoder.dim == ref.text_encoder.dim
    assert _variant("scratch_two_stage", monkeypatch).stages["1"].init_from is None
    one = _variant("scratch_one_stage", monkeypatch).stages["2"]
    assert one.init_from is None and one.datamodule.replay_prob == 0
    assert one.max_steps == ref.stages["1"].max_steps + ref.stages["2"].max_steps  # the same total budget


@pytest.mark.parametrize("name", sorted(set(VARIANTS) - ONE_STAGE))
def test_two_stage_variant_chains_its_own_stage_1(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stage1 = output_checkpoint(_variant(name, monkeypatch, "stage=1"))
    assert stage1 == RUNS / name / checkpoint_name(1)
    assert Path(_variant(name, monkeypatch).stages["2"].init_from) == stage1


def test_table_rows_point_at_their_variants_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _compose("evaluate", [f"experiment={TABLE}"], monkeypatch)
    assert cfg.table.name == TABLE and cfg.split == "test" and cfg.segmenter == "unet3d"
    assert list(cfg.protocols) == ["root_seeded"] and cfg.table.protocol == "root_seeded"
    methods = [str(m) for m in cfg.methods]
    assert methods[:2] == ["initial", "neurorefiner"]  # initial masks and the shipped editor as reference
    assert method_node(cfg, "neurorefiner").editor.checkpoint is None
    assert sorted(methods[2:]) == sorted(f"t6_{v}" for v in VARIANTS)
    rows = {str(r.method) for r in cfg.table.rows}
    assert set(methods) <= rows and "t6_qwen3_4b" in rows - set(methods)  # listed, marked not run
    for variant in VARIANTS:
        node = method_node(cfg, f"t6_{variant}")
        want = output_checkpoint(_variant(variant, monkeypatch))
        assert Path(node.editor_overrides.checkpoint) == want, variant  # merged onto the editor node when built
        assert set(node.editor_overrides) == {"checkpoint"}, variant
        assert OmegaConf.to_container(node.loop) == OmegaConf.to_container(method_node(cfg, "neurorefiner").loop)


def test_run_sh_trains_every_variant_then_evaluates() -> None:
    lines = [ln for ln in (ROOT / "experiments" / TABLE / "run.sh").read_text().splitlines()
             if ln.startswith(".venv/bin/python")]
    for variant in VARIANTS:
        stages = ["stage=2"] if variant in ONE_STAGE else ["stage=1", "stage=2"]
        got = [ln.split()[-1] for ln in lines if f"experiment=table_6/{variant} " in ln]
        assert got == stages, f"{variant}: {got}"
    assert lines[-1].startswith(f".venv/bin/python evaluate.py experiment={TABLE}")


# --- the same ablation on a SYNTHETIC stand-in's own data (conf/experiment/table_6_synthetic/) ---
SYNTHETIC_TABLE = "table_6_toporefinenet_synthetic_zbfwb"
PRESET = "synthetic_zbfwb"
SYNTHETIC_VARIANTS = sorted(p.stem for p in (CONF / "experiment" / "table_6_synthetic").glob("*.yaml"))


def _synthetic_variant(name: str, monkeypatch: pytest.MonkeyPatch, *extra: str) -> DictConfig:
    return _compose("train", [f"experiment=table_6_synthetic/{name}", f"dataset={PRESET}", *extra], monkeypatch)


@pytest.mark.parametrize("name", VARIANTS)
def test_synthetic_variant_is_the_diadem_one_on_the_presets_shards(name: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert SYNTHETIC_VARIANTS == VARIANTS, "a table_6 variant without its stand-in twin (or one extra)"
    diadem = _resolved(_variant(name, monkeypatch, f"dataset={PRESET}"))
    own = _resolved(_synthetic_variant(name, monkeypatch))
    data = {"stages.1.datamodule.shards", "stages.2.datamodule.shards", "stages.2.datamodule.replay_shards",
            "stages.2.datamodule.segmenters"}
    where = {"paths.checkpoint_dir", "stages.2.init_from", "adapt_dir", "table_6_variant"}
    differ = {k for k in diadem.keys() | own.keys() if diadem.get(k, "<absent>") != own.get(k, "<absent>")}
    assert differ - where - data == set(), f"{name} also changes {sorted(differ - where - data)}"
    runs = ROOT / "checkpoints" / "runs" / "table_6_synthetic" / PRESET
    shards = ROOT / "checkpoints" / "refiners" / PRESET
    assert own["paths.checkpoint_dir"] == str(runs / name)
    assert own["stages.2.datamodule.shards"] == str(shards / "work" / "shards" / "stage2")
    assert own["stages.1.datamodule.shards"] == own["stages.2.datamodule.replay_shards"] == str(
        shards / "work" / "shards" / "stage1")
    if name not in ONE_STAGE:
        stage1 = output_checkpoint(_synthetic_variant(name, monkeypatch, "stage=1"))
        assert stage1 == runs / name / checkpoint_name(1)
        assert Path(own["stages.2.init_from"]) == stage1


@pytest.mark.parametrize(("table", "preset", "judge"), [
    (SYNTHETIC_TABLE, PRESET, f"checkpoints/refiners/{PRESET}/judge.json"),   # its chosen refiner (plans.json)
    ("table_6_toporefinenet_synthetic_cwmbs_noise", "synthetic_cwmbs_noise",
     "checkpoints/refiners/synthetic_cwmbs_noise/judge.json")])
def test_synthetic_table_scores_each_variant_in_the_presets_learned_loop(table: str, preset: str, judge: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _compose("evaluate", [f"experiment={table}"], monkeypatch)
    assert cfg.dataset.name == preset and cfg.split == "test" and cfg.table.name == table
    assert "SYNTHETIC" in cfg.table.title
    reference = method_node(cfg, "neurorefiner")
    assert reference.agent.inspector._target_.endswith("LearnedInspector")
    assert Path(reference.agent.inspector.judge) == ROOT / judge  # the preset's own refiner
    for variant in VARIANTS:
        node = method_node(cfg, f"t6_{variant}")
        want = output_checkpoint(_compose("train", [f"experiment=table_6_synthetic/{variant}", f"dataset={preset}"],
                                          monkeypatch))
        assert Path(node.editor_overrides.checkpoint) == want, variant
        assert OmegaConf.to_container(node.loop) == OmegaConf.to_container(reference.loop)
        assert OmegaConf.to_container(node.agent) == OmegaConf.to_container(reference.agent), variant
    assert {str(r.method) for r in cfg.table.rows} >= set(map(str, cfg.methods))


def test_the_raw_table_is_the_synthetic_one_with_every_editor_decoding_raw(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = _compose("evaluate", [f"experiment={SYNTHETIC_TABLE}"], monkeypatch)
    raw = _compose("evaluate", [f"experiment={SYNTHETIC_TABLE}_raw"], monkeypatch)
    assert list(raw.methods) == list(topo.methods)
    assert raw.table.name == f"{SYNTHETIC_TABLE}_raw"
    assert {str(r.method) for r in raw.table.rows} == set(map(str, raw.methods))
    for name in (m for m in map(str, raw.methods) if m != "initial"):
        r, t = method_node(raw, name), method_node(topo, name)
        assert r.editor_overrides.decoding_mode == "raw", name
        assert r.editor_overrides.get("checkpoint") == t.get("editor_overrides", {}).get("checkpoint"), name
        assert OmegaConf.to_container(r.loop) == OmegaConf.to_container(t.loop), name


def test_the_editor_decodes_raw_when_told_and_names_a_bad_mode() -> None:
    from neurorefiner.agents.editor import load_topo_refiner
    from neurorefiner.errors import InputError

    assert load_topo_refiner(decoding_mode="raw").decoding == "raw"
    assert load_topo_refiner().decoding == "topology"
    with pytest.raises(InputError, match="decoding_mode 'rough'"):
        load_topo_refiner(decoding_mode="rough")
