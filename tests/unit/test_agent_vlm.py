"""The vlm roles against a real local HTTP server speaking the OpenAI chat API (the shipped fake server):
good and malformed JSON, hallucinated block ids, timeouts, 500s, refused connections, a server
without structured output; and the API key never reaching the trace."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import numpy as np
import pytest

from neurorefiner.agents.fallback import WithFallback
from neurorefiner.agents.heuristic import HeuristicInspector
from neurorefiner.agents.loop import Agents, LoopSettings, run_loop
from neurorefiner.agents.prompts import PromptError, load_prompt
from neurorefiner.agents.roles import BlockContext, Defect, Flag, GlobalView, Step
from neurorefiner.agents.trace import TraceWriter
from neurorefiner.agents.vlm import AgentServerError, ChatClient, VLMAdvisor, VLMInspector, VLMValidator
from neurorefiner.agents.vlm.parsing import AnswerParseError, parse_json
from neurorefiner.agents.vlm.testing import Answer, FakeVLM, Hang, NoSchema, Status
from neurorefiner.topology.blocks import grid_blocks

KEY = "sk-test-very-secret-4242"


@pytest.fixture()
def server() -> Iterator[FakeVLM]:
    """The shipped fake server (neurorefiner.agents.vlm.testing); each test scripts the inspector's replies."""
    with FakeVLM() as s:
        yield s


def client(url: str, **kw) -> ChatClient:  # type: ignore[no-untyped-def]
    kw = {"timeout": 5.0, "max_retries": 2, "backoff": 0.0, **kw}
    return ChatClient("test-vl", url, api_key=KEY, **kw)


def scene() -> tuple[np.ndarray, np.ndarray]:
    m = np.zeros((16, 64, 64), bool)
    m[7:10, 30:33, 2:28] = True
    m[7:10, 30:33, 36:62] = True
    image = np.where(m, 0.9, 0.05).astype(np.float32)
    image[7:10, 30:33, 28:36] = 0.9
    return image, m


def view() -> GlobalView:
    image, m = scene()
    return GlobalView(0, image, m, grid_blocks(m.shape, 32))


def test_good_json_flags_blocks_with_images_and_tokens(server) -> None:
    server.add("inspector", Answer(json.dumps({"flags": [{"block": 1, "error": "FN"}, {"block": 2, "error": "FP"}]})))
    insp = VLMInspector(client(server.url)).inspect(view())
    assert {b: f.kind for b, f in insp.flags.items()} == {1: "FN", 2: "FP"}
    assert insp.info.tokens["prompt"] == len(server.seen[0].prompt) // 4 > 0     # the usage the server reported
    assert insp.info.prompt_id.startswith("inspector@")
    sent = server.seen[0].body
    assert sent["response_format"]["type"] == "json_schema"
    parts = sent["messages"][0]["content"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "block 1:" in parts[-1]["text"]          # the Betti-0 table
    assert server.seen[0].authorization == f"Bearer {KEY}"


def test_malformed_json_is_read_tolerantly_or_asked_again(server) -> None:
    server.add("inspector", Answer("Sure! ```json\n{'flags': [{'block': 3, 'error': 'fn'},]}\n```"))
    assert {b: f.kind for b, f in VLMInspector(client(server.url)).inspect(view()).flags.items()} == {3: "FN"}
    server.add("inspector", Answer("I cannot tell."), Answer('"0": "FP", "1": "FN"'))
    insp = VLMInspector(client(server.url)).inspect(view())
    assert {b: f.kind for b, f in insp.flags.items()} == {0: "FP", 1: "FN"}
    assert any("unreadable" in n for n in insp.info.notes)


def test_hallucinated_block_ids_and_types_are_dropped_and_noted(server) -> None:
    server.add("inspector", Answer(json.dumps({"flags": [{"block": 99, "error": "FN"}, {"block": 1, "error": "GAP"},
                                                         {"block": "x", "error": "FN"}, {"block": 2, "error": "FP"}]})))
    insp = VLMInspector(client(server.url)).inspect(view())
    assert list(insp.flags) == [2]
    notes = " ".join(insp.info.notes)
    assert "no such block" in notes and "GAP" in notes and "not a number" in notes


def test_500_is_retried_and_a_server_without_schemas_is_asked_plainly(server) -> None:
    server.add("inspector", Status(500), Answer('{"flags": []}'))
    c = client(server.url)
    assert VLMInspector(c).inspect(view()).flags == {}
    assert len(server.seen) == 2
    server.add("inspector", *[NoSchema('{"flags": [{"block": 0, "error": "FP"}]}')] * 2)
    assert list(VLMInspector(c).inspect(view()).flags) == [0]
    assert not server.seen[-1].structured and c.structured is False


def test_timeout_and_refused_connection_raise_a_clear_error(server) -> None:
    server.add("inspector", Hang(2.0), Hang(2.0))
    with pytest.raises(AgentServerError, match="did not answer after 2 tries"):
        VLMInspector(client(server.url, timeout=0.3, max_retries=1)).inspect(view())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AgentServerError, match="resume") as err:
        VLMInspector(client(f"http://127.0.0.1:{port}/v1", max_retries=1)).inspect(view())
    assert KEY not in str(err.value)
    with pytest.raises(AgentServerError, match="HTTP 404"):
        server.add("inspector", Status(404))
        VLMInspector(client(server.url)).inspect(view())


def test_fallback_to_heuristic_when_the_server_is_down() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    role = WithFallback(VLMInspector(client(f"http://127.0.0.1:{port}/v1", max_retries=0)), HeuristicInspector())
    insp = role.inspect(view())
    assert insp.info.backend == "heuristic" and "fallback" in insp.info.notes[-1]
    assert 0 in insp.flags or 1 in insp.flags


def block_context() -> BlockContext:
    image, m = scene()
    block = grid_blocks(m.shape, 32)[0]
    region = tuple(slice(0, n) for n in m.shape)
    return BlockContext(0, block, region, image, m.copy(), (16, 32, 32))


def test_advisor_instruction_is_moved_into_the_editor_frame(server) -> None:
    server.add("advisor", Answer(json.dumps({"reasoning": "gap on the right",
                                             "instruction": "Repair break at bottom-right-center"})))
    ctx = block_context()
    advice = VLMAdvisor(client(server.url)).advise(ctx, Flag(0, "FN"), Defect("FN"), Step(0, 0, 0, 0), [])
    assert advice is not None and advice.instruction.op == "repair"
    # block 0 is y 0:32, x 0:32; its bottom-right cell (y 21:32, x 21:32) -> the frame centred there
    frame = advice.frame
    assert frame.window[1].start <= 26 < frame.window[1].stop and frame.window[2].start <= 26 < frame.window[2].stop
    assert len(server.seen[0].body["messages"][0]["content"]) == 5     # four pictures and the text


def test_advisor_outside_the_grammar_is_a_failed_try_that_keeps_the_answer(server) -> None:
    from neurorefiner.agents.roles import UnreadableAdvice

    server.add("advisor", Answer('{"instruction": "make it nicer"}'))
    with pytest.raises(UnreadableAdvice) as err:
        VLMAdvisor(client(server.url)).advise(block_context(), Flag(0, "FN"), Defect("FN"), Step(0, 0, 0, 0), [])
    assert err.value.info.raw == '{"instruction": "make it nicer"}'      # verbatim, for the trace
    assert "outside the grammar" in err.value.why


@pytest.mark.parametrize("answer,accept", [('{"decision": "ACCEPT", "reason": "joined"}', True),
                                           ('{"decision": "REJECT", "reason": "nothing joined"}', False),
                                           ('{"decision": "MAYBE", "reason": "?"}', False)])
def test_validator(server, answer: str, accept: bool) -> None:
    from neurorefiner.agents.editor import frame_around
    from neurorefiner.agents.roles import Advice, CallInfo
    from neurorefiner.topology.instructions import Instruction

    server.add("validator", Answer(answer))
    ctx = block_context()
    frame = frame_around((8, 16, 16), ctx.editor_size, ctx.mask.shape)
    advice = Advice(Instruction.parse("Repair break at center-center-center"), frame, CallInfo("t"))
    before = ctx.mask[frame.window]
    v = VLMValidator(client(server.url)).validate(ctx, Flag(0, "FN"), Defect("FN"), advice, before, ~before,
                                                  Step(0, 0, 0, 0))
    assert v.accept is accept


def test_api_key_never_reaches_the_trace(server, tmp_path, monkeypatch) -> None:
    from neurorefiner.agents.heuristic import HeuristicAdvisor, HeuristicValidator

    monkeypatch.setenv("NR_TEST_KEY", KEY)
    c = ChatClient("test-vl", server.url, api_key_env="NR_TEST_KEY", backoff=0.0)
    assert KEY not in repr(c)
    server.add("inspector", Answer(json.dumps({"flags": [{"block": 0, "error": "FN"}], "echo": KEY})))
    agents = Agents(VLMInspector(c), HeuristicAdvisor(), HeuristicValidator())
    image, m = scene()

    class Editor:
        def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
            return mask_block

    path = tmp_path / "trace.jsonl"
    with TraceWriter(path, secrets=[c.secret]) as w:
        run_loop(image, m, agents, Editor(), LoopSettings(block_size=32, t_max=1, editor_size=(16, 32, 32)),
                 emit=w.write)
    text = path.read_text()
    assert "inspector@" in text and KEY not in text and "<redacted>" in text


def test_parse_json_and_prompt_checks(tmp_path) -> None:
    assert parse_json('noise {"a": {"b": "}"}} tail') == {"a": {"b": "}"}}
    with pytest.raises(AnswerParseError):
        parse_json("nothing here")
    bad = tmp_path / "inspector.md"
    bad.write_text("only $n_blocks and $surprise")
    with pytest.raises(PromptError, match="missing"):
        load_prompt("inspector", bad)
    for role in ("inspector", "advisor", "validator"):
        assert load_prompt(role).id.startswith(role)
