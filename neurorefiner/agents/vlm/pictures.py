"""Mosaics: every block the Inspector judges, in one or two pictures, each tile labelled with its block id.

Why: a model server takes only a few images per request (vLLM's ``--limit-mm-per-prompt``, 4 in our command).
With one picture per block, the Inspector saw only the three blocks with most components besides the
overview and judged the rest from a downscaled overview. Tiling the blocks' z-MIPs into one or two mosaics
shows every non-empty block at (up to) full resolution within the limit, in one request.

Tiles keep thin fibres visible when shrunk: a block larger than its tile is max-pooled (a 1-voxel fibre
stays 1 pixel), a smaller one is enlarged by whole pixels. Ids are drawn in the tile's corner on a dark
patch so they stay legible on white mask.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.blocks import Block
from neurorefiner.topology.views import xy_view

GAP = 4  # pixels between tiles


def fit_tile(picture: np.ndarray, side: int) -> np.ndarray:
    """A 2D picture brought within ``side`` x ``side`` pixels: max-pooled when larger, repeated by whole
    pixels when it fits twice or more."""
    a = np.asarray(picture, dtype=np.float32)
    big = max(a.shape)
    if big > side:
        f = math.ceil(big / side)
        h, w = math.ceil(a.shape[0] / f) * f, math.ceil(a.shape[1] / f) * f
        padded = np.zeros((h, w), np.float32)
        padded[: a.shape[0], : a.shape[1]] = a
        return padded.reshape(h // f, f, w // f, f).max(axis=(1, 3))
    f = max(1, side // big)
    return a.repeat(f, axis=0).repeat(f, axis=1) if f > 1 else a


def split_evenly(items: Sequence[int], parts: int) -> list[list[int]]:
    """``items`` in order, cut into ``parts`` runs whose lengths differ by at most one."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out, i = [], 0
    for p in range(parts):
        n = size + (p < extra)
        out.append(list(items[i: i + n]))
        i += n
    return out


def mosaic_png(mask: np.ndarray, blocks: Sequence[Block], max_side: int = 1024, dpi: int = 100) -> bytes:
    """One picture: the z-MIP of each block's mask as a tile (row-major, in the given order), its id drawn
    in the tile's top-left corner; at most ``max_side`` pixels a side."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not blocks:
        raise ValueError("a mosaic needs at least one block")
    cols = math.ceil(math.sqrt(len(blocks)))
    rows = math.ceil(len(blocks) / cols)
    side = max(16, min(256, (max_side - GAP * (cols - 1)) // cols))
    tiles = [fit_tile(xy_view(np.asarray(mask[b.slices], dtype=np.float32)), side) for b in blocks]
    th, tw = max(t.shape[0] for t in tiles), max(t.shape[1] for t in tiles)
    canvas = np.full((rows * th + GAP * (rows - 1), cols * tw + GAP * (cols - 1)), 0.25, np.float32)
    corners = []
    for i, t in enumerate(tiles):
        y, x = (i // cols) * (th + GAP), (i % cols) * (tw + GAP)
        canvas[y: y + th, x: x + tw] = 0.0
        canvas[y: y + t.shape[0], x: x + t.shape[1]] = t
        corners.append((x, y))
    h, w = canvas.shape
    fig = plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.imshow(canvas, cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
    size = max(7, min(14, tw // 6))
    for b, (x, y) in zip(blocks, corners):
        ax.text(x + 2, y + 2, str(b.id), color="yellow", fontsize=size, fontweight="bold", va="top", ha="left",
                bbox={"facecolor": "black", "alpha": 0.7, "pad": 1, "linewidth": 0})
    ax.set_axis_off()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def block_mosaics(mask: np.ndarray, blocks: Sequence[Block], max_mosaics: int = 2, per_mosaic: int = 36,
                  max_side: int = 1024) -> list[tuple[bytes, list[int]]]:
    """Every given block in at most ``max_mosaics`` pictures: one while they fit ``per_mosaic`` tiles, else
    split evenly (tiles shrink when even ``max_mosaics`` pictures hold more than ``per_mosaic`` each).
    Returns (PNG, block ids in it) per picture."""
    if max_mosaics < 1 or per_mosaic < 1:
        raise ValueError("max_mosaics and per_mosaic must be >= 1")
    if not blocks:
        return []
    by_id = {b.id: b for b in blocks}
    ids = [b.id for b in blocks]
    parts = split_evenly(ids, min(max_mosaics, math.ceil(len(ids) / per_mosaic)))
    return [(mosaic_png(mask, [by_id[i] for i in part], max_side), part) for part in parts]
