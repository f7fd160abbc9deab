"""A small chat client for any OpenAI-compatible server (vLLM is the reference), with pictures.

Pictures go as base64 PNG ``image_url`` data URLs. Structured output is asked for with
``response_format={"type": "json_schema", ...}`` (what recent vLLM supports; it dropped ``guided_json``);
a server that refuses it (HTTP 400) is asked again without it, and the answer parsed tolerantly.
Timeouts, refused connections, 429 and 5xx are retried with exponential backoff; other 4xx are not
(a wrong model name does not improve with waiting). Each reply carries its latency and token counts.

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


class AgentServerError(RuntimeError):
    """The model server could not answer (down, timing out, refusing); the run can be resumed."""


@dataclass
class ChatReply:
    content: str
    seconds: float
    tokens: dict = field(default_factory=dict)
    tries: int = 1
    structured: bool = True


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class ChatClient:
    """One model on one server. Thread-safe: blocks of a round may ask concurrently."""

    def __init__(self, model: str, base_url: str, api_key_env: str = "NEUROREFINER_VLM_API_KEY",
                 api_key: str | None = None, timeout: float = 120.0, max_retries: int = 3, backoff: float = 2.0,
                 max_tokens: int = 1024, temperature: float = 0.0, structured: bool = True) -> None:
        if timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ValueError("timeout must be > 0, max_retries and backoff >= 0")
        self.model, self.base_url = str(model), str(base_url)
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
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
                import openai

                self._client = openai.OpenAI(base_url=self.base_url, api_key=self._key, timeout=self.timeout,
                                             max_retries=0)
            return self._client

    def messages(self, text: str, images: Sequence[bytes] = ()) -> list[dict]:
        content: list[dict] = [{"type": "image_url", "image_url": {"url": data_url(png)}} for png in images]
        content.append({"type": "text", "text": text})
        return [{"role": "user", "content": content}]

    def chat(self, text: str, images: Sequence[bytes] = (), schema: dict | None = None,
             schema_name: str = "answer") -> ChatReply:
        """Ask once (with retries); raise :class:`AgentServerError` when the server cannot answer."""
        import openai

        client = self._openai()
        messages = self.messages(text, images)
        t0 = time.perf_counter()
        last = ""
        tries = 0
        dropped_schema = False
        while True:
            tries += 1
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                                      "temperature": self.temperature}
            use_schema = schema is not None and self.structured
            if use_schema:
                kwargs["response_format"] = {"type": "json_schema",
                                             "json_schema": {"name": schema_name, "schema": schema}}
            try:
                resp = client.chat.completions.create(**kwargs)
                choice = resp.choices[0] if resp.choices else None
                content = (choice.message.content if choice is not None else None) or ""
                usage = getattr(resp, "usage", None)
                tokens = {} if usage is None else {"prompt": getattr(usage, "prompt_tokens", None),
                                                   "completion": getattr(usage, "completion_tokens", None)}
                return ChatReply(content, time.perf_counter() - t0, tokens, tries, use_schema)
            except openai.BadRequestError as exc:
                if use_schema and not dropped_schema:  # a server without structured output: ask plainly
                    self.structured, dropped_schema = False, True
                    tries -= 1
                    continue
                raise AgentServerError(f"the model server at {self.base_url} refused the request "
                                       f"(HTTP 400: {_short(exc)})") from None
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                last = f"{type(exc).__name__}: {_short(exc)}"
            except openai.APIStatusError as exc:
                if exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                    raise AgentServerError(f"the model server at {self.base_url} answered HTTP "
                                           f"{exc.status_code}: {_short(exc)}") from None
                last = f"HTTP {exc.status_code}: {_short(exc)}"
            if tries > self.max_retries:
                raise AgentServerError(f"the model server at {self.base_url} did not answer after {tries} tries "
                                       f"({last}); start it or pass agent.fallback=heuristic, then rerun the same "
                                       "command to resume") from None
            time.sleep(self.backoff * (2 ** (tries - 1)))


def _short(exc: Exception) -> str:
    text = str(getattr(exc, "message", None) or exc)
    return text if len(text) <= 200 else text[:200] + "..."
