"""Ask a recorded run's questions again, of another model (Table 4) or the same one (is it stable?).

A trace keeps every request a model-backed role sent (rendered prompt, pictures, schema) and its answer,
the prompt and pictures stored once by hash in ``requests/`` beside the trace. :func:`recorded_requests`
reads them back as they were sent; :func:`reask` sends each to another server or model and returns the
old and new answers side by side. The questions are the recorded ones: the loop is not rerun, so an
Advisor asked again sees the same block the first model saw (what a person comparing models wants).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from neurorefiner.agents.trace import load_requests, read_trace
from neurorefiner.agents.vlm.client import ChatClient

ROLE_SCHEMAS = ("inspector", "advisor", "validator")


@dataclass
class Recorded:
    """One request of a trace, as it was sent, with its answer and where in the run it was asked."""

    role: str
    round: int
    block: int | None
    defect: int | None
    attempt: int | None
    prompt: str
    images: list[bytes]
    answer: str | None
    model: str | None


def recorded_requests(trace_path: str | Path, roles: Iterable[str] = ROLE_SCHEMAS) -> Iterator[Recorded]:
    """Every recorded request of the trace's decisions (and failed calls), in the order they were made."""
    wanted = set(roles)
    for rec in read_trace(trace_path, repair=False):
        if rec.get("type") not in ("decision", "failed_call") or rec.get("role") not in wanted:
            continue
        for r in load_requests(trace_path, rec):
            yield Recorded(rec["role"], int(rec["round"]), rec.get("block"), rec.get("defect"), rec.get("attempt"),
                           r["prompt"], r["images"], r.get("answer"), r.get("model"))


def reask(trace_path: str | Path, client: ChatClient, roles: Iterable[str] = ROLE_SCHEMAS) -> list[dict]:
    """Each recorded request sent to ``client``'s model with the role's schema; one row per request with
    the recorded answer and the new one (server faults raise :class:`AgentServerError`, as in a run)."""
    from neurorefiner.agents.vlm.roles import ADVISOR_SCHEMA, INSPECTOR_SCHEMA, VALIDATOR_SCHEMA

    schemas = {"inspector": INSPECTOR_SCHEMA, "advisor": ADVISOR_SCHEMA, "validator": VALIDATOR_SCHEMA}
    rows = []
    for r in recorded_requests(trace_path, roles):
        reply = client.chat(r.prompt, r.images, schemas[r.role], schema_name=r.role)
        rows.append({"role": r.role, "round": r.round, "block": r.block, "defect": r.defect, "attempt": r.attempt,
                     "model": r.model, "answer": r.answer, "new_model": client.model, "new_answer": reply.content,
                     "seconds": round(reply.seconds, 3)})
    return rows
