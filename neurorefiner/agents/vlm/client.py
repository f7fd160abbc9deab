"""A small chat client for any OpenAI-compatible server (vLLM is the reference), with pictures.

Pictures go as base64 PNG ``image_url`` data URLs. Structured output is asked for with
``response_format={"type": "json_schema", ...}`` (what recent vLLM supports; it dropped ``guided_json``);
a server that refuses it (HTTP 400) is asked again without it, and the answer parsed tolerantly.
Every server fault goes one way: timeouts, refused connections, 429 and 5xx, a body that is not JSON, JSON
that is not a chat completion, and (when the schema was sent) an answer that breaks the schema's shape are
retried with exponential backoff, then raised as one :class:`AgentServerError` line, which
``agent.fallback=heuristic`` turns into a heuristic answer (:mod:`neurorefiner.agents.fallback`). Other 4xx are
not retried (a wrong model name does not improve with waiting). Each reply carries its latency and token counts.

Why the timeouts are short by default: a hung server used to cost 4 tries of 120 s, 500 s per call and
per block. Now a connection must open within ``connect_timeout`` (5 s), a reply arrive within ``timeout``
(45 s), there is one retry, and no call outlives ``deadline`` (60 s, tries and backoffs together), so a dead
server is found within a minute; raise them for a slow server (``conf/agent/vlm.yaml``).

The API key comes from an environment variable (``api_key_env``) or the ``api_key`` argument; it is kept
out of ``repr``, error messages and everything this module returns.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neurorefiner.agents.roles import RoleError


class AgentServerError(RoleError):
    """The model server could not answer (down, timing out, refusing); the run can be resumed."""


@dataclass
class ChatReply:
    content: str
    seconds: float
    tokens: dict = field(default_factory=dict)
    tries: int = 1
    structured: bool = True
    rejected: list[str] = field(default_factory=list)   # answers of earlier tries that broke the schema


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class ChatClient:
    """One model on one server. Thread-safe: blocks of a round may ask concurrently."""

    def __init__(self, model: str, base_url: str, api_key_env: str = "NEUROREFINER_VLM_API_KEY",
                 api_key: str | None = None, timeout: float = 45.0, max_retries: int = 1, backoff: float = 1.0,
                 max_tokens: int = 1024, temperature: float = 0.0, structured: bool = True,
                 connect_timeout: float = 5.0, deadline: float = 60.0) -> None:
        if timeout <= 0 or connect_timeout <= 0 or deadline <= 0 or max_retries < 0 or backoff < 0:
            raise ValueError("timeout, connect_timeout and deadline must be > 0, max_retries and backoff >= 0")
        self.model, self.base_url = str(model), str(base_url)
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
        self.connect_timeout, self.deadline = float(connect_timeout), float(deadline)
        self.max_tokens, self.temperature = int(max_tokens), float(temperature)
        self.structured = bool(structured)
        given = api_key if api_key and api_key != "EMPTY" else None
        self._key = given or os.environ.get(api_key_env or "", "") or "EMPTY"
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def secret(self) -> str:
        """The key, for the trace writer's redaction list only."""
        return self._key if self._key != "EMPTY" else ""

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                import logging

                import openai

                # one INFO line per request from the HTTP library buried a run's own output (and its progress
                # bar) under hundreds of "HTTP Request: POST ..." lines; faults still surface as our errors
                for name in ("httpx", "httpx2"):
                    logging.getLogger(name).setLevel(logging.WARNING)

                self._client = openai.OpenAI(base_url=self.base_url, api_key=self._key,
                                             timeout=self._timeout(self.timeout), max_retries=0)
            return self._client

    def messages(self, text: str, images: Sequence[bytes] = ()) -> list[dict]:
        content: list[dict] = [{"type": "image_url", "image_url": {"url": data_url(png)}} for png in images]
        content.append({"type": "text", "text": text})
        return [{"role": "user", "content": content}]

    def _timeout(self, read: float) -> Any:
        """The per-try timeout: ``read`` for the reply, the short ``connect_timeout`` to open the connection
        (a dead host is found in seconds, not after a full read timeout).

        Built with the ``Timeout`` class the installed openai re-exports: openai 1.x-2.x runs on httpx, 3.x on
        httpx2, and each refuses the other's class (a ``TypeError`` on every request)."""
        import openai

        return openai.Timeout(read, connect=min(self.connect_timeout, read))

    def chat(self, text: str, images: Sequence[bytes] = (), schema: dict | None = None,
             schema_name: str = "answer") -> ChatReply:
        """Ask once (with retries, within ``deadline``); raise :class:`AgentServerError` when the server cannot
        answer, whatever the fault."""
        messages = self.messages(text, images)
        self._openai()  # built (importing openai 3.x takes ~1.5 s) before the clock: the deadline is the server's
        t0 = time.perf_counter()
        last, tries, dropped_schema = "", 0, False
        rejected: list[str] = []
        while True:
            left = self.deadline - (time.perf_counter() - t0)
            if left <= 0:
                raise self._gave_up(tries, f"{last}; per-call deadline of {self.deadline:g} s reached")
            tries += 1
            use_schema = schema is not None and self.structured
            try:
                content, tokens = self._ask_once(messages, schema if use_schema else None, schema_name,
                                                 min(self.timeout, left))
                return ChatReply(content, time.perf_counter() - t0, tokens, tries, use_schema, rejected)
            except _SchemaRefused:
                if use_schema and not dropped_schema:  # a server without structured output: ask plainly
                    self.structured, dropped_schema = False, True
                    tries -= 1
                    continue
                raise AgentServerError(f"the model server at {self.base_url} refused the request (HTTP 400)") from None
            except _Fault as exc:
                last = str(exc)
                if exc.answer is not None:
                    rejected.append(exc.answer)
            if tries > self.max_retries:
                raise self._gave_up(tries, last)
            pause = self.backoff * (2 ** (tries - 1))
            if time.perf_counter() - t0 + pause >= self.deadline:
                raise self._gave_up(tries, f"{last}; per-call deadline of {self.deadline:g} s reached")
            time.sleep(pause)

    def _gave_up(self, tries: int, why: str) -> AgentServerError:
        """The one-line error every fault ends in."""
        return AgentServerError(f"the model server at {self.base_url} did not answer after {tries} tries "
                                f"({why}); start it or pass agent.fallback=heuristic, then rerun the same "
                                "command to resume")

    def _ask_once(self, messages: list[dict], schema: dict | None, schema_name: str,
                  timeout: float) -> tuple[str, dict]:
        """One request -> (content, tokens). Raises :class:`_Fault` for anything worth retrying,
        :class:`_SchemaRefused` for a 400 (maybe structured output unsupported), and
        :class:`AgentServerError` for a 4xx that waiting will not fix."""
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                                  "temperature": self.temperature, "timeout": self._timeout(timeout)}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema}}
        try:
            resp = self._openai().chat.completions.create(**kwargs)
        except openai.BadRequestError as exc:
            raise _SchemaRefused(_short(exc)) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise _Fault(f"{type(exc).__name__}: {_short(exc)}") from None
        except openai.APIStatusError as exc:
            if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                raise AgentServerError(f"the model server at {self.base_url} answered HTTP "
                                       f"{exc.status_code}: {_short(exc)}") from None
            raise _Fault(f"HTTP {exc.status_code}: {_short(exc)}") from None
        except (openai.APIError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # a body that is not JSON (a proxy's HTML page) fails inside the client's parsing
            raise _Fault(f"unreadable reply ({type(exc).__name__}: {_short(exc)})") from None
        content, tokens = _completion_content(resp)
        if schema is not None:
            broken = schema_shape_error(content, schema)
            if broken:
                raise _Fault(f"the answer breaks the requested schema: {broken}", answer=content)
        return content, tokens


class _Fault(Exception):
    """A server fault worth another try (timeouts, 5xx, malformed replies); ``answer``: the model's text when
    there was one (an answer that broke the schema), kept for the trace."""

    def __init__(self, message: str, answer: str | None = None) -> None:
        super().__init__(message)
        self.answer = answer


class _SchemaRefused(Exception):
    """HTTP 400: perhaps a server without structured output."""


def _completion_content(resp: Any) -> tuple[str, dict]:
    """(content, tokens) of an OpenAI chat completion; :class:`_Fault` for anything else (a dict or text
    that a misconfigured server or proxy sent instead)."""
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise _Fault(f"the reply is not a chat completion (no choices): {_short(Exception(str(resp)))}")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise _Fault("the reply is not a chat completion (message content is not text)")
    usage = getattr(resp, "usage", None)
    tokens = {} if usage is None else {"prompt": getattr(usage, "prompt_tokens", None),
                                       "completion": getattr(usage, "completion_tokens", None)}
    return content or "", tokens


_JSON_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                            "integer": (int,), "number": (int, float), "boolean": (bool,)}


def schema_shape_error(content: str, schema: dict) -> str | None:
    """What is wrong with the shape of an answer that the server was told to fit ``schema``: the top level's
    type, its required keys and its properties' types. Only strict JSON is checked (text around it is left
    to the roles' tolerant parsing), and nothing deeper (the roles drop and note a bad block id or kind)."""
    import json

    try:
        answer = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None
    if schema.get("type") == "object" and not isinstance(answer, dict):
        return f"expected an object, got {type(answer).__name__}"
    if not isinstance(answer, dict):
        return None
    missing = [k for k in schema.get("required", []) if k not in answer]
    if missing:
        return f"missing {', '.join(missing)}"
    for key, prop in (schema.get("properties") or {}).items():
        want = _JSON_TYPES.get(str(prop.get("type")))
        if key in answer and want and not isinstance(answer[key], want):
            return f"{key} should be {prop['type']}, got {type(answer[key]).__name__}"
    return None


def _short(exc: Exception) -> str:
    text = str(getattr(exc, "message", None) or exc)
    return text if len(text) <= 200 else text[:200] + "..."
