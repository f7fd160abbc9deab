"""Where things happened, in terms a person can find: block ids, places inside a block, and the global
before/after views with the accepted edits and the escalated defects drawn on them.

An instruction names cells of the editor's window ("connect top-left-rear to bottom-left-front"), which
says nothing to someone looking at the whole volume; :func:`in_block_terms` places the window in its block.
A VLM Inspector names a block but no voxel, so an escalation it caused has no anchors and gets its
coordinates from the windows tried (see ``neurorefiner.review.history``). Shared by ``report.html`` and
the napari review plugin, so both say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.blocks import Block, Slices
from neurorefiner.topology.views import _agg, figure_png, xy_view

ADDED, REMOVED = "#1a9e3f", "#d61fd6"   # green, magenta: the colours of change_png and of the napari layer
ESCALATED = "#00b7ff"


def defect_anchors(key: str) -> list[tuple[int, int, int]]:
    """The anchors (ZYX voxels) encoded in a defect key (``"FN:z,y,x;z,y,x"``; ``"FN:"`` has none)."""
    _, _, rest = str(key).partition(":")
    out = []
    for part in rest.split(";"):
        try:
            z, y, x = (int(v) for v in part.split(","))
        except ValueError:
            continue
        out.append((z, y, x))
    return out


def in_block_terms(window: Slices, block: Block) -> str:
    """``window`` (volume voxels) said inside ``block``: 'block 3, y 40-103, x 10-73, z 0-31 of the block'."""
    parts = [f"{axis} {s.start - o}-{s.stop - 1 - o}" for axis, s, o in
             (("y", window[1], block.origin[1]), ("x", window[2], block.origin[2]), ("z", window[0], block.origin[0]))]
    return f"block {block.id}, {', '.join(parts)} of the block"


def locate(key: str, windows: Sequence[Slices], block: Block | None) -> tuple[tuple[float, float, float], str]:
    """Where a defect is (ZYX voxels) and what says so: its anchors (the Inspector located it), else the centre
    of the editor windows tried at it (a VLM Inspector names only the block), else its block's centre."""
    anchors = defect_anchors(key)
    if anchors:
        return tuple(np.mean(np.asarray(anchors, float), axis=0).tolist()), "defect anchors"  # type: ignore
    if windows:
        centres = [[(s.start + s.stop - 1) / 2.0 for s in w] for w in windows]
        return tuple(np.mean(centres, axis=0).tolist()), "edit windows tried"  # type: ignore[return-value]
    if block is not None:
        return tuple((s.start + s.stop - 1) / 2.0 for s in block.slices), "block centre"  # type: ignore
    return (0.0, 0.0, 0.0), "unknown"


def at(centre: Sequence[float]) -> str:
    z, y, x = (int(round(float(v))) for v in centre)
    return f"z {z}, y {y}, x {x}"


CHANGES = ("added", "removed")


def marked_global_png(mask: np.ndarray, blocks: Sequence[Block], flagged: Sequence[int] = (),
                      edits: Sequence[tuple[Slices, np.ndarray, np.ndarray, str]] = (),
                      escalations: Sequence[tuple[Sequence[float], str]] = (), dpi: int = 90,
                      changes: Sequence[str] = CHANGES) -> bytes:
    """The z-MIP of ``mask`` with the block grid and ids (red = flagged), each accepted edit's added (green)
    and removed (magenta) voxels with a box and its label, and each escalation as a cross with its label.

    ``edits``: (window, before, after, label) in volume voxels; ``escalations``: (centre ZYX, label);
    ``changes``: which of the edits' voxels are coloured (of :data:`CHANGES`). The report's before view colours
    only the removed voxels and its after view only the added ones, each the voxels its own mask holds: colouring
    both on both would draw the added voxels onto the initial mask and make the two views one picture."""
    unknown = set(changes) - set(CHANGES)
    if unknown:
        raise ValueError(f"changes {sorted(unknown)}: choose from {', '.join(CHANGES)}")
    plt = _agg()
    picture = xy_view(np.asarray(mask)).astype(np.float32)
    h, w = picture.shape
    rgb = np.stack([picture * 0.85] * 3, axis=-1)
    for window, before, after, _ in edits:
        for kind, colour, change in (("added", ADDED, after & ~before), ("removed", REMOVED, before & ~after)):
            if kind not in changes:
                continue
            hit = change.any(axis=0)
            view = rgb[window[1], window[2]]
            view[hit] = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    scale = max(7.0, min(12.0, max(h, w) / 50.0))
    fig, ax = plt.subplots(figsize=(scale * w / max(h, w), scale * h / max(h, w)), dpi=dpi)
    ax.imshow(np.clip(rgb, 0, 1), interpolation="nearest")
    marked = {int(b) for b in flagged}
    for b in blocks:
        if b.slices[0].start:       # z-chunked grids repeat the xy tiles; draw each tile once
            continue
        sy, sx = b.slices[1], b.slices[2]
        red = b.id in marked
        ax.add_patch(plt.Rectangle((sx.start - 0.5, sy.start - 0.5), sx.stop - sx.start, sy.stop - sy.start,
                                   fill=False, edgecolor="red" if red else "#c8b400", linewidth=1.4 if red else 0.6))
        ax.text(sx.start + 3, sy.start + 3, f"b{b.id}", color="red" if red else "#c8b400", fontsize=9,
                va="top", ha="left", fontweight="bold")
    for window, before, after, label in edits:
        colour = ADDED if int((after & ~before).sum()) >= int((before & ~after).sum()) else REMOVED
        sy, sx = window[1], window[2]
        ax.add_patch(plt.Rectangle((sx.start - 0.5, sy.start - 0.5), sx.stop - sx.start, sy.stop - sy.start,
                                   fill=False, edgecolor=colour, linewidth=0.9, linestyle="--"))
        ax.text(sx.stop - 2, sy.stop - 2, label, color=colour, fontsize=7, va="bottom", ha="right")
    for centre, label in escalations:
        ax.plot([centre[2]], [centre[1]], marker="X", markersize=9, color=ESCALATED, markeredgecolor="black")
        ax.text(centre[2] + 4, centre[1] - 4, label, color=ESCALATED, fontsize=8, fontweight="bold")
    ax.set_xlim(-0.5, w - 0.5)
    ax.set_ylim(h - 0.5, -0.5)
    return figure_png(fig)
