"""A role that falls back to another when its model fails (``agent.fallback=heuristic``).

Two kinds of failure: the server cannot answer (:class:`AgentServerError`), and then the primary is not asked
again in this run (a server that is down would otherwise cost a full timeout and its retries on every call);
or the model answered but nothing readable even when asked again (any other :class:`RoleError`), and then
only that call falls back (the server works; the next question may go better). Every decision made by the
fallback says so in the trace's notes, and keeps what the model was asked and answered (``info.requests``).
"""

from __future__ import annotations

from typing import Any

from neurorefiner.agents.roles import RoleError
from neurorefiner.agents.vlm.client import AgentServerError


class WithFallback:
    """Wraps one role (inspector, advisor or validator) of one backend with the same role of another."""

    def __init__(self, primary: Any, fallback: Any) -> None:
        self.primary, self.fallback = primary, fallback
        self.name = getattr(primary, "name", "primary")
        self.failure: str | None = None

    def _call(self, method: str, *args: Any) -> Any:
        why, failed = self.failure, None
        if self.failure is None:
            try:
                return getattr(self.primary, method)(*args)
            except RoleError as exc:
                why, failed = str(exc), exc.info
                if isinstance(exc, AgentServerError):
                    self.failure = why
        out = getattr(self.fallback, method)(*args)
        if out is not None:
            out.info.notes.append(f"fallback to {getattr(self.fallback, 'name', 'fallback')}: {why}")
            out.info.backend = getattr(self.fallback, "name", "fallback")
            if failed is not None:
                out.info.requests = list(failed.requests) + list(out.info.requests)
                out.info.notes += [f"the model answered: {r.get('answer')!r}" for r in failed.requests]
        return out

    def inspect(self, *args: Any) -> Any:
        return self._call("inspect", *args)

    def advise(self, *args: Any) -> Any:
        return self._call("advise", *args)

    def validate(self, *args: Any) -> Any:
        return self._call("validate", *args)
