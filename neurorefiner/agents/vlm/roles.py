"""The three roles through a vision-language model (prompts in ``agents/prompts``, pictures as PNG).

* Inspector: the global mask MIP with block ids, every non-empty block's mask MIP (tiled into one or two
  mosaics with the ids drawn, so every block it judges is seen within the server's image limit; or, with
  ``block_views="calls"``, a few blocks per request over several requests), and each block's Betti-0 as
  text (which of these are sent is the Table 5 switch); answer ``{"flags": [...]}``. Block ids that do not
  exist and error types other than FN/FP are dropped and noted in the trace.
* Advisor: the block's image and mask in xy and yz; answer an instruction of the grammar whose
  positions name cells of the *block*. The loop's editor works on a smaller frame, so the instruction is
  re-expressed in the frame centred on the named place (same voxels, the frame's own cells); feedback on
  earlier tries quotes them as the model said them, in the block's frame. An answer that is not an
  instruction is a failed try (:class:`~neurorefiner.agents.roles.UnreadableAdvice`): the loop keeps it and
  asks again, and the feedback quotes the answer and the grammar.
* Validator: the edited window's mask before and after (xy | yz), the instruction; ACCEPT or REJECT.

Every request (rendered prompt, pictures) and every answer, verbatim, goes into the call's
``CallInfo.requests``; the trace stores the prompts and pictures by hash beside itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.editor import frame_around
from neurorefiner.agents.prompts import Prompt, load_prompt
from neurorefiner.agents.roles import (
    KINDS,
    Advice,
    Attempt,
    BlockContext,
    CallInfo,
    Defect,
    Flag,
    GlobalView,
    Inspection,
    RoleError,
    Step,
    UnreadableAdvice,
    Verdict,
)
from neurorefiner.agents.vlm.client import ChatClient, ChatReply
from neurorefiner.agents.vlm.parsing import AnswerParseError, parse_json
from neurorefiner.agents.vlm.pictures import block_mosaics
from neurorefiner.topology.blocks import all_block_stats, label_components
from neurorefiner.topology.instructions import GRAMMAR, Instruction, InstructionParseError, parse_instruction
from neurorefiner.topology.positions import Position, cell_index, hull_slices
from neurorefiner.topology.views import global_mask_png, png_bytes, side_by_side, xy_view, yz_view

QUOTE_CHARS = 600  # how much of an unreadable answer the feedback quotes back

INSPECTOR_SCHEMA = {
    "type": "object",
    "properties": {"flags": {"type": "array", "items": {
        "type": "object",
        "properties": {"block": {"type": "integer"}, "error": {"type": "string", "enum": list(KINDS)}},
        "required": ["block", "error"]}}},
    "required": ["flags"],
}
ADVISOR_SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string"}, "instruction": {"type": "string"}},
                  "required": ["instruction"]}
VALIDATOR_SCHEMA = {"type": "object", "properties": {"decision": {"type": "string", "enum": ["ACCEPT", "REJECT"]},
                                                     "reason": {"type": "string"}},
                    "required": ["decision", "reason"]}


def _info(name: str, prompt: Prompt, reply: ChatReply | None, t0: float, requests: list[dict]) -> CallInfo:
    tokens = None
    if reply is not None:
        tokens = {**reply.tokens, "tries": reply.tries, "latency": round(reply.seconds, 3)}
        if len(requests) > 1:
            tokens["asked"] = len(requests)
    return CallInfo(name, prompt.id, None if reply is None else reply.content, time.perf_counter() - t0, tokens,
                    requests=requests)


def quote(text: str | None) -> str:
    """An answer as feedback quotes it: verbatim, cut at :data:`QUOTE_CHARS`."""
    t = "" if text is None else str(text).strip()
    return t if len(t) <= QUOTE_CHARS else t[:QUOTE_CHARS] + " [...]"


def read_instruction(content: str | None) -> tuple[Instruction | None, str, str]:
    """(instruction, why not, reasoning) from an Advisor's answer, through the tolerant grammar parser: the
    JSON ``instruction`` (any case; also ``command`` or ``correction``) when the answer names one; otherwise
    (no JSON, as the paper's prompt asks, or JSON without that key) the text line by line from the end, then
    as a whole. ``why`` says what failed when nothing parses."""
    text = "" if content is None else str(content)
    if not text.strip():
        return None, "empty answer", ""
    reasoning, candidates = "", []
    try:
        answer = {str(k).strip().lower(): v for k, v in parse_json(text).items()}
        reasoning = str(answer.get("reasoning", answer.get("reason", "")))
        said = next((answer[k] for k in ("instruction", "command", "correction") if k in answer), None)
        if said is not None and str(said).strip():
            candidates.append(str(said))  # the model named its instruction: only that is read (not its reasoning)
    except AnswerParseError:
        pass
    if not candidates:
        lines = [ln.strip(" -*`\"'") for ln in text.splitlines() if ln.strip()]
        candidates = lines[::-1] + [text]
    first_error = ""
    for c in candidates:
        try:
            return parse_instruction(c), "", reasoning
        except InstructionParseError as exc:
            first_error = first_error or exc.problem
    return None, f"outside the grammar: {first_error}", reasoning


def read_flags(answer: dict, valid_ids: set[int]) -> tuple[dict[int, str], list[str]]:
    """``{"flags": [{"block", "error"}]}`` or the paper's ``{"3": "FN"}`` -> {block: kind}, and notes on what
    was dropped (unknown block ids, unknown error types)."""
    items: list[tuple[object, object]] = []
    if isinstance(answer.get("flags"), list):
        items = [(f.get("block"), f.get("error")) for f in answer["flags"] if isinstance(f, dict)]
    else:
        items = list(answer.items())
    flags: dict[int, str] = {}
    notes = []
    for bid, kind in items:
        try:
            b = int(str(bid).strip())
        except ValueError:
            notes.append(f"ignored block id {bid!r}: not a number")
            continue
        k = str(kind).strip().upper()
        if b not in valid_ids:
            notes.append(f"ignored block id {b}: no such block")
        elif k not in KINDS:
            notes.append(f"ignored error type {kind!r} for block {b}: not FN or FP")
        else:
            flags[b] = k
    return flags, notes


def block_to_frame(instruction: Instruction, ctx: BlockContext) -> tuple[Instruction, object]:
    """An instruction whose positions name cells of the block -> the same place in an editor frame
    centred on it (each position becomes the frame cell holding that block cell's centre)."""
    bsl = ctx.block_in_region
    shape = tuple(s.stop - s.start for s in bsl)
    hull = hull_slices(list(instruction.positions), shape)
    centre = np.array([(h.start + h.stop) / 2.0 + b.start for h, b in zip(hull, bsl)])
    frame = frame_around(centre, ctx.editor_size, ctx.mask.shape)
    moved = []
    for p in instruction.positions:
        cell = p.slices(shape)
        c = np.array([[(s.start + s.stop - 1) / 2.0 + b.start for s, b in zip(cell, bsl)]])
        f = np.clip(frame.to_frame(c), 0, np.array(frame.shape) - 1)
        moved.append(Position.from_cell(cell_index(f, frame.shape)[0]))
    return Instruction(instruction.op, moved[0], moved[1] if len(moved) > 1 else None), frame  # type: ignore[return-value]


class _Role:
    role = ""

    def __init__(self, client: ChatClient, prompt_path: str | None = None, answer_retries: int = 1) -> None:
        if int(answer_retries) < 0:
            raise ValueError(f"answer_retries must be >= 0, got {answer_retries}")
        self.client = client
        self.prompt = load_prompt(self.role, prompt_path)
        self.answer_retries = int(answer_retries)
        self.name = f"vlm:{client.model}"

    def request(self, text: str, images: Sequence[bytes], reply: ChatReply) -> dict:
        """One request as the trace keeps it (the writer stores prompt and pictures by hash)."""
        out = {"model": self.client.model, "schema": self.role, "prompt": text, "images": list(images),
               "answer": reply.content, "structured": reply.structured}
        if reply.rejected:  # answers the client asked again for because they broke the schema
            out["rejected_answers"] = list(reply.rejected)
        return out

    def ask(self, text: str, images: Sequence[bytes], schema: dict
            ) -> tuple[dict | None, ChatReply, list[str], list[dict]]:
        """Ask; an answer that holds no JSON is asked again (``answer_retries`` times) with feedback that
        quotes it. (parsed or None, last reply, notes, every request with its answer)."""
        notes: list[str] = []
        requests: list[dict] = []
        asked = text
        for _ in range(self.answer_retries + 1):
            reply = self.client.chat(asked, images, schema, schema_name=self.role)
            requests.append(self.request(asked, images, reply))
            try:
                return parse_json(reply.content), reply, notes, requests
            except AnswerParseError as exc:
                notes.append(f"unreadable answer: {exc}")
                asked = (f"{text}\n\n# Your previous answer could not be read\nYou answered:\n<<<\n"
                         f"{quote(reply.content)}\n>>>\nIt holds no JSON object. Answer again with the JSON object "
                         "described above and nothing else.")
        return None, reply, notes, requests


class VLMInspector(_Role):
    """The Inspector through a model server. ``block_views``: ``"mosaic"`` tiles every non-empty block's
    mask MIP into at most ``max_images - 1`` mosaics beside the overview, in one request; ``"calls"`` sends
    the overview and ``max_images - 1`` block MIPs per request and asks as many times as it takes, each
    request judging its own blocks (the union of the flags is the answer)."""

    role = "inspector"

    def __init__(self, client: ChatClient, prompt_path: str | None = None, answer_retries: int = 1,
                 block_views: str = "mosaic", max_images: int = 4, max_mosaics: int = 2, per_mosaic: int = 36,
                 mosaic_side: int = 1024, depth_coded: bool = False) -> None:
        super().__init__(client, prompt_path, answer_retries)
        if block_views not in ("mosaic", "calls"):
            raise ValueError(f"block_views must be 'mosaic' or 'calls', got {block_views!r}")
        if max_images < 2:
            raise ValueError(f"max_images must be >= 2 (the overview and at least one block picture), got {max_images}")
        self.block_views, self.max_images = block_views, int(max_images)
        self.max_mosaics, self.per_mosaic, self.mosaic_side = int(max_mosaics), int(per_mosaic), int(mosaic_side)
        self.depth_coded = bool(depth_coded)

    def inspect(self, view: GlobalView) -> Inspection:
        t0 = time.perf_counter()
        labels, _ = label_components(view.mask)
        stats = all_block_stats(view.mask, view.blocks, labels)
        inputs = view.inputs or ("global_mip",)
        overview: list[bytes] = []
        if "global_mip" in inputs:
            overview.append(global_mask_png(view.mask, view.blocks, depth_coded=self.depth_coded))
        table = ""
        if "betti0" in inputs:
            rows = [f"block {s.block.id}: {s.betti0} components" + (f" (sizes {list(s.component_sizes[:6])})"
                                                                   if s.betti0 > 1 else "")
                    for s in stats if s.foreground]
            table = "Connected components (Betti-0, 26-connected, 3D) per non-empty block:\n" + "\n".join(rows)
        seen = [s.block for s in stats if s.foreground] if "block_mips" in inputs else []
        room = self.max_images - len(overview)
        if not seen:
            groups: list[tuple[list[bytes], list[str], list[int] | None]] = [([], [], None)]
        elif self.block_views == "mosaic":
            mosaics = block_mosaics(view.mask, seen, min(self.max_mosaics, room), self.per_mosaic, self.mosaic_side)
            lines = [f"the masks of blocks {', '.join(map(str, ids))}, one tile per block (projected along z), "
                     "each tile's block id in its top-left corner" for _, ids in mosaics]
            groups = [([png for png, _ in mosaics], lines, None)]
        else:
            groups = []
            for i in range(0, len(seen), room):
                part = seen[i: i + room]
                pictures = [png_bytes(xy_view(view.mask[b.slices]).astype(np.float32), 2) for b in part]
                groups.append((pictures, [f"the mask of block {b.id}, projected along z" for b in part],
                               [b.id for b in part]))
        valid = {b.id for b in view.blocks}
        kinds: dict[int, str] = {}
        notes: list[str] = []
        requests: list[dict] = []
        reply = None
        for pictures, lines, judged in groups:
            described = []
            if overview:
                described.append("1. the overview: the mask projected along z, with the block grid and each "
                                 "block's id" + (" (colour = depth)" if self.depth_coded else ""))
            described += [f"{len(described) + 1}. {line}" for line in lines]
            if judged is not None:
                described.append(f"In this request judge only blocks {', '.join(map(str, judged))}; the other "
                                 "blocks are judged in other requests.")
            text = self.prompt.render(inputs_list="\n".join(described) or "(no pictures)", n_blocks=len(view.blocks),
                                      last_block=len(view.blocks) - 1, betti_table=table)
            answer, reply, asked_notes, asked = self.ask(text, overview + pictures, INSPECTOR_SCHEMA)
            notes += asked_notes
            requests += asked
            if answer is None:
                info = _info(self.name, self.prompt, reply, t0, requests)
                info.notes += notes
                raise RoleError(f"the model's inspection answer held no JSON after {len(asked)} asks "
                                f"(last answer: {quote(reply.content)[:120]!r})", info)
            found, dropped = read_flags(answer, valid if judged is None else set(judged))
            notes += dropped
            kinds.update(found)
        info = _info(self.name, self.prompt, reply, t0, requests)
        info.notes += notes
        flags = {b: Flag(b, k, (), "flagged by the model") for b, k in sorted(kinds.items())}
        return Inspection(flags, info)


class VLMAdvisor(_Role):
    role = "advisor"

    def feedback(self, history: Sequence[Attempt]) -> str:
        """Earlier tries on this defect, in the model's own frame (the block it was shown): a rejected
        instruction as the model said it, an unreadable answer quoted with the grammar."""
        if not history:
            return ""
        lines, unreadable = [], False
        for h in history:
            reason = h.verdict.reason if h.verdict else "?"
            if h.advice is not None:
                said = h.advice.said or h.advice.instruction.format()
                lines.append(f'- "{said}" was tried and rejected: {reason}')
            else:
                unreadable = True
                raw = h.verdict.info.raw if h.verdict is not None else None
                lines.append(f"- your answer could not be used ({reason}). You answered:\n<<<\n{quote(raw)}\n>>>")
        text = "\nEarlier tries on this block (say something different):\n" + "\n".join(lines) + "\n"
        if unreadable:
            text += ("Write exactly one instruction in this grammar, in the JSON answer's \"instruction\":\n"
                     + GRAMMAR + "\n")
        return text

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        t0 = time.perf_counter()
        b = ctx.block_in_region
        img, msk = ctx.image[b], ctx.mask[b].astype(np.float32)
        images = [png_bytes(xy_view(img), 2), png_bytes(xy_view(msk), 2), png_bytes(yz_view(img), 2),
                  png_bytes(yz_view(msk), 2)]
        kind = defect.kind or flag.kind
        text = self.prompt.render(error_type=f"{kind} ({'break' if kind == 'FN' else 'noise'})",
                                  feedback=self.feedback(history), grammar=GRAMMAR)
        reply = self.client.chat(text, images, ADVISOR_SCHEMA, schema_name=self.role)
        info = _info(self.name, self.prompt, reply, t0, [self.request(text, images, reply)])
        said, why, reasoning = read_instruction(reply.content)
        if said is None:
            info.notes.append(f"unreadable answer: {why}")
            raise UnreadableAdvice(why, info)
        ins, frame = block_to_frame(said, ctx)
        info.notes.append(f"block-relative: {said.format()}")
        return Advice(ins, frame, info, reason=reasoning, said=said.format())  # type: ignore[arg-type]


class VLMValidator(_Role):
    role = "validator"

    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict:
        t0 = time.perf_counter()
        a = png_bytes(side_by_side([xy_view(before).astype(np.float32), yz_view(before).astype(np.float32)]), 3)
        b = png_bytes(side_by_side([xy_view(after).astype(np.float32), yz_view(after).astype(np.float32)]), 3)
        text = self.prompt.render(instruction=advice.instruction.format(), error_type=defect.kind or flag.kind)
        answer, reply, notes, requests = self.ask(text, [a, b], VALIDATOR_SCHEMA)
        info = _info(self.name, self.prompt, reply, t0, requests)
        info.notes += notes
        if answer is None:
            return Verdict(False, "rejected: the model's answer could not be read", info)
        decision = str(answer.get("decision", answer.get("result", ""))).strip().upper()
        reason = str(answer.get("reason", "")).strip()
        if decision not in ("ACCEPT", "REJECT"):
            info.notes.append(f"unknown decision {decision!r}, read as REJECT")
            decision = "REJECT"
        return Verdict(decision == "ACCEPT", reason or decision.lower(), info)
