"""The three roles through a vision-language model (prompts in ``agents/prompts``, pictures as PNG).

* Inspector: the global mask MIP with block ids, the MIPs of the blocks with most components, and each
  block's Betti-0 as text (which of these are sent is the Table 5 switch); answer ``{"flags": [...]}``.
  Block ids that do not exist and error types other than FN/FP are dropped and noted in the trace.
* Advisor: the block's image and mask in xy and yz; answer an instruction of the grammar whose
  positions name cells of the *block*. The loop's editor works on a smaller frame, so the instruction is
  re-expressed in the frame centred on the named place (same voxels, the frame's own cells).
* Validator: the edited window's mask before and after (xy | yz), the instruction; ACCEPT or REJECT.
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
    Step,
    Verdict,
)
from neurorefiner.agents.vlm.client import ChatClient, ChatReply
from neurorefiner.agents.vlm.parsing import AnswerParseError, parse_json
from neurorefiner.topology.blocks import all_block_stats, label_components
from neurorefiner.topology.instructions import GRAMMAR, Instruction, InstructionParseError, parse_instruction
from neurorefiner.topology.positions import Position, cell_index, hull_slices
from neurorefiner.topology.views import global_mask_png, png_bytes, side_by_side, xy_view, yz_view

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


def _info(name: str, prompt: Prompt, reply: ChatReply | None, t0: float) -> CallInfo:
    return CallInfo(name, prompt.id, None if reply is None else reply.content, time.perf_counter() - t0,
                    None if reply is None else {**reply.tokens, "tries": reply.tries,
                                                "latency": round(reply.seconds, 3)})


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
    return Instruction(instruction.op, moved[0], moved[1] if len(moved) > 1 else None), frame


class _Role:
    role = ""

    def __init__(self, client: ChatClient, prompt_path: str | None = None, answer_retries: int = 1) -> None:
        self.client = client
        self.prompt = load_prompt(self.role, prompt_path)
        self.answer_retries = int(answer_retries)
        self.name = f"vlm:{client.model}"

    def ask(self, text: str, images: Sequence[bytes], schema: dict) -> tuple[dict | None, ChatReply, list[str]]:
        """Ask, re-asking when the answer holds no JSON; (parsed or None, last reply, notes)."""
        notes = []
        for _ in range(self.answer_retries + 1):
            reply = self.client.chat(text, images, schema, schema_name=self.role)
            try:
                return parse_json(reply.content), reply, notes
            except AnswerParseError as exc:
                notes.append(f"unreadable answer: {exc}")
        return None, reply, notes


class VLMInspector(_Role):
    role = "inspector"

    def __init__(self, client: ChatClient, prompt_path: str | None = None, answer_retries: int = 1,
                 block_pictures: int = 3, depth_coded: bool = False) -> None:
        super().__init__(client, prompt_path, answer_retries)
        self.block_pictures, self.depth_coded = int(block_pictures), bool(depth_coded)

    def inspect(self, view: GlobalView) -> Inspection:
        t0 = time.perf_counter()
        labels, _ = label_components(view.mask)
        stats = all_block_stats(view.mask, view.blocks, labels)
        images: list[bytes] = []
        described = []
        if "global_mip" in view.inputs or not view.inputs:
            images.append(global_mask_png(view.mask, view.blocks, depth_coded=self.depth_coded))
            described.append(f"{len(images)}. the overview: the mask projected along z, with the block grid "
                             "and each block's id" + (" (colour = depth)" if self.depth_coded else ""))
        if "block_mips" in view.inputs:
            for st in sorted(stats, key=lambda s: (-s.betti0, s.block.id))[: self.block_pictures]:
                if st.foreground == 0:
                    continue
                images.append(png_bytes(xy_view(view.mask[st.block.slices]).astype(np.float32), 2))
                described.append(f"{len(images)}. the mask of block {st.block.id}, projected along z")
        table = ""
        if "betti0" in view.inputs:
            rows = [f"block {s.block.id}: {s.betti0} components" + (f" (sizes {list(s.component_sizes[:6])})"
                                                                   if s.betti0 > 1 else "")
                    for s in stats if s.foreground]
            table = "Connected components (Betti-0, 26-connected, 3D) per non-empty block:\n" + "\n".join(rows)
        text = self.prompt.render(inputs_list="\n".join(described) or "(no pictures)", n_blocks=len(view.blocks),
                                  last_block=len(view.blocks) - 1, betti_table=table)
        answer, reply, notes = self.ask(text, images, INSPECTOR_SCHEMA)
        info = _info(self.name, self.prompt, reply, t0)
        info.notes += notes
        if answer is None:
            from neurorefiner.agents.vlm.client import AgentServerError

            raise AgentServerError("the model's inspection answer held no JSON after re-asking")
        kinds, dropped = read_flags(answer, {b.id for b in view.blocks})
        info.notes += dropped
        flags = {b: Flag(b, k, (), "flagged by the model") for b, k in sorted(kinds.items())}
        return Inspection(flags, info)


class VLMAdvisor(_Role):
    role = "advisor"

    def advise(self, ctx: BlockContext, flag: Flag, defect: Defect, step: Step,
               history: Sequence[Attempt]) -> Advice | None:
        t0 = time.perf_counter()
        b = ctx.block_in_region
        img, msk = ctx.image[b], ctx.mask[b].astype(np.float32)
        images = [png_bytes(xy_view(img), 2), png_bytes(xy_view(msk), 2), png_bytes(yz_view(img), 2),
                  png_bytes(yz_view(msk), 2)]
        feedback = ""
        if history:
            lines = [f"- \"{h.advice.instruction.format() if h.advice else '?'}\" was rejected: "
                     f"{h.verdict.reason if h.verdict else '?'}" for h in history]
            feedback = "\nEarlier tries on this block (say something different):\n" + "\n".join(lines) + "\n"
        kind = defect.kind or flag.kind
        text = self.prompt.render(error_type=f"{kind} ({'break' if kind == 'FN' else 'noise'})", feedback=feedback,
                                  grammar=GRAMMAR)
        answer, reply, notes = self.ask(text, images, ADVISOR_SCHEMA)
        info = _info(self.name, self.prompt, reply, t0)
        info.notes += notes
        if answer is None or not str(answer.get("instruction", "")).strip():
            info.notes.append("no instruction in the answer")
            return None
        try:
            said = parse_instruction(str(answer["instruction"]))
        except InstructionParseError as exc:
            info.notes.append(f"instruction outside the grammar: {str(exc).splitlines()[0]}")
            return None
        ins, frame = block_to_frame(said, ctx)
        info.notes.append(f"block-relative: {said.format()}")
        return Advice(ins, frame, info, reason=str(answer.get("reasoning", "")))  # type: ignore[arg-type]


class VLMValidator(_Role):
    role = "validator"

    def validate(self, ctx: BlockContext, flag: Flag, defect: Defect, advice: Advice, before: np.ndarray,
                 after: np.ndarray, step: Step) -> Verdict:
        t0 = time.perf_counter()
        a = png_bytes(side_by_side([xy_view(before).astype(np.float32), yz_view(before).astype(np.float32)]), 3)
        b = png_bytes(side_by_side([xy_view(after).astype(np.float32), yz_view(after).astype(np.float32)]), 3)
        text = self.prompt.render(instruction=advice.instruction.format(), error_type=defect.kind or flag.kind)
        answer, reply, notes = self.ask(text, [a, b], VALIDATOR_SCHEMA)
        info = _info(self.name, self.prompt, reply, t0)
        info.notes += notes
        if answer is None:
            return Verdict(False, "rejected: the model's answer could not be read", info)
        decision = str(answer.get("decision", answer.get("result", ""))).strip().upper()
        reason = str(answer.get("reason", "")).strip()
        if decision not in ("ACCEPT", "REJECT"):
            info.notes.append(f"unknown decision {decision!r}, read as REJECT")
            decision = "REJECT"
        return Verdict(decision == "ACCEPT", reason or decision.lower(), info)
