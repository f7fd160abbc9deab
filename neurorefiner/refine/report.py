"""``report.html``: what the agents saw, said and did, in one self-contained file (pictures as base64),
written for the person who has to check the result and settle what the agents could not.

Built from the trace alone plus the image and the two masks, so a resumed run's report covers the
decisions of every attempt of the run. The global z-MIPs of the initial mask (before) and the refined one
(after) carry the block grid with ids, every accepted edit (a dashed box with its label ``e1``, ``e2``...; the
voxels it removed in magenta on the before view, those it added in green on the after view) and every escalated
defect (a cross labelled ``x1``, ``x2``... with its block). Each try says its
instruction in block terms (where the editor's window sits in which block), shows the window's image and
the change, and the verdict; each escalation gets voxel coordinates, also when a VLM Inspector named only
the block (then from the windows tried, see :func:`~neurorefiner.refine.report_marks.locate`). Pictures
stop at a byte budget (``max_bytes``) and the rest of the tries are listed as text, so a large run still
opens in a browser: a 256^3 volume stays well under 5 MB.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neurorefiner.agents.trace import decode_mask
from neurorefiner.refine.report_marks import ESCALATED, at, in_block_terms, locate, marked_global_png
from neurorefiner.topology.blocks import Block, slices_from_list
from neurorefiner.topology.views import change_png, png_bytes, side_by_side, xy_view, yz_view

_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.ok{color:#1a7f37;font-weight:bold}.no{color:#b3261e;font-weight:bold}img{image-rendering:pixelated;max-width:100%}
.pair{display:flex;gap:1em;flex-wrap:wrap}.small{color:#666;font-size:90%}
.add{color:#1a9e3f}.rem{color:#d61fd6}""" + f".esc{{color:{ESCALATED};font-weight:bold}}"


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _e(x: object) -> str:
    return html.escape(str(x))


def latest_decisions(records: Sequence[dict]) -> list[dict]:
    """Decision records, the last of each (role, round, block, defect, try): a resumed run redoes the
    tries of the block that was cut short."""
    seen: dict[tuple, dict] = {}
    for r in records:
        if r.get("type") == "decision":
            seen[(r["role"], r["round"], r.get("block"), r.get("defect"), r.get("attempt"))] = r
    return list(seen.values())


Key = tuple  # (round, block, defect, try)


def _key(r: dict) -> Key:
    return r["round"], r["block"], r["defect"], r["attempt"]


def try_id(key: Key) -> str:
    """The name a try has in the report, the review plugin and its trace records (1-based round and try)."""
    return f"r{key[0] + 1}-b{key[1]}-d{key[2]}-t{key[3] + 1}"


def escalation_places(escalated: Sequence[dict], edits: dict[Key, dict], blocks: Sequence[Block]) -> list[dict]:
    """Each escalated defect with ``centre`` (ZYX voxels), ``located_by`` and the ids of its ``tries``."""
    by_id = {b.id: b for b in blocks}
    out = []
    for item in escalated:
        mine = sorted(k for k in edits if (k[0], k[1], k[2]) == (item.get("round"), item["block"], item.get("defect")))
        windows = [slices_from_list(edits[k]["window"]) for k in mine]
        centre, how = locate(str(item.get("key", "")), windows, by_id.get(item["block"]))
        last = in_block_terms(windows[-1], by_id[item["block"]]) if windows and item["block"] in by_id else ""
        out.append({**item, "centre": centre, "located_by": how, "tries": [try_id(k) for k in mine],
                    "last_place": last})
    return out


@dataclass
class _Run:
    """What the report reads from the trace: the latest decisions, the flagged blocks, each try's edit, verdict
    and advice by (round, block, defect, try), the accepted tries with their labels (e1, e2, ...) and the
    escalated defects placed in the volume."""

    decisions: list[dict]
    flagged: list[int]
    edits: dict[Key, dict]
    verdicts: dict[Key, dict]
    advice: dict[Key, dict]
    label: dict[Key, str]
    places: list[dict]

    @property
    def accepted(self) -> list[Key]:
        return list(self.label)


def _read_run(records: Sequence[dict], blocks: Sequence[Block], summary: dict) -> _Run:
    """The trace's decisions sorted into what each section of the page shows."""
    decisions = latest_decisions(records)
    flagged = sorted({f["block"] for r in decisions if r["role"] == "inspector" for f in r["decision"]["flags"]})
    edits = {_key(r): r for r in decisions if r["role"] == "editor" and "window" in r}
    verdicts = {_key(r): r for r in decisions if r["role"] == "validator"}
    advice = {_key(r): r for r in decisions if r["role"] == "advisor"}
    accepted = [k for k in sorted(edits) if (verdicts.get(k) or {}).get("decision", {}).get("accept")]
    places = escalation_places(summary.get("escalated_blocks") or [], edits, blocks)
    return _Run(decisions, flagged, edits, verdicts, advice, {k: f"e{i + 1}" for i, k in enumerate(accepted)},
                places)


def _head(summary: dict) -> list[str]:
    """The page's head and the run's summary as a table."""
    return [f"<!doctype html><html><head><meta charset='utf-8'><title>neurorefiner report</title>"
            f"<style>{_CSS}</style></head><body><h1>Refinement report</h1>",
            "<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in summary.items()
                                if k != "escalated_blocks") + "</table>"]


def _global_views(run: _Run, before: np.ndarray, after: np.ndarray, blocks: Sequence[Block]) -> list[str]:
    """The z-MIPs of the initial and the refined mask, each marked with the grid, the accepted edits' boxes and
    the escalations; the before view colours the voxels the edits removed, the after view those they added."""
    marks = [(slices_from_list(run.edits[k]["window"]), decode_mask(run.edits[k]["before"]),
              decode_mask(run.edits[k]["after"]), f"{run.label[k]} b{k[1]}") for k in run.accepted]
    crosses = [(p["centre"], f"x{i + 1} b{p['block']}") for i, p in enumerate(run.places)]

    def view(mask: np.ndarray, changes: tuple[str, ...]) -> bytes:
        return marked_global_png(mask, blocks, run.flagged, marks, crosses, changes=changes)

    return ["<h2 id='global'>Global view (z-MIP)</h2><p class='small'>Block grid with ids (b0, b1, ...; red = "
            "flagged in some round). Before: the initial mask, <span class='rem'>magenta</span> = voxels an "
            "accepted edit removed; after: the refined mask, <span class='add'>green</span> = voxels one added. "
            "A dashed box is an accepted edit (label e<i>n</i> and its block, listed under Edits); <span "
            "class='esc'>x<i>n</i></span> = a defect escalated to you (listed under Escalated).</p><div class='pair'>",
            "<div><p>before</p>" + _img(view(before, ("removed",)), "mask before, edits and escalations marked")
            + "</div>",
            "<div><p>after</p>" + _img(view(after, ("added",)), "mask after, edits and escalations marked")
            + "</div></div>"]


def _escalated(places: Sequence[dict]) -> list[str]:
    """What a person must settle: each escalated defect with its place, tries, last instruction and why."""
    parts = ["<h2 id='escalated'>Escalated (for a person)</h2>"]
    if not places:
        return [*parts, "<p>none</p>"]
    parts.append("<table><tr><th></th><th>block</th><th>defect</th><th>where (z, y, x voxels)</th>"
                 "<th>tries</th><th>last instruction</th><th>why</th></tr>")
    for i, p in enumerate(places):
        links = ", ".join(f"<a href='#{t}'>{t}</a>" for t in p["tries"]) or "none"
        parts.append(
            f"<tr class='escalation'><td class='esc'>x{i + 1}</td><td>{_e(p['block'])}</td>"
            f"<td>{_e(p['kind'])} {_e(p['key'])}</td><td>{_e(at(p['centre']))} <span class='small'>"
            f"({_e(p['located_by'])})</span></td><td>{links}</td><td>{_e(p.get('instruction', ''))}"
            f"{' <span class=small>in ' + _e(p['last_place']) + '</span>' if p['last_place'] else ''}</td>"
            f"<td>{_e(p['reason'])}</td></tr>")
    parts.append("</table><p class='small'>Settle them in napari: <code>neurorefiner review "
                 "OUT_FOLDER</code> (docs/review.md).</p>")
    return parts


def _rounds(records: Sequence[dict]) -> list[str]:
    """One row per round (its last record: a resumed round is counted once); nothing when none finished."""
    last = {r["round"]: r for r in records if r.get("type") == "round_done"}
    if not last:
        return []
    rows = []
    for t in sorted(last):
        cells = [t + 1] + [last[t].get(k, 0) for k in ("flagged", "defects", "fixed", "waiting", "changed")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ["<h2>Rounds</h2><table><tr><th>round</th><th>blocks</th><th>defects</th><th>fixed</th>"
            "<th>waiting (cap)</th><th>voxels changed</th></tr>", *rows, "</table>"]


def _try(run: _Run, key: Key, by_id: dict[int, Block], pictures: str) -> str:
    """One try: its instruction placed in its block, the change in voxels, the advisor's reason, the pictures
    (may be empty) and the verdict."""
    e, v, a = run.edits[key], run.verdicts.get(key), run.advice.get(key)
    block = by_id.get(key[1])
    place = in_block_terms(slices_from_list(e["window"]), block) if block is not None \
        else f"window z,y,x {_e(e['window'])}"
    verdict = "<span class='ok'>ACCEPT</span>" if v is not None and v["decision"]["accept"] \
        else "<span class='no'>REJECT</span>"
    reasoning = a.get("decision", {}).get("reason", "") if a and a.get("decision") else ""
    tag = f" <span class='add'>{run.label[key]}</span>" if key in run.label else ""
    return (f"<h3 id='{try_id(key)}'>{try_id(key)}{tag}: round {key[0] + 1}, block {key[1]}, defect {key[2]}, "
            f"try {key[3] + 1}</h3><p><b>{_e(e['decision']['instruction'])}</b> in {_e(place)} "
            f"<span class='small'>(volume z,y,x {_e(e['window'])}; +{e['decision']['added']} / "
            f"-{e['decision']['removed']} voxels; advisor: {_e(a['backend'] if a else '?')}: "
            f"{_e(reasoning)})</span></p>{pictures}"
            f"<p>{verdict} {_e(v['decision']['reason'] if v else 'no verdict')} "
            f"<span class='small'>validator: {_e(v['backend'] if v else '?')}</span></p>")


def _try_pictures(edit: dict, image: np.ndarray) -> str:
    """The window's image (xy and yz views) beside the change (green added, magenta removed)."""
    window = slices_from_list(edit["window"])
    img = image[window]
    return ("<div class='pair'>" + _img(png_bytes(side_by_side([xy_view(img), yz_view(img)]), 3), "image window")
            + _img(change_png(decode_mask(edit["before"]), decode_mask(edit["after"])),
                   "change: green added, magenta removed") + "</div>")


def _edits(run: _Run, image: np.ndarray, blocks: Sequence[Block], used: int, max_tries: int,
           max_bytes: int) -> list[str]:
    """Every try in order; pictures for the first ``max_tries`` while the page (``used`` bytes so far) stays
    under ``max_bytes``, the rest as text, so a large run still opens in a browser."""
    by_id = {b.id: b for b in blocks}
    parts = [f"<h2 id='edits'>Edits ({len(run.edits)} tries, {len(run.accepted)} accepted)</h2>"]
    used += len(parts[0])
    pictured = 0
    for key in sorted(run.edits):
        pictures = ""
        if pictured < max_tries and used < max_bytes:
            pictures = _try_pictures(run.edits[key], image)
            pictured += 1
        parts.append(_try(run, key, by_id, pictures))
        used += len(parts[-1])
    if pictured < len(run.edits):
        parts.append(f"<p class='small'>pictures for the first {pictured} tries only (at most {max_tries}, and "
                     f"{max_bytes / 1e6:g} MB of pictures for the page); the rest are listed as text</p>")
    return parts


def _notes(decisions: Sequence[dict]) -> list[str]:
    """The roles' notes (dropped answers, fallbacks), at most 500; nothing when there are none."""
    notes = [(r["role"], r["round"], r.get("block"), n) for r in decisions for n in r.get("notes") or []]
    if not notes:
        return []
    return ["<h2>Notes (dropped answers, fallbacks)</h2><ul>",
            *[f"<li>{_e(role)}, round {t + 1}, block {_e(b)}: {_e(n)}</li>" for role, t, b, n in notes[:500]],
            "</ul>"]


def build_report(records: Sequence[dict], image: np.ndarray, before: np.ndarray, after: np.ndarray,
                 blocks: Sequence[Block], summary: dict, max_tries: int = 200, max_bytes: int = 3_500_000) -> str:
    """The page (module docstring): summary, the global before/after views, what was escalated, the rounds, every
    try and the roles' notes. ``before`` is the initial mask, ``after`` the refined one."""
    run = _read_run(records, blocks, summary)
    parts = [*_head(summary), *_global_views(run, before, after, blocks), *_escalated(run.places),
             *_rounds(records)]
    parts += _edits(run, image, blocks, sum(len(x) for x in parts), max_tries, max_bytes)
    parts += [*_notes(run.decisions), "</body></html>"]
    return "\n".join(parts)
