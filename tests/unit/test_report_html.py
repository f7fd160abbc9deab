"""report.html for a person, on a trace written by hand (``test_review_session.write_run``: an accepted join
in block 0, a rejected removal in block 1 escalated without anchors, as a VLM Inspector leaves it): the
global views are marked, instructions are placed in their block, the escalation has coordinates and links
to its tries, the page keeps to its byte budget, and, where Debian's Chromium is installed, the page renders
in a headless browser with the marks visible."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from neurorefiner.agents.trace import read_trace
from neurorefiner.refine.report import build_report
from neurorefiner.refine.report_marks import ADDED, ESCALATED
from neurorefiner.topology.blocks import grid_blocks
from tests.unit.test_review_session import SHAPE, write_run


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.alts: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and a.get("href", "").startswith("#"):
            self.links.append(a["href"][1:])
        if tag == "img":
            self.alts.append(a.get("alt", ""))
            assert a["src"].startswith("data:image/png;base64,")


def report(tmp: Path, **kw) -> str:  # type: ignore[no-untyped-def]
    out, initial, refined = write_run(tmp)
    records = read_trace(out / "trace.jsonl")
    escalated = [{"block": 1, "defect": 0, "round": 0, "key": "FP:", "kind": "FP", "status": "escalated",
                  "reason": "1 tries rejected", "instruction": "Remove isolated noise at c"}]
    summary = {"image": "img.tif", "accepted": 1, "escalated": 1, "escalated_blocks": escalated}
    return build_report(records, np.zeros(SHAPE, np.float32), initial, refined, grid_blocks(SHAPE, 16), summary,
                        **kw)


def test_the_report_marks_places_in_block_terms_and_gives_escalations_coordinates(tmp_path: Path) -> None:
    html = report(tmp_path)
    page = _Page()
    page.feed(html)
    assert page.alts[:2] == ["mask before, edits and escalations marked", "mask after, edits and escalations marked"]
    assert {"global", "escalated", "edits", "r1-b0-d0-t1", "r1-b1-d0-t1"} <= page.ids
    assert page.links == ["r1-b1-d0-t1"]                         # the escalation links to its try
    # the escalation named only its block: coordinates from the window tried (z 0-7, y 0-15, x 16-31)
    assert "z 4, y 8, x 24" in html and "edit windows tried" in html
    assert "<b>Connect at a to b</b> in block 0, y 0-15, x 0-15, z 0-7 of the block" in html
    assert "in block 1, y 0-15, x 0-15, z 0-7 of the block" in html
    assert "r1-b0-d0-t1 <span class='add'>e1</span>" in html     # the accepted edit's label on the views
    assert html.index("id='escalated'") < html.index("id='edits'")  # what a person must do comes first


def _pictures(html: str) -> list[np.ndarray]:
    """The page's PNGs, decoded (RGB in [0, 1]), in page order."""
    import base64
    import io
    import re

    import matplotlib.image as mpimg

    return [mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")[..., :3]
            for data in re.findall(r"src=\"data:image/png;base64,([^\"]+)\"", html)]


def test_the_before_view_is_the_initial_mask_and_the_after_view_the_refined_one(tmp_path: Path) -> None:
    """Both global views coloured every accepted edit's added voxels, so the before view carried the
    join and the two pictures were byte-identical. Now the before view is the initial mask (the join's three
    voxels absent, its box still drawn) and the after view the refined one with the join in green."""
    before, after = _pictures(report(tmp_path))[:2]
    assert before.shape == after.shape and not np.array_equal(before, after)
    green = np.array([int(ADDED[i:i + 2], 16) / 255 for i in (1, 3, 5)])

    def greens(picture: np.ndarray) -> int:
        return int((np.abs(picture - green).max(axis=-1) < 0.08).sum())

    assert greens(after) > greens(before) + 300   # three voxels of about 15 x 15 pixels each, beyond the box


def test_pictures_stop_at_the_byte_budget(tmp_path: Path) -> None:
    full, lean = report(tmp_path / "a"), report(tmp_path / "b", max_bytes=1)
    assert lean.count("<img") == 2 and full.count("<img") == 2 + 2 * 2     # global views always; tries if room
    assert "pictures for the first 0 tries only" in lean and "r1-b1-d0-t1" in lean


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="no chromium on PATH (Debian: apt-get install chromium); the HTML test above still runs")
def test_the_page_renders_in_a_headless_browser_with_the_marks(tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    page = tmp_path / "report.html"
    page.write_text(report(tmp_path))
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,1000", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    pixels = mpimg.imread(shot)[..., :3]
    target = np.array([int(ESCALATED[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    assert pixels.shape[:2] == (1000, 1000) and pixels.std() > 0.05            # something was drawn
    assert (np.abs(pixels - target).max(axis=-1) < 0.08).sum() > 30             # the escalation's cross and label


def test_a_256_cube_report_with_every_try_the_loop_can_make_stays_under_5_mb() -> None:
    """The worst page ``refine.py`` can write for a 256^3 volume: noise for an image (PNG cannot compress it),
    the loop's most tries (t_max 5 rounds x 32 defects x 5 tries = 800, pictures for 200 within the budget),
    and every defect of the last round escalated, with 128-blocks."""
    from neurorefiner.agents.trace import encode_mask

    rng = np.random.default_rng(0)
    shape = (256, 256, 256)
    image = rng.random(shape, dtype=np.float32)
    before = rng.random(shape) < 0.01
    after = before.copy()
    blocks = grid_blocks(shape, 128)
    records, escalated = [], []
    coded: dict[tuple, tuple] = {}
    for n in range(800):
        rnd, defect, attempt = n // 160, (n // 5) % 32, n % 5
        block = defect % 4
        z0, y0, x0 = 16 * (defect % 14), blocks[block].origin[1] + 32 * (attempt % 3), blocks[block].origin[2] + 8
        window = [[z0, z0 + 32], [y0, y0 + 64], [x0, x0 + 64]]
        w = tuple(slice(a, b) for a, b in window)
        if (window[0][0], window[1][0], window[2][0]) not in coded:  # 42 distinct windows: encode each once
            changed = before[w] | (rng.random((32, 64, 64)) < 0.02)
            coded[(window[0][0], window[1][0], window[2][0])] = (encode_mask(before[w]), encode_mask(changed),
                                                                int((changed & ~before[w]).sum()))
        b_code, a_code, added = coded[(window[0][0], window[1][0], window[2][0])]
        base = {"type": "decision", "round": rnd, "block": block, "defect": defect, "attempt": attempt,
                "backend": "heuristic"}
        records += [{**base, "role": "advisor", "decision": {"instruction": "Repair break at top-left-rear",
                                                             "reason": "gap 8.0 vox between pieces, signal 0.9"}},
                    {**base, "role": "editor", "window": window, "before": b_code, "after": a_code,
                     "decision": {"instruction": "Repair break at top-left-rear", "added": added, "removed": 0}},
                    {**base, "role": "validator", "decision": {"accept": attempt == 4 and defect % 2 == 0,
                                                               "reason": "joined: 4 -> 3 components"}}]
        if rnd == 4 and attempt == 4 and defect % 2:
            escalated.append({"block": block, "defect": defect, "round": rnd, "key": "FN:", "kind": "FN",
                              "reason": "5 tries rejected", "instruction": "Repair break at top-left-rear"})
    summary = {"shape": list(shape), "escalated_blocks": escalated}
    html = build_report(records, image, before, after, blocks, summary)
    size = len(html.encode("utf-8"))
    print(f"report.html for a 256^3 volume, 800 tries, {len(escalated)} escalations: {size / 1e6:.2f} MB")
    assert size < 5_000_000
    assert "pictures for the first" in html and html.count("class='escalation'") == len(escalated) == 16
