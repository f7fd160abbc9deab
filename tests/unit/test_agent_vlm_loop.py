"""The vlm roles in the whole loop, against the fake OpenAI-compatible server (neurorefiner.agents.vlm.testing):
answers outside the grammar are failed tries kept verbatim and asked again with feedback; feedback speaks the
model's frame; the Inspector sees every block within the image limit; every request is kept by hash beside
the trace and can be asked again; a replay repeats the run; faults end in a retry, a fallback or exit 2; the
Table 4 rows ask their own models. A stand-in editor keeps each test to a second or two."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.agents.fallback import WithFallback
from neurorefiner.agents.heuristic import HeuristicAdvisor, HeuristicInspector, HeuristicValidator
from neurorefiner.agents.loop import Agents, LoopSettings, run_loop
from neurorefiner.agents.replay import ReplayAdvisor, ReplayInspector, ReplayValidator
from neurorefiner.agents.roles import GlobalView
from neurorefiner.agents.trace import TraceWriter, load_requests, read_trace
from neurorefiner.agents.vlm import ChatClient, VLMAdvisor, VLMInspector, VLMValidator
from neurorefiner.agents.vlm.audit import reask, recorded_requests
from neurorefiner.agents.vlm.testing import Answer, Body, FakeVLM, Hang, Status
from neurorefiner.topology.blocks import grid_blocks
from neurorefiner.topology.instructions import GRAMMAR, parse_instruction

ROOT = Path(__file__).resolve().parents[2]
FIGURE_2 = "Connect the neurons located in the middle upper posterior region"


class StubEditor:
    """Deterministic: paints the named region where the image is bright (connect/repair), clears it (remove)."""

    def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
        ins = parse_instruction(instruction)
        out = np.asarray(mask_block, bool).copy()
        region = ins.region(out.shape)
        if ins.op == "remove":
            out[region] = False
        else:
            out[region & (np.asarray(image_block) > 0.5)] = True
        return out


def stub_editor(**_: object) -> StubEditor:
    """For ``editor._target_`` in composed configs (``_partial_`` node)."""
    return StubEditor()


def scene() -> tuple[np.ndarray, np.ndarray]:
    """One fibre cut in two inside block 0 of a 2 x 2 grid of 32-blocks (16 x 64 x 64)."""
    m = np.zeros((16, 64, 64), bool)
    m[7:10, 14:17, 2:12] = True
    m[7:10, 14:17, 18:30] = True
    image = np.where(m, 0.9, 0.05).astype(np.float32)
    image[7:10, 14:17, 12:18] = 0.9
    return image, m


def client(url: str, **kw) -> ChatClient:  # type: ignore[no-untyped-def]
    kw = {"timeout": 5.0, "connect_timeout": 1.0, "max_retries": 1, "backoff": 0.0, "deadline": 10.0, **kw}
    return ChatClient("fake-vl", url, api_key="k", **kw)


def vlm_agents(url: str, **kw) -> Agents:  # type: ignore[no-untyped-def]
    c = client(url, **kw)
    return Agents(VLMInspector(c), VLMAdvisor(c), VLMValidator(c))


SETTINGS = LoopSettings(block_size=32, t_max=2, editor_size=(16, 32, 32))


def run(agents: Agents, path: Path, settings: LoopSettings = SETTINGS):  # type: ignore[no-untyped-def]
    image, m = scene()
    with TraceWriter(path) as w:
        return run_loop(image, m, agents, StubEditor(), settings, emit=w.write)


def decisions(path: Path, role: str) -> list[dict]:
    return [r for r in read_trace(path) if r.get("type") == "decision" and r["role"] == role]


def test_an_answer_outside_the_grammar_is_a_failed_try_kept_and_quoted_back(tmp_path: Path) -> None:
    """Before: escalated after 0 tries, raw=None. Now: one failed try, the answer verbatim in the trace, the
    next request quotes it with the grammar, and the paper's Figure 2 wording is read as a repair."""
    nonsense = "I would make the neuron nicer there."
    with FakeVLM({"advisor": [Answer(nonsense), Answer(FIGURE_2)]}) as server:
        run(vlm_agents(server.url), tmp_path / "trace.jsonl")
        asked = [s.prompt for s in server.requests("advisor")]
    first, second = decisions(tmp_path / "trace.jsonl", "advisor")[:2]
    assert first["decision"] is None and first["raw"] == nonsense and "no operation" in first["unreadable"]
    assert nonsense in asked[1] and GRAMMAR in asked[1] and nonsense not in asked[0]
    assert second["decision"]["said"] == "Repair break at top-center-rear" and second["raw"] == FIGURE_2
    done = [r for r in read_trace(tmp_path / "trace.jsonl") if r.get("type") == "block_done"][0]
    assert done["outcome"]["statuses"][0]["status"] == "fixed" and done["outcome"]["statuses"][0]["attempts"] == 2


def test_a_model_that_never_answers_in_the_grammar_is_escalated_after_its_tries(tmp_path: Path) -> None:
    t_max = 3
    with FakeVLM({"advisor": [Answer("{\"instruction\": \"fix it\"}")] * 20}) as server:
        result = run(vlm_agents(server.url), tmp_path / "t.jsonl", LoopSettings(block_size=32, t_max=t_max,
                                                                               editor_size=(16, 32, 32)))
    (status,) = result.escalated[0]
    assert status["attempts"] == t_max and "not an instruction" in status["reason"]
    assert all(r["raw"] == '{"instruction": "fix it"}' for r in decisions(tmp_path / "t.jsonl", "advisor"))


def test_feedback_quotes_rejected_tries_in_the_block_frame_the_model_saw(tmp_path: Path) -> None:
    said = "Repair break at bottom-right-center"
    reject = Answer(json.dumps({"decision": "REJECT", "reason": "nothing joined"}))
    with FakeVLM({"advisor": [Answer(json.dumps({"instruction": said}))], "validator": [reject]}) as server:
        run(vlm_agents(server.url), tmp_path / "t.jsonl")
        asked = [s.prompt for s in server.requests("advisor")]
    first = decisions(tmp_path / "t.jsonl", "advisor")[0]["decision"]
    assert first["said"] == said and first["instruction"] != said        # the editor's frame differs
    assert f'"{said}" was tried and rejected: nothing joined' in asked[1]
    assert first["instruction"] not in asked[1]


def test_every_request_is_kept_once_by_hash_and_can_be_asked_again(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    with FakeVLM() as server:
        run(vlm_agents(server.url), path)
        sent = server.requests()
    records = [r for r in read_trace(path) if r.get("requests")]
    refs = [name for r in records for q in r["requests"] for name in [q["prompt"], *q["images"]]]
    assert len(sent) == sum(len(r["requests"]) for r in records)          # every request is in the trace
    assert len(set(refs)) < len(refs)                                    # the same picture stored once
    assert all((tmp_path / name).is_file() for name in refs)
    (first,) = load_requests(path, records[0])
    assert first["prompt"] == sent[0].prompt and first["images"][0].startswith(b"\x89PNG")
    assert first["answer"] == records[0]["raw"]
    with FakeVLM(model="other-vl") as other:
        rows = reask(path, client(other.url), roles=["validator"])
    assert rows and all(r["new_answer"] and r["role"] == "validator" for r in rows)
    assert len(list(recorded_requests(path))) == len(sent)


def many_blocks_view() -> GlobalView:
    """40 blocks of 16 x 16, 10 of them holding a fibre with a gap (2 components each)."""
    m = np.zeros((8, 80, 128), bool)
    for i in range(10):
        y, x = 16 * (i // 8) + 8, 16 * (i % 8)
        m[4, y, x + 1: x + 6] = m[4, y, x + 9: x + 15] = True
    return GlobalView(0, m.astype(np.float32), m, grid_blocks(m.shape, 16))


@pytest.mark.parametrize("mode", ["mosaic", "calls"])
def test_the_inspector_sees_every_block_it_judges_within_the_image_limit(mode: str) -> None:
    """Before: only the 3 blocks with most components had a picture. Mosaics show all 10 in one request;
    several calls need ceil(10 / 3) requests for the same flags."""
    view = many_blocks_view()
    with FakeVLM() as server:
        t0 = time.perf_counter()
        insp = VLMInspector(client(server.url), block_views=mode, max_images=4).inspect(view)
        seconds = time.perf_counter() - t0
        sent = server.requests("inspector")
    nonempty = [b.id for b in view.blocks if view.mask[b.slices].any()]
    assert sorted(insp.flags) == nonempty
    assert all(s.images <= 4 for s in sent)
    shown = " ".join(s.prompt for s in sent)
    if mode == "mosaic":
        assert len(sent) == 1 and sent[0].images == 2
        assert f"the masks of blocks {', '.join(map(str, nonempty))}" in shown
    else:
        assert len(sent) == 4
        assert all(f"the mask of block {b}," in shown for b in nonempty)
    print(f"inspector, {mode}: {len(sent)} request(s), {sum(s.images for s in sent)} pictures, {seconds:.2f} s")


def test_a_mosaic_too_big_for_one_picture_is_split_and_ids_stay_with_their_tiles() -> None:
    from neurorefiner.agents.vlm.pictures import block_mosaics

    view = many_blocks_view()
    nonempty = [b for b in view.blocks if view.mask[b.slices].any()]
    pictures = block_mosaics(view.mask, nonempty, max_mosaics=2, per_mosaic=4)
    assert [ids for _, ids in pictures] == [[b.id for b in nonempty[:5]], [b.id for b in nonempty[5:]]]
    assert all(png.startswith(b"\x89PNG") for png, _ in pictures)


def test_a_replay_repeats_a_vlm_run_without_the_server(tmp_path: Path) -> None:
    path = tmp_path / "vlm.jsonl"
    with FakeVLM({"advisor": [Answer("no idea"), Answer(FIGURE_2)]}) as server:
        first = run(vlm_agents(server.url), path)
    replay = Agents(ReplayInspector(path), ReplayAdvisor(path), ReplayValidator(path))
    again = run(replay, tmp_path / "replay.jsonl")
    assert np.array_equal(first.mask, again.mask) and first.counts == again.counts
    assert first.counts["rejected"] >= 1                                  # the failed try was replayed too


@pytest.mark.parametrize("fault", [Status(500), Hang(3.0), Body("<html>bad gateway</html>"),
                                   Answer('{"flags": "block 0 looks broken"}')],
                         ids=["http_500", "hang", "not_json", "schema_violation"])
def test_each_fault_once_is_retried_and_the_run_goes_on(tmp_path: Path, fault) -> None:  # type: ignore[no-untyped-def]
    with FakeVLM({"inspector": [fault]}) as server:
        t0 = time.perf_counter()
        result = run(vlm_agents(server.url, timeout=0.5, deadline=3.0), tmp_path / "t.jsonl")
        assert time.perf_counter() - t0 < 10
        assert len(server.requests("inspector")) >= 2
    assert result.counts["accepted"] >= 1
    assert decisions(tmp_path / "t.jsonl", "inspector")[0]["tokens"]["tries"] == 2


def test_a_server_that_keeps_failing_falls_back_with_short_timeouts(tmp_path: Path) -> None:
    with FakeVLM(always=Hang(5.0)) as server:
        c = client(server.url, timeout=0.3, connect_timeout=0.3, deadline=1.0)
        agents = Agents(WithFallback(VLMInspector(c), HeuristicInspector()),
                        WithFallback(VLMAdvisor(c), HeuristicAdvisor()),
                        WithFallback(VLMValidator(c), HeuristicValidator()))
        t0 = time.perf_counter()
        run(agents, tmp_path / "t.jsonl")
        assert time.perf_counter() - t0 < 8
    first = decisions(tmp_path / "t.jsonl", "inspector")[0]
    assert first["backend"] == "heuristic" and "did not answer" in " ".join(first["notes"])


def test_an_unreadable_inspection_keeps_the_answers_in_the_trace(tmp_path: Path) -> None:
    """Without fallback the run stops (one line, exit 2 in refine.py), the answers in a failed_call record;
    with fallback the heuristic answers and the model's words are noted."""
    from neurorefiner.agents.roles import RoleError

    words = [Answer("The neuron looks fine to me."), Answer("Still fine.")]
    with FakeVLM({"inspector": list(words)}) as server, pytest.raises(RoleError, match="no JSON"):
        run(vlm_agents(server.url), tmp_path / "a.jsonl")
    (failed,) = [r for r in read_trace(tmp_path / "a.jsonl") if r.get("type") == "failed_call"]
    assert [q["answer"] for q in failed["requests"]] == ["The neuron looks fine to me.", "Still fine."]
    with FakeVLM({"inspector": list(words)}) as server:
        c = client(server.url)
        agents = Agents(WithFallback(VLMInspector(c), HeuristicInspector()), VLMAdvisor(c), VLMValidator(c))
        run(agents, tmp_path / "b.jsonl")
        assert len(server.requests("inspector")) == 3   # the next pass asks the model again: the server works
    first = decisions(tmp_path / "b.jsonl", "inspector")[0]
    assert first["backend"] == "heuristic" and "Still fine." in " ".join(first["notes"])


def compose_refine(tmp_path: Path, *overrides: str, agent: str = "vlm"):  # type: ignore[no-untyped-def]
    from hydra import compose, initialize_config_dir

    image, m = scene()
    from neurorefiner.io import write_volume

    write_volume(tmp_path / "img.tif", (image * 255).astype(np.uint8))
    write_volume(tmp_path / "msk.tif", m)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose(config_name="refine", overrides=[
            f"image={tmp_path / 'img.tif'}", f"mask={tmp_path / 'msk.tif'}", f"out={tmp_path / 'out'}",
            f"agent={agent}", "~tracing", "progress=false", "t_max=2", "loop.block_size=32",
            "loop.editor_size=[16,32,32]",
            "editor._target_=tests.unit.test_agent_vlm_loop.stub_editor", *overrides])


def test_refine_against_the_fake_server_then_replayed_without_it_gives_the_same_mask(tmp_path: Path) -> None:
    from neurorefiner.io import read_volume
    from neurorefiner.refine.entry import run as refine_run

    with FakeVLM({"advisor": [Answer("hmm"), Answer(FIGURE_2)]}) as server:
        summary = refine_run(compose_refine(tmp_path, f"agent.base_url={server.url}"))
    out = tmp_path / "out"
    first = read_volume(out / "refined_mask.tif").load()
    (out / "trace.jsonl").rename(tmp_path / "vlm.jsonl")
    again = refine_run(compose_refine(tmp_path, f"agent.trace={tmp_path / 'vlm.jsonl'}", "overwrite=true",
                                      agent="replay"))
    assert np.array_equal(read_volume(out / "refined_mask.tif").load(), first)
    assert {k: again[k] for k in ("accepted", "rejected")} == {k: summary[k] for k in ("accepted", "rejected")}
    assert summary["rejected"] >= 1 and (out / "report.html").is_file()


@pytest.mark.parametrize("always", [Status(500), Hang(5.0)], ids=["http_500", "hang"])
def test_refine_with_a_failing_server_ends_in_one_line_and_exit_2(tmp_path: Path, capsys, always) -> None:  # type: ignore[no-untyped-def]
    from neurorefiner.refine.entry import run as refine_run

    with FakeVLM(always=always) as server:
        cfg = compose_refine(tmp_path, f"agent.base_url={server.url}", "agent.client.timeout=0.3",
                             "agent.client.connect_timeout=0.3", "agent.client.deadline=1.5", "agent.client.backoff=0")
        t0 = time.perf_counter()
        with pytest.raises(SystemExit) as done:
            refine_run(cfg)
        assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(err.splitlines()) == 1 and "did not answer" in err and "Traceback" not in err


def test_table_4_rows_ask_their_own_models_at_the_given_server() -> None:
    """Before: every row's client asked the default model (the override came after ${agent.model} was
    resolved), so Table 4 would have compared Qwen3-VL-8B with itself three times."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.evaluation.methods import build_method, method_node

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="evaluate", overrides=["experiment=table_4_foundation_model",
                                                         "agent.base_url=http://gpu-host:8000/v1"])
    want = {"nr_internvl3_8b": "OpenGVLab/InternVL3-8B", "nr_qwen2_5_vl_7b": "Qwen/Qwen2.5-VL-7B-Instruct",
            "nr_qwen3_vl_8b": "Qwen/Qwen3-VL-8B-Instruct"}
    for name, model in want.items():
        agent = build_method(method_node(cfg, name)).agent_cfg
        assert agent["client"]["model"] == model and agent["client"]["base_url"] == "http://gpu-host:8000/v1"


def test_evaluate_with_a_server_that_dies_mid_run_ends_in_one_line_and_exit_2(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Table 4 checks the server before it starts; one that dies later used to end evaluate.py in a traceback."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.agents.vlm import AgentServerError
    from neurorefiner.evaluation import entry, runner

    def dies(*_: object, **__: object) -> list:
        raise AgentServerError("the model server at http://gpu-host:8000/v1 did not answer after 2 tries (HTTP 500)")

    monkeypatch.setattr(runner, "evaluate", dies)
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="evaluate", overrides=["experiment=table_4_foundation_model"])
    with pytest.raises(SystemExit) as done:
        entry.run(cfg)
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(err.splitlines()) == 1 and "did not answer" in err


@pytest.mark.parametrize("answer,expected", [
    (FIGURE_2, "Repair break at top-center-rear"),                                   # prose, no JSON
    ('Instruction: "Repair break at top-left-rear"', "Repair break at top-left-rear"),  # key-value text
    ('{"Instruction": "Remove the isolated noise located in the left upper front"}',
     "Remove isolated noise at top-left-front"),
    ("I see a gap in the middle.\nConnect neuron from top-left-rear to bottom-left-front",
     "Connect neuron from top-left-rear to bottom-left-front"),                     # the last line that parses
    ('{"reasoning": "a break at the top left", "instruction": "fix it"}', None),      # its reasoning is not read
    ("", None),
])
def test_read_instruction_is_tolerant_only_where_the_meaning_is_clear(answer: str, expected: str | None) -> None:
    from neurorefiner.agents.vlm.roles import read_instruction

    said, why, _ = read_instruction(answer)
    assert (said.format() if said else None) == expected and (bool(why) == (expected is None))
