"""``report.html``: what the agents saw, said and did, in one self-contained file (pictures as base64).

Built from the trace alone plus the image and the two masks, so a resumed run's report covers the
decisions of every attempt of the run. Shows the global MIP before and after, each round's summary,
each try (block, instruction, the window's image and the change, verdict and reason), the escalated
blocks, time per role and every note (dropped answers, fallbacks).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence

import numpy as np

from neurorefiner.agents.trace import decode_mask
from neurorefiner.topology.blocks import Block, slices_from_list
from neurorefiner.topology.views import change_png, global_mask_png, png_bytes, side_by_side, xy_view, yz_view

_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
.ok{color:#1a7f37;font-weight:bold}.no{color:#b3261e;font-weight:bold}img{image-rendering:pixelated;max-width:100%}
.pair{display:flex;gap:1em;flex-wrap:wrap}.small{color:#666;font-size:90%}"""


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


def build_report(records: Sequence[dict], image: np.ndarray, before: np.ndarray, after: np.ndarray,
                 blocks: Sequence[Block], summary: dict, max_tries: int = 200) -> str:
    decisions = latest_decisions(records)
    flagged = sorted({f["block"] for r in decisions if r["role"] == "inspector" for f in r["decision"]["flags"]})
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>neurorefiner report</title>"
             f"<style>{_CSS}</style></head><body><h1>Refinement report</h1>"]
    parts.append("<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in summary.items()
                                     if k != "escalated_blocks") + "</table>")
    parts.append("<h2>Global view (z-MIP; red = blocks flagged in some round)</h2><div class='pair'>")
    parts.append("<div><p>before</p>" + _img(global_mask_png(before, blocks, flagged), "mask before") + "</div>")
    parts.append("<div><p>after</p>" + _img(global_mask_png(after, blocks, flagged), "mask after") + "</div></div>")

    rounds = [r for r in records if r.get("type") == "round_done"]
    if rounds:
        last = {r["round"]: r for r in rounds}
        parts.append("<h2>Rounds</h2><table><tr><th>round</th><th>blocks</th><th>defects</th><th>fixed</th>"
                     "<th>waiting (cap)</th><th>voxels changed</th></tr>")
        for t in sorted(last):
            r = last[t]
            cells = [t + 1] + [r.get(k, 0) for k in ("flagged", "defects", "fixed", "waiting", "changed")]
            parts.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append("</table>")

    edits = {(r["round"], r["block"], r["defect"], r["attempt"]): r for r in decisions if r["role"] == "editor"}
    verdicts = {(r["round"], r["block"], r["defect"], r["attempt"]): r for r in decisions if r["role"] == "validator"}
    advice = {(r["round"], r["block"], r["defect"], r["attempt"]): r for r in decisions if r["role"] == "advisor"}
    parts.append(f"<h2>Edits ({len(edits)} tries)</h2>")
    if len(edits) > max_tries:
        parts.append(f"<p class='small'>showing the first {max_tries}</p>")
    for key in sorted(edits)[:max_tries]:
        e, v, a = edits[key], verdicts.get(key), advice.get(key)
        window = slices_from_list(e["window"])
        b, aft = decode_mask(e["before"]), decode_mask(e["after"])
        img = image[window]
        pictures = _img(png_bytes(side_by_side([xy_view(img), yz_view(img)]), 3), "image window") + \
            _img(change_png(b, aft), "change: green added, magenta removed")
        accepted = v is not None and v["decision"]["accept"]
        verdict = "<span class='ok'>ACCEPT</span>" if accepted else "<span class='no'>REJECT</span>"
        reasoning = a.get("decision", {}).get("reason", "") if a and a.get("decision") else ""
        parts.append(f"<h3>round {key[0] + 1}, block {key[1]}, defect {key[2]}, try {key[3] + 1}</h3>"
                     f"<p><b>{_e(e['decision']['instruction'])}</b> <span class='small'>(window z,y,x "
                     f"{_e(e['window'])}; +{e['decision']['added']} / -{e['decision']['removed']} voxels; "
                     f"advisor: {_e(a['backend'] if a else '?')}: {_e(reasoning)})</span></p>"
                     f"<div class='pair'>{pictures}</div>"
                     f"<p>{verdict} {_e(v['decision']['reason'] if v else 'no verdict')} "
                     f"<span class='small'>validator: {_e(v['backend'] if v else '?')}</span></p>")

    escalated = summary.get("escalated_blocks") or []
    parts.append("<h2>Escalated (for a person)</h2>")
    if escalated:
        parts.append("<table><tr><th>block</th><th>defect</th><th>last instruction</th><th>why</th></tr>")
        for item in escalated:
            parts.append(f"<tr><td>{_e(item['block'])}</td><td>{_e(item['kind'])} {_e(item['key'])}</td>"
                         f"<td>{_e(item.get('instruction', ''))}</td><td>{_e(item['reason'])}</td></tr>")
        parts.append("</table>")
    else:
        parts.append("<p>none</p>")
    notes = [(r["role"], r["round"], r.get("block"), n) for r in decisions for n in r.get("notes") or []]
    if notes:
        parts.append("<h2>Notes (dropped answers, fallbacks)</h2><ul>")
        parts += [f"<li>{_e(role)}, round {t + 1}, block {_e(b)}: {_e(n)}</li>" for role, t, b, n in notes[:500]]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
