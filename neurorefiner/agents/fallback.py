"""A role that falls back to another when its model server fails (``agent.fallback=heuristic``).

After the first failure the primary is not asked again in this run (a server that is down would
otherwise cost a full timeout and its retries on every call); every decision made by the fallback says
so in the trace's notes.
"""

from __future__ import annotations

from typing import Any

from neurorefiner.agents.vlm.client import AgentServerError


class WithFallback:
    """Wraps one role (inspector, advisor or validator) of one backend with the same role of another."""

    def __init__(self, primary: Any, fallback: Any) -> None:
        self.primary, self.fallback = primary, fallback
        self.name = getattr(primary, "name", "primary")
        self.failure: str | None = None

    def _call(self, method: str, *args: Any) -> Any:
        if self.failure is None:
            try:
                return getattr(self.primary, method)(*args)
            except AgentServerError as exc:
                self.failure = str(exc)
        out = getattr(self.fallback, method)(*args)
        if out is not None:
            out.info.notes.append(f"fallback to {getattr(self.fallback, 'name', 'fallback')}: {self.failure}")
            out.info.backend = getattr(self.fallback, "name", "fallback")
        return out

    def inspect(self, *args: Any) -> Any:
        return self._call("inspect", *args)

    def advise(self, *args: Any) -> Any:
        return self._call("advise", *args)

    def validate(self, *args: Any) -> Any:
        return self._call("validate", *args)
