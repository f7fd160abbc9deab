"""Algorithm 1 driven by scripted roles and a fake editor: retries, merging, escalation, ablations, the
cap per round, resume after a crash and replay of a trace."""

from __future__ import annotations

import numpy as np
import pytest

from neurorefiner.agents.editor import frame_around
from neurorefiner.agents.heuristic import HeuristicAdvisor, HeuristicInspector, HeuristicValidator
from neurorefiner.agents.loop import Agents, LoopSettings, PriorRun, run_loop
from neurorefiner.agents.replay import ReplayAdvisor, ReplayInspector, ReplayValidator
from neurorefiner.agents.roles import Advice, CallInfo, Defect, Editor, Flag, Inspection, Verdict
from neurorefiner.agents.trace import TraceWriter, read_trace
from neurorefiner.topology.blocks import betti0
from neurorefiner.topology.instructions import Instruction, parse_instruction


class RegionEditor:
    """Does what it is told inside the named cells: connect/repair fills bright voxels, remove clears."""

    def __init__(self) -> None:
        self.calls = 0

    def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
        self.calls += 1
        ins = parse_instruction(instruction)
        region = ins.region(mask_block.shape)
        out = np.asarray(mask_block, bool).copy()
        if ins.op == "remove":
            out[region] = False
        else:
            out[region & (image_block > 0.5)] = True
        return out


class WithReason:
    """An editor whose result carries a reason (what topology-aware decoding returns)."""

    class Result:
        def __init__(self, mask, reason):  # type: ignore[no-untyped-def]
            self.mask, self.reason = mask, reason

    def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
        return self.Result(RegionEditor().edit(image_block, mask_block, instruction), "did it")


class ScriptedInspector:
    name = "scripted"

    def __init__(self, rounds: list[dict[int, str]]) -> None:
        self.rounds = rounds

    def inspect(self, view):  # type: ignore[no-untyped-def]
        kinds = self.rounds[view.round] if view.round < len(self.rounds) else {}
        return Inspection({b: Flag(b, k) for b, k in kinds.items()}, CallInfo(self.name))


class ScriptedAdvisor:
    name = "scripted"

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def advise(self, ctx, flag, defect, step, history):  # type: ignore[no-untyped-def]
        if step.attempt >= len(self.lines):
            return None
        frame = frame_around(np.array(ctx.mask.shape) / 2, ctx.editor_size, ctx.mask.shape)
        return Advice(Instruction.parse(self.lines[step.attempt]), frame, CallInfo(self.name))


class ScriptedValidator:
    name = "scripted"

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers

    def validate(self, ctx, flag, defect, advice, before, after, step):  # type: ignore[no-untyped-def]
        ok = self.answers[step.attempt]
        return Verdict(ok, "ok" if ok else "no", CallInfo(self.name))


def cut_tube() -> tuple[np.ndarray, np.ndarray]:
    m = np.zeros((32, 64, 64), bool)
    m[25:28, 7:10, 2:63] = True
    image = np.where(m, 0.9, 0.05).astype(np.float32)
    m[25:28, 7:10, 47:55] = False
    return image, m


def test_scripted_loop_retries_until_accepted_and_stops_when_clean() -> None:
    image, mask = cut_tube()
    agents = Agents(ScriptedInspector([{0: "FN"}]),
                    ScriptedAdvisor(["Repair break at bottom-left-front", "Repair break at top-right-rear"]),
                    ScriptedValidator([False, True]))
    editor = RegionEditor()
    res = run_loop(image, mask, agents, editor, LoopSettings(block_size=64))
    assert editor.calls == 2
    assert res.counts["accepted"] == 1 and res.counts["rejected"] == 1 and res.converged
    assert res.mask[26, 8, 47:55].all()
    assert [r["flagged"] for r in res.rounds] == [1, 0]


def test_escalation_when_every_try_is_rejected() -> None:
    image, mask = cut_tube()
    lines = [f"Repair break at {w}-left-front" for w in ("top", "center", "bottom", "top", "center")]
    agents = Agents(ScriptedInspector([{0: "FN"}] * 5), ScriptedAdvisor(lines), ScriptedValidator([False] * 5))
    res = run_loop(image, mask, agents, RegionEditor(), LoopSettings(block_size=64))
    assert res.counts["escalated"] == 1 and 0 in res.escalated
    assert res.escalated[0][0]["attempts"] == 5
    assert (res.mask == mask).all()


class DecliningEditor:
    """An editor that finds every edit unsupported by the image: the mask unchanged, declined."""

    class Result:
        def __init__(self, mask):  # type: ignore[no-untyped-def]
            self.mask, self.reason, self.declined = mask, "the best bridge is over the limits", True

    def __init__(self) -> None:
        self.calls = 0

    def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
        self.calls += 1
        return self.Result(np.asarray(mask_block, bool).copy())


@pytest.mark.parametrize("retry_declined,calls", [(True, 5), (False, 1)])
def test_a_declined_edit_is_escalated_at_once_unless_declined_edits_are_retried(retry_declined: bool,
                                                                                 calls: int) -> None:
    image, mask = cut_tube()
    lines = [f"Repair break at {w}-left-front" for w in ("top", "center", "bottom", "top", "center")]
    agents = Agents(ScriptedInspector([{0: "FN"}]), ScriptedAdvisor(lines), ScriptedValidator([False] * 5))
    editor = DecliningEditor()
    res = run_loop(image, mask, agents, editor, LoopSettings(block_size=64, retry_declined=retry_declined))
    assert editor.calls == calls
    assert res.counts["escalated"] == 1 and res.escalated[0][0]["attempts"] == calls
    assert res.escalated[0][0]["reason"].startswith("the editor declined") != retry_declined


def test_editor_results_with_a_reason_are_accepted() -> None:
    image, mask = cut_tube()
    agents = Agents(ScriptedInspector([{0: "FN"}]), ScriptedAdvisor(["Repair break at top-right-rear"]),
                    ScriptedValidator([True]))
    res = run_loop(image, mask, agents, WithReason(), LoopSettings(block_size=64))
    assert res.counts["accepted"] == 1


def heuristic() -> Agents:
    return Agents(HeuristicInspector(), HeuristicAdvisor(), HeuristicValidator())


def noisy_tree() -> tuple[np.ndarray, np.ndarray]:
    image, mask = cut_tube()
    mask = np.concatenate([mask, mask], axis=2)           # two blocks of 64, each with a break
    image = np.concatenate([image, image], axis=2)
    mask[3:5, 55:57, 20:22] = True                        # a speck
    return image, mask


@pytest.mark.parametrize("roles", ["full", "no_validator", "inspector_only", "none"])
def test_ablations_run(roles: str) -> None:
    image, mask = noisy_tree()
    res = run_loop(image, mask, heuristic(), RegionEditor(), LoopSettings(block_size=64, roles=roles, t_max=3))
    assert res.mask.shape == mask.shape
    if roles == "full":  # both breaks joined, the speck gone (it straddles two cells: two removals)
        assert res.converged and res.counts["accepted"] == 4
        assert betti0(res.mask) == 2   # the two copies: no signal between them


@pytest.mark.parametrize("inputs", [["global_mip"], ["global_mip", "block_mips"]])
def test_inspector_inputs_ablation(inputs: list[str]) -> None:
    image, mask = noisy_tree()
    res = run_loop(image, mask, heuristic(), RegionEditor(),
                   LoopSettings(block_size=64, inspector_inputs=tuple(inputs), t_max=2))
    assert res.counts["accepted"] >= 1


def test_cap_per_round_keeps_ten_thousand_specks_finite() -> None:
    mask = np.zeros((8, 200, 200), bool)
    mask[::4, ::4, ::4] = True                             # 2 x 50 x 50 = 5,000 isolated voxels ...
    mask[1::4, 2::4, 2::4] = True                          # ... and 5,000 more
    image = np.where(mask, 0.3, 0.0).astype(np.float32)
    editor = RegionEditor()
    res = run_loop(image, mask, heuristic(), editor,
                   LoopSettings(block_size=128, t_max=2, max_defects_per_round=5, editor_size=(8, 16, 16)))
    assert [r["defects"] for r in res.rounds] == [5, 5]
    assert res.rounds[0]["waiting"] > 9000
    assert editor.calls <= 2 * 5 * 2


def _crashing(writer: TraceWriter, after_blocks: int):  # type: ignore[no-untyped-def]
    seen = {"blocks": 0}

    def emit(rec: dict) -> None:
        writer.write(rec)
        if rec.get("type") == "block_done":
            seen["blocks"] += 1
            if seen["blocks"] == after_blocks:
                raise KeyboardInterrupt("simulated crash")

    return emit


def test_resume_after_a_crash_skips_finished_blocks_and_gives_the_same_result(tmp_path) -> None:
    image, mask = noisy_tree()
    settings = LoopSettings(block_size=64, max_defects_per_round=2)   # the cap binds: order matters
    whole = run_loop(image, mask, heuristic(), RegionEditor(), settings)
    assert whole.rounds[0]["waiting"] == 1
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as w, pytest.raises(KeyboardInterrupt):
        run_loop(image, mask, heuristic(), RegionEditor(), settings, emit=_crashing(w, 1))
    with open(path, "a") as fh:
        fh.write('{"type": "decision", "torn')            # a line cut by kill -9
    records = read_trace(path)
    assert path.read_text().endswith("\n")
    editor = RegionEditor()
    with TraceWriter(path) as w:
        again = run_loop(image, mask, heuristic(), editor, settings, emit=w.write, prior=PriorRun(records))
    assert (again.mask == whole.mask).all()
    assert again.counts["reused_blocks"] == 1
    first_block_edits = sum(1 for r in records if r.get("role") == "editor")
    assert editor.calls == whole.counts["accepted"] + whole.counts["rejected"] - first_block_edits


def test_replay_repeats_the_recorded_decisions(tmp_path) -> None:
    image, mask = noisy_tree()
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as w:
        first = run_loop(image, mask, heuristic(), RegionEditor(), LoopSettings(block_size=64), emit=w.write)
    replay = Agents(ReplayInspector(path), ReplayAdvisor(path), ReplayValidator(path))
    again = run_loop(image, mask, replay, RegionEditor(), LoopSettings(block_size=64))
    assert (again.mask == first.mask).all() and again.counts == first.counts


def test_editor_protocol_matches_the_fake() -> None:
    assert isinstance(RegionEditor(), Editor)
    assert Defect("FP", ((1, 2, 3),)).key == "FP:1,2,3"


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        LoopSettings(roles="everything")
    with pytest.raises(ValueError):
        LoopSettings(inspector_inputs=("betti1",))


@pytest.mark.parametrize(("setting", "words"), [
    ({"t_max": 0}, "t_max=0 must be a whole number >= 1"), ({"block_size": 0}, "block_size"),
    ({"block_size": 12.5}, "block_size"), ({"block_depth": 0}, "block_depth"), ({"halo": -1}, "halo"),
    ({"editor_size": (0, 64, 64)}, "editor_size"), ({"editor_size": (32, 64)}, "editor_size"),
    ({"editor_size": 64}, "editor_size"), ({"concurrency": 0}, "concurrency"),
])
def test_sizes_out_of_range_are_refused_by_name(setting: dict, words: str) -> None:
    """A block size of 0, a negative halo or a two-number editor crop went into the loop and failed there."""
    with pytest.raises(ValueError, match=words) as exc:
        LoopSettings(**setting)
    assert exc.value.field == next(iter(setting))  # type: ignore[attr-defined]
    assert LoopSettings(block_depth=1, halo=0, editor_size=[8, 8, 8]).editor_size == (8, 8, 8)


def test_an_editor_taking_context_gets_the_frame_surroundings_and_its_reason_is_traced() -> None:
    from neurorefiner.agents.editor import LazyEditor

    seen = []

    class ContextEditor:
        def edit_result(self, image_block, mask_block, instruction, context=None):  # type: ignore[no-untyped-def]
            seen.append(None if context is None else context.shape)
            return WithReason.Result(RegionEditor().edit(image_block, mask_block, instruction), "joined 1 gap")

    image, mask = cut_tube()
    image, mask = np.pad(image, ((0, 0), (0, 64), (0, 64))), np.pad(mask, ((0, 0), (0, 64), (0, 64)))
    records: list[dict] = []
    agents = Agents(ScriptedInspector([{0: "FN"}]), ScriptedAdvisor(["Repair break at top-right-rear"]),
                    ScriptedValidator([True]))
    run_loop(image, mask, agents, LazyEditor(ContextEditor), LoopSettings(block_size=64), emit=records.append)
    assert seen == [(32 + 8, 64 + 8, 64 + 8)]
    assert [r["raw"] for r in records if r.get("role") == "editor"] == ["joined 1 gap"]


def test_resume_keeps_the_inspectors_priority_order_under_the_cap(tmp_path) -> None:
    mask = np.zeros((32, 64, 128), bool)
    mask[25:28, 7:10, 2:126] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    mask[25:28, 7:10, 20:32] = False           # block 0: the longer gap
    mask[25:28, 7:10, 90:96] = False           # block 1: the shorter gap, fixed first
    settings = LoopSettings(block_size=64, max_defects_per_round=1)
    whole = run_loop(image, mask, heuristic(), RegionEditor(), settings)
    assert whole.counts["accepted"] == 2
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path) as w, pytest.raises(KeyboardInterrupt):
        run_loop(image, mask, heuristic(), RegionEditor(), settings, emit=_crashing(w, 1))
    editor = RegionEditor()
    again = run_loop(image, mask, heuristic(), editor, settings, prior=PriorRun(read_trace(path)))
    assert (again.mask == whole.mask).all() and editor.calls == 1


def test_breaks_of_every_block_come_before_any_blocks_noise_under_the_cap() -> None:
    """Block 0 holds the shortest break and many specks, block 1 a longer break: with a cap of three both
    breaks are worked on in the first round (taking block 0 whole let its specks fill the cap)."""
    mask = np.zeros((32, 64, 128), bool)
    mask[25:28, 7:10, 2:126] = True
    image = np.where(mask, 0.9, 0.05).astype(np.float32)
    mask[25:28, 7:10, 30:33] = False           # block 0: the shorter gap
    mask[25:28, 7:10, 90:96] = False           # block 1: the longer gap
    for k in range(6):                         # block 0: six specks, well apart from the fibre
        mask[5:7, 40:42, 5 + 9 * k: 7 + 9 * k] = True
    records: list[dict] = []
    res = run_loop(image, mask, heuristic(), RegionEditor(),
                   LoopSettings(block_size=64, max_defects_per_round=3, t_max=1), emit=records.append)
    first = [r for r in records if r.get("role") == "advisor" and r["round"] == 0]
    assert sorted((r["block"], r["defect_kind"]) for r in first) == [(0, "FN"), (0, "FP"), (1, "FN")]
    assert res.rounds[0]["fixed"] >= 2
