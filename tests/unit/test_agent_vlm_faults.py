"""Every way a model server can fail ends the same way: retried, then the fallback role answers (with
``agent.fallback=heuristic``) or one :class:`AgentServerError` line, never a traceback. The shipped fake
OpenAI-compatible server (neurorefiner.agents.vlm.testing, on 127.0.0.1 port 0) plays each fault: HTTP 500, a hang,
a body that is not JSON, JSON that is not a chat completion, and an answer that breaks the role's schema."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from neurorefiner.agents.fallback import WithFallback
from neurorefiner.agents.heuristic import HeuristicInspector
from neurorefiner.agents.roles import GlobalView
from neurorefiner.agents.vlm import AgentServerError, ChatClient, VLMInspector
from neurorefiner.agents.vlm.testing import Answer, Body, FakeVLM, Hang, Reply, Status
from neurorefiner.topology.blocks import grid_blocks

#: fault name -> the shipped fake server's reply to every request
FAULTS: dict[str, Reply] = {
    "http_500": Status(500, "boom"),
    "hang": Hang(3.0),
    "invalid_json": Body("<html>502 Bad Gateway from the proxy</html>"),
    "wrong_json": Body('{"status": "ok", "result": [1, 2, 3]}'),
    "schema_violation": Answer('{"flags": "block 3 looks broken"}'),
}


@pytest.fixture(params=sorted(FAULTS))
def faulty(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeVLM]]:
    with FakeVLM(always=FAULTS[request.param]) as server:
        yield request.param, server


def tiny_client(url: str) -> ChatClient:
    """Tiny timeouts so a hang costs a fraction of a second."""
    return ChatClient("test-vl", url, api_key="k", timeout=0.3, connect_timeout=0.3, max_retries=1, backoff=0.0,
                      deadline=2.0)


def view() -> GlobalView:
    m = np.zeros((16, 64, 64), bool)
    m[7:10, 30:33, 2:28] = True
    m[7:10, 30:33, 36:62] = True
    return GlobalView(0, np.where(m, 0.9, 0.05).astype(np.float32), m, grid_blocks(m.shape, 32))


def test_each_fault_is_retried_then_one_clear_error(faulty: tuple[str, FakeVLM]) -> None:
    name, server = faulty
    with pytest.raises(AgentServerError) as err:
        tiny_client(server.url).chat("hello", schema={"type": "object", "required": ["flags"],
                                                      "properties": {"flags": {"type": "array"}}})
    assert len(server.seen) == 2, name                     # one try and one retry
    message = str(err.value)
    assert "\n" not in message and "did not answer after 2 tries" in message and server.url in message


def test_each_fault_falls_back_to_the_heuristic_role(faulty: tuple[str, FakeVLM]) -> None:
    name, server = faulty
    role = WithFallback(VLMInspector(tiny_client(server.url)), HeuristicInspector())
    insp = role.inspect(view())
    assert insp.info.backend == "heuristic", name
    assert "fallback" in insp.info.notes[-1]


def test_a_hung_server_costs_at_most_the_deadline() -> None:
    with FakeVLM(always=Hang(5.0)) as server:
        c = ChatClient("test-vl", server.url, api_key="k", timeout=10.0, max_retries=5, backoff=0.0, deadline=1.0)
        t0 = time.perf_counter()
        with pytest.raises(AgentServerError, match="deadline"):
            c.chat("hello")
        assert time.perf_counter() - t0 < 2.5


def test_default_settings_detect_a_dead_server_within_a_minute() -> None:
    """The worst case of the defaults (every try hanging to its read timeout, plus the backoffs) is bounded
    by the per-call deadline, and that is under a minute; the config's values are the class's defaults."""
    from pathlib import Path

    from omegaconf import OmegaConf

    c = ChatClient("m", "http://127.0.0.1:9/v1")
    assert c.deadline <= 60.0 and c.connect_timeout <= 10.0
    conf = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf" / "agent" / "vlm.yaml").client
    for key in ("timeout", "connect_timeout", "max_retries", "backoff", "deadline"):
        assert float(conf[key]) == float(getattr(c, key)), key


def test_a_good_answer_is_read_on_the_first_try_whatever_http_library_openai_runs_on() -> None:
    """openai 3.x runs on httpx2 and rejects an ``httpx.Timeout`` on every request; the client built its timeout
    from httpx, so every call was an "unreadable reply" fault and a healthy server looked dead."""
    with FakeVLM(always=Answer('{"flags": []}')) as server:
        reply = tiny_client(server.url).chat("any flags?")
    assert reply.tries == 1 and reply.content == '{"flags": []}'
