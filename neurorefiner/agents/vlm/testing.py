"""A fake vision-language model server: a real HTTP server on localhost that speaks the OpenAI chat-completions
API (what ``vllm serve`` speaks), in a thread, answering each role from a script.

Why it exists: the ``vlm`` roles are real client code for a real server, and no GPU is at hand in CI or on a
laptop. This server lets the whole loop (``refine.py agent=vlm``) run against the wire protocol, with every
fault a real server shows: answers outside the grammar, answers that break the schema, HTTP errors, a hang.
Users can point a run at it too, to see the loop's traces and reports before they have a GPU::

    from neurorefiner.agents.vlm.testing import FakeVLM
    with FakeVLM() as server:          # plausible answers for every role
        ...  # python refine.py ... agent=vlm agent.base_url={server.url}

Each request is told apart by its role: the ``response_format`` schema's name (the roles send their role's
name), else the JSON key the prompt asks for (``flags``, ``instruction``, ``decision``). A role's script is
consumed one reply per request; when it runs out, or for a role without a script, the plausible answer is
given: the Inspector flags the blocks its Betti-0 table lists with several components (FN when the second
piece is large, FP when it is a speck), the Advisor asks to repair (FN) or remove (FP) at the block's
centre, the Validator accepts. No answer depends on the pictures (the server does not look at them).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLES = ("inspector", "advisor", "validator")


@dataclass(frozen=True)
class Answer:
    """A chat completion whose message is ``text`` (any text: JSON, prose, an instruction)."""

    text: str


@dataclass(frozen=True)
class Status:
    """An HTTP error status with an OpenAI-style error body."""

    code: int
    message: str = "fake server error"


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering (the plausible answer; a client with a shorter timeout gives up)."""

    seconds: float


@dataclass(frozen=True)
class Body:
    """HTTP 200 with this raw body: text that is not JSON (a proxy's page) or JSON that is not a completion."""

    body: str


@dataclass(frozen=True)
class NoSchema:
    """A server without structured output: HTTP 400 when ``response_format`` is sent, else ``text`` (None: the
    plausible answer)."""

    text: str | None = None


Reply = Answer | Status | Hang | Body | NoSchema


@dataclass
class Seen:
    """One request as the server received it."""

    role: str
    prompt: str
    images: int
    structured: bool
    body: dict = field(repr=False, default_factory=dict)
    authorization: str | None = field(repr=False, default=None)  # the Authorization header (API-key tests)


def role_of(body: Mapping[str, Any]) -> str:
    """Which role sent a request: the schema's name, else the JSON key the prompt asks for."""
    fmt = body.get("response_format") or {}
    name = str((fmt.get("json_schema") or {}).get("name", ""))
    if name in ROLES:
        return name
    text = prompt_of(body)
    for key, role in (('"flags"', "inspector"), ('"decision"', "validator"), ('"instruction"', "advisor")):
        if key in text:
            return role
    return "unknown"


def prompt_of(body: Mapping[str, Any]) -> str:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type") == "text"]
    return "\n".join(parts)


def images_of(body: Mapping[str, Any]) -> int:
    return sum(1 for m in body.get("messages") or [] if isinstance(m.get("content"), list)
               for c in m["content"] if isinstance(c, dict) and c.get("type") == "image_url")


_BETTI_ROW = re.compile(r"block (\d+): (\d+) components(?: \(sizes \[([\d, ]*)\]\))?")
_ONLY = re.compile(r"judge only blocks ([\d, ]+)")


def plausible(role: str, prompt: str) -> str:
    """The answer a sensible model would give without looking at the pictures (see the module docstring)."""
    if role == "inspector":
        only = _ONLY.search(prompt)
        allowed = {int(v) for v in only.group(1).split(",")} if only else None
        flags = []
        for bid, n, sizes in _BETTI_ROW.findall(prompt):
            b, k = int(bid), int(n)
            if k < 2 or (allowed is not None and b not in allowed):
                continue
            pieces = [int(v) for v in sizes.split(",") if v.strip()] if sizes else []
            kind = "FP" if len(pieces) > 1 and pieces[1] < 20 else "FN"
            flags.append({"block": b, "error": kind})
        return json.dumps({"flags": flags})
    if role == "advisor":
        noise = "FP (noise)" in prompt
        return json.dumps({"reasoning": "the pictures show it near the block's centre",
                           "instruction": "Remove isolated noise at center-center-center" if noise
                           else "Repair break at center-center-center"})
    if role == "validator":
        return json.dumps({"decision": "ACCEPT", "reason": "the change does what was asked and the tree is cleaner"})
    return "{}"


class FakeVLM:
    """The server (see the module docstring). ``script``: role -> replies, one per request of that role, in
    order; ``always``: one reply to every request (a server that is down in a given way). ``url`` is the
    base URL to give ``agent.base_url``; ``seen`` lists the requests received."""

    def __init__(self, script: Mapping[str, Iterable[Reply]] | None = None, always: Reply | None = None,
                 model: str = "fake-vl", host: str = "127.0.0.1", port: int = 0) -> None:
        unknown = set(script or {}) - set(ROLES)
        if unknown:
            raise ValueError(f"script roles must be among {ROLES}, got {sorted(unknown)}")
        self.script: dict[str, list[Reply]] = {r: list(v) for r, v in (script or {}).items()}
        self.always, self.model = always, model
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models: what a client probes to see the server is up
                outer._send(self, 200, {"object": "list", "data": [{"id": outer.model, "object": "model"}]})

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                except json.JSONDecodeError:
                    outer._send(self, 400, {"error": {"message": "the request body is not JSON"}})
                    return
                outer._answer(self, body)

        self.httpd = ThreadingHTTPServer((host, int(port)), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-vlm", daemon=True)
        self._thread.start()

    def __enter__(self) -> FakeVLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add(self, role: str, *replies: Reply) -> None:
        """Append replies to a role's script."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        with self._lock:
            self.script.setdefault(role, []).extend(replies)

    def requests(self, role: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if role is None or s.role == role]

    def _next(self, role: str) -> Reply | None:
        with self._lock:
            if self.always is not None:
                return self.always
            queue = self.script.get(role) or []
            return queue.pop(0) if queue else None

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        role, prompt = role_of(body), prompt_of(body)
        with self._lock:
            self.seen.append(Seen(role, prompt, images_of(body), "response_format" in body, body,
                                  handler.headers.get("Authorization")))
        reply = self._next(role)
        if isinstance(reply, Hang):
            time.sleep(reply.seconds)
            reply = None
        if isinstance(reply, NoSchema):
            if "response_format" in body:
                self._send(handler, 400, {"error": {"message": "response_format is not supported"}})
                return
            reply = None if reply.text is None else Answer(reply.text)
        if isinstance(reply, Status):
            self._send(handler, reply.code, {"error": {"message": reply.message, "code": reply.code}})
            return
        if isinstance(reply, Body):
            self._send(handler, 200, reply.body)
            return
        text = reply.text if isinstance(reply, Answer) else plausible(role, prompt)
        self._send(handler, 200, {
            "id": f"fake-{len(self.seen)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4,
                      "total_tokens": (len(prompt) + len(text)) // 4}})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, code: int, payload: Any) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a hang it timed out on)
