"""The vlm roles against a real local HTTP server speaking the OpenAI chat API (stdlib, in a thread):
good and malformed JSON, hallucinated block ids, timeouts, 500s, refused connections, a server
without structured output; and the API key never reaching the trace."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
from neurorefiner.topology.blocks import grid_blocks

KEY = "sk-test-very-secret-4242"


class FakeServer:
    """Answers each POST with the next scripted behaviour: ("json", text), ("status", code),
    ("sleep", seconds), ("no-schema", text) = HTTP 400 when response_format is sent, else text."""

    def __init__(self) -> None:
        self.script: list[tuple[str, object]] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # type: ignore[no-untyped-def]
                pass

            def do_POST(self):  # type: ignore[no-untyped-def]
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({"Authorization": self.headers.get("Authorization")})
                kind, value = server.script.pop(0) if server.script else ("json", "{}")
                if kind == "sleep":
                    time.sleep(float(value))
                    kind, value = "json", "{}"
                if kind == "no-schema":
                    if "response_format" in body:
                        return self._send(400, {"error": {"message": "response_format not supported"}})
                    kind = "json"
                if kind == "status":
                    return self._send(int(value), {"error": {"message": "boom"}})
                self._send(200, {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": value}}],
                                 "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}})

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():  # type: ignore[no-untyped-def]
    s = FakeServer()
    yield s
    s.close()


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
    server.script = [("json", json.dumps({"flags": [{"block": 1, "error": "FN"}, {"block": 2, "error": "FP"}]}))]
    insp = VLMInspector(client(server.url)).inspect(view())
    assert {b: f.kind for b, f in insp.flags.items()} == {1: "FN", 2: "FP"}
    assert insp.info.tokens["prompt"] == 11 and insp.info.prompt_id.startswith("inspector@")
    sent = server.requests[0]
    assert sent["response_format"]["type"] == "json_schema"
    parts = sent["messages"][0]["content"]
    assert parts[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert "block 1:" in parts[-1]["text"]          # the Betti-0 table
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"


def test_malformed_json_is_read_tolerantly_or_asked_again(server) -> None:
    server.script = [("json", "Sure! ```json\n{'flags': [{'block': 3, 'error': 'fn'},]}\n```")]
    assert {b: f.kind for b, f in VLMInspector(client(server.url)).inspect(view()).flags.items()} == {3: "FN"}
    server.script = [("json", "I cannot tell."), ("json", '"0": "FP", "1": "FN"')]
    insp = VLMInspector(client(server.url)).inspect(view())
    assert {b: f.kind for b, f in insp.flags.items()} == {0: "FP", 1: "FN"}
    assert any("unreadable" in n for n in insp.info.notes)


def test_hallucinated_block_ids_and_types_are_dropped_and_noted(server) -> None:
    server.script = [("json", json.dumps({"flags": [{"block": 99, "error": "FN"}, {"block": 1, "error": "GAP"},
                                                    {"block": "x", "error": "FN"}, {"block": 2, "error": "FP"}]}))]
    insp = VLMInspector(client(server.url)).inspect(view())
    assert list(insp.flags) == [2]
    notes = " ".join(insp.info.notes)
    assert "no such block" in notes and "GAP" in notes and "not a number" in notes


def test_500_is_retried_and_a_server_without_schemas_is_asked_plainly(server) -> None:
    server.script = [("status", 500), ("json", '{"flags": []}')]
    c = client(server.url)
    assert VLMInspector(c).inspect(view()).flags == {}
    assert len(server.requests) == 2
    server.script = [("no-schema", '{"flags": [{"block": 0, "error": "FP"}]}')] * 2
    assert list(VLMInspector(c).inspect(view()).flags) == [0]
    assert "response_format" not in server.requests[-1] and c.structured is False


def test_timeout_and_refused_connection_raise_a_clear_error(server) -> None:
    server.script = [("sleep", 2.0), ("sleep", 2.0)]
    with pytest.raises(AgentServerError, match="did not answer after 2 tries"):
        VLMInspector(client(server.url, timeout=0.3, max_retries=1)).inspect(view())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AgentServerError, match="resume") as err:
        VLMInspector(client(f"http://127.0.0.1:{port}/v1", max_retries=1)).inspect(view())
    assert KEY not in str(err.value)
    with pytest.raises(AgentServerError, match="HTTP 404"):
        server.script = [("status", 404)]
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
    server.script = [("json", json.dumps({"reasoning": "gap on the right", "instruction":
                                          "Repair break at bottom-right-center"}))]
    ctx = block_context()
    advice = VLMAdvisor(client(server.url)).advise(ctx, Flag(0, "FN"), Defect("FN"), Step(0, 0, 0, 0), [])
    assert advice is not None and advice.instruction.op == "repair"
    # block 0 is y 0:32, x 0:32; its bottom-right cell (y 21:32, x 21:32) -> the frame centred there
    frame = advice.frame
    assert frame.window[1].start <= 26 < frame.window[1].stop and frame.window[2].start <= 26 < frame.window[2].stop
    assert len(server.requests[0]["messages"][0]["content"]) == 5     # four pictures and the text


def test_advisor_outside_the_grammar_is_a_failed_try_that_keeps_the_answer(server) -> None:
    from neurorefiner.agents.roles import UnreadableAdvice

    server.script = [("json", '{"instruction": "make it nicer"}')]
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

    server.script = [("json", answer)]
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
    server.script = [("json", json.dumps({"flags": [{"block": 0, "error": "FN"}], "echo": KEY}))]
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
