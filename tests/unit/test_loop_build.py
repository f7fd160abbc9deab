"""One loop builder for refine.py and the evaluation method: one place for the loop's defaults, one editor
factory, one trace header, and Table 3's switch with one meaning per name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from neurorefiner.agents.loop import LoopSettings
from neurorefiner.agents.trace import read_trace
from neurorefiner.evaluation.methods import NeuroRefiner, build_method, method_node
from neurorefiner.refine.run import RUN_KEYS, RefineRun, editor_factory
from tests.unit.test_agent_loop import RegionEditor, noisy_tree

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
HEURISTIC = OmegaConf.load(CONF / "agent" / "heuristic.yaml")


def region_editor(**_: object) -> RegionEditor:
    return RegionEditor()


FAKE_EDITOR = {"_target_": "tests.unit.test_loop_build.region_editor", "_partial_": True}


def test_the_loop_yaml_spells_loop_settings_defaults() -> None:
    defaults = LoopSettings(halo=None).as_dict()
    defaults.pop("t_max")
    defaults["halo"] = None   # LoopSettings fills halo from editor_size; the YAML leaves it null for that
    assert OmegaConf.to_container(OmegaConf.load(CONF / "loop" / "default.yaml")) == defaults


def compose_cfg(name: str, overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose(config_name=name, overrides=[*overrides, "paths.output_dir=/tmp/nr-unused"])


def test_refine_and_the_method_compose_the_same_loop_node() -> None:
    refine = compose_cfg("refine", ["image=a.tif", "mask=b.tif", "loop.roles=none"])
    evaluate = compose_cfg("evaluate", ["experiment=table_3_agents"])
    assert refine.loop.roles == "none"
    ours = OmegaConf.to_container(evaluate.method_registry.neurorefiner.loop)
    assert ours == {**OmegaConf.to_container(refine.loop), "roles": "full"}


def test_table_3_rows_are_one_roles_value_each_and_no_advisor_switch_is_left() -> None:
    cfg = compose_cfg("evaluate", ["experiment=table_3_agents"])
    roles = {name: node.loop.roles for name, node in cfg.method_registry.items() if "loop" in node}
    assert roles == {"neurorefiner": "full", "nr_no_agents": "none", "nr_inspector_only": "inspector_only",
                     "nr_inspector_validator": "no_advisor", "nr_inspector_advisor": "no_validator"}
    assert all("advisor" not in node for node in cfg.method_registry.values())
    method = build_method(method_node(cfg, "nr_inspector_validator"))
    assert method.settings.roles == "no_advisor"


def test_no_advisor_is_the_inspectors_instruction_validated() -> None:
    image, mask = noisy_tree()
    loop = RefineRun.build(HEURISTIC, {"block_size": 64, "roles": "no_advisor"}, FAKE_EDITOR, t_max=3)
    seen = []
    validate = loop.agents.validator.validate

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(args[3].info.backend)
        return validate(*args, **kwargs)

    loop.agents.validator.validate = spy  # type: ignore[method-assign]
    loop.run(image, mask)
    assert seen and set(seen) == {"inspector_only"}


def test_editor_factory_builds_a_target_or_the_shipped_loader() -> None:
    assert isinstance(editor_factory(FAKE_EDITOR)(), RegionEditor)
    with pytest.raises(Exception, match="checkpoint|No such file|not found"):
        editor_factory({"checkpoint": "/nonexistent/editor.ckpt"})()


def test_refine_and_the_method_write_one_trace_format(tmp_path: Path) -> None:
    from neurorefiner.io import read_mask, read_volume, write_volume
    from neurorefiner.refine.local import refine_volume

    image, mask = noisy_tree()
    write_volume(tmp_path / "img.tif", (image * 255).astype(np.uint8))
    write_volume(tmp_path / "msk.tif", mask)
    cfg = compose_cfg("refine", [f"image={tmp_path / 'img.tif'}", f"mask={tmp_path / 'msk.tif'}",
                                 f"out={tmp_path / 'o'}", "loop.block_size=64", "t_max=3", "progress=false",
                                 "report=false", "~tracing", "agent=heuristic",
                                 f"editor._target_={FAKE_EDITOR['_target_']}"])
    refine_volume(read_volume(cfg.image), read_mask(cfg.mask), cfg)
    refined = read_trace(tmp_path / "o" / "trace.jsonl")

    method = NeuroRefiner(HEURISTIC, cfg.loop, cfg.editor, t_max=3, trace_dir=str(tmp_path / "traces"))
    img = read_volume(cfg.image).normalized()
    got = method(img, mask, type("Case", (), {"name": "c1"})())
    evaluated = read_trace(tmp_path / "traces" / "c1.jsonl")

    a, b = refined[0], evaluated[0]
    assert a.keys() == b.keys() and set(RUN_KEYS) <= a.keys()
    assert {k: a[k] for k in RUN_KEYS} == {k: b[k] for k in RUN_KEYS}      # same volume, same run
    assert a["inputs"]["image"].endswith("img.tif") and b["inputs"] == {"case": "c1"}
    assert refined[-1]["type"] == evaluated[-1]["type"] == "done"
    assert refined[-1]["mask_hash"] == evaluated[-1]["mask_hash"]
    assert (read_volume(tmp_path / "o" / "refined_mask.tif").load() > 0).tolist() == got.tolist()


def test_bad_loop_settings_fail_when_the_method_is_built() -> None:
    with pytest.raises(ValueError, match="roles"):
        NeuroRefiner(HEURISTIC, {"roles": "advisor_only"}, FAKE_EDITOR)


def test_a_judge_object_reaches_the_learned_inspector_through_the_run() -> None:
    """The ceilings study hands a judge trained in the same process to the run builder (a dataclass, which
    Hydra would otherwise read as config)."""
    from neurorefiner.agents.learned.judge import Judge
    from neurorefiner.agents.learned.roles import shipped_judge

    judge = Judge.load(shipped_judge())
    run = RefineRun.build(OmegaConf.load(CONF / "agent" / "learned.yaml"), None, FAKE_EDITOR,
                          role_kwargs={"inspector": {"judge": judge}})
    assert run.agents.inspector.judge is judge
    assert run.with_spacing((1.0, 0.33, 0.33), "test").spacing == (1.0, 0.33, 0.33)


def test_the_run_resolves_the_voxel_size_of_its_inputs(tmp_path: Path) -> None:
    """refine.py, its in-memory run and the Dask run each chose the spacing themselves; the run does it now."""
    import tifffile

    from neurorefiner.errors import InputError
    from neurorefiner.io import read_mask, read_volume, write_volume

    image, mask = noisy_tree()
    write_volume(tmp_path / "img.tif", (image * 255).astype(np.uint8), spacing=(2.0, 0.5, 0.5))
    write_volume(tmp_path / "msk.tif", mask, spacing=(2.0, 0.5, 0.5))
    tifffile.imwrite(tmp_path / "plain.tif", mask.astype(np.uint8))   # no voxel size in its metadata
    cfg = compose_cfg("refine", ["image=a.tif", "mask=b.tif", "agent=heuristic",
                                 f"editor._target_={FAKE_EDITOR['_target_']}"])
    img, msk = read_volume(tmp_path / "img.tif"), read_mask(tmp_path / "msk.tif")
    run = RefineRun.from_config(cfg, img, msk)
    assert run.spacing == (2.0, 0.5, 0.5) and "msk.tif" not in run.spacing_from and "img.tif" in run.spacing_from
    given = RefineRun.from_config(OmegaConf.merge(cfg, {"spacing": [1.0, 0.25, 0.25]}), img, msk)
    assert given.spacing == (1.0, 0.25, 0.25) and given.spacing_from == "argument"
    with pytest.raises(InputError, match="plain.tif"):
        RefineRun.from_config(cfg, read_volume(tmp_path / "plain.tif"), read_mask(tmp_path / "plain.tif"))


def test_a_run_travels_to_another_process_as_its_recipe_settings_and_spacing() -> None:
    """The Dask workers receive the driver's run (no config read, no setting resolved there): the same header,
    the same edits."""
    import pickle

    image, mask = noisy_tree()
    run = RefineRun.build(HEURISTIC, {"block_size": 64}, FAKE_EDITOR, t_max=2).with_spacing((2.0, 0.5, 0.5), "test")
    arrived = pickle.loads(pickle.dumps(run))
    assert arrived.settings == run.settings and (arrived.spacing, arrived.spacing_from) == ((2.0, 0.5, 0.5), "test")
    assert arrived.header(image, mask) == run.header(image, mask)
    assert arrived.agents is not run.agents      # rebuilt where it landed
    assert np.array_equal(arrived.run(image, mask).mask, run.run(image, mask).mask)
    with pytest.raises(TypeError, match="cannot be sent"):
        pickle.dumps(RefineRun.build(HEURISTIC, None, editor_object=RegionEditor()))


def test_the_method_builds_its_run_once_for_all_volumes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluation method rebuilt its run for every volume: the judge was read again each time."""
    from neurorefiner.agents.learned.judge import Judge

    reads = []
    load = Judge.load.__func__  # type: ignore[attr-defined]

    def counted(cls, path):  # type: ignore[no-untyped-def]
        reads.append(path)
        return load(cls, path)

    monkeypatch.setattr(Judge, "load", classmethod(counted))
    method = NeuroRefiner(OmegaConf.load(CONF / "agent" / "learned.yaml"), None, FAKE_EDITOR)
    empty = np.zeros((4, 8, 8), bool)
    for name, spacing in (("a", (1.0, 0.5, 0.5)), ("b", (2.0, 1.0, 1.0))):
        method(np.zeros((4, 8, 8), np.float32), empty, type("Case", (), {"name": name})(), spacing=spacing)
    assert len(reads) == 1
    assert method.run_for((2.0, 1.0, 1.0)).spacing == (2.0, 1.0, 1.0) and len(reads) == 1


def test_each_volume_of_the_method_asks_a_fallen_back_server_again() -> None:
    """Built once for every volume, a run whose model server failed on one volume would give every later volume
    to the fallback; a run built per volume asked the server again, and so does each volume's run now."""
    from neurorefiner.agents.fallback import WithFallback

    method = NeuroRefiner(OmegaConf.merge(HEURISTIC, {"fallback": "heuristic"}), None, FAKE_EDITOR)
    first = method.run_for((1.0, 1.0, 1.0))
    assert isinstance(first.agents.inspector, WithFallback)
    first.agents.inspector.failure = "the server at http://127.0.0.1:9/v1 did not answer"
    again = method.run_for((1.0, 1.0, 1.0))
    assert again.agents.inspector.failure is None
    assert again.agents.inspector.primary is first.agents.inspector.primary   # the same roles, not rebuilt
    assert again.editor is first.editor
