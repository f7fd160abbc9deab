"""Pictures of a volume for the agents and for people: MIPs as PNG bytes.

A vision-language model sees a 3D mask only through 2D pictures: the global z-MIP with the block ids
written on it (what the Inspector looks at), and per block the xy and yz projections of image and mask
(what the Advisor localises a defect from; in the yz view z runs left to right, so "front" = z = 0 is
on the left, as the paper's prompt says). The MIP loses depth; :func:`depth_coded_mip` puts it back as
colour (hue = depth of the brightest voxel) for the option that shows it.

Everything returns PNG bytes (for base64 data URLs and the HTML report); matplotlib runs headless (Agg).
Leaf module: numpy, matplotlib, ``neurorefiner.topology``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from neurorefiner.topology.blocks import Block, mip


def _agg():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt



def figure_png(fig) -> bytes:  # type: ignore[no-untyped-def]
    """A matplotlib figure as PNG bytes, axes hidden and margins tight, then closed (the views and the report's
    marked overview are drawn this way, and an open figure per block would leak memory over a long run)."""
    plt = _agg()
    for ax in fig.axes:
        ax.set_axis_off()
    fig.tight_layout(pad=0.1)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()

def to_uint8(array: np.ndarray) -> np.ndarray:
    """A 2D array scaled to 0..255 (min-max; a flat array gives zeros)."""
    a = np.asarray(array, dtype=np.float32)
    lo, hi = float(a.min()) if a.size else 0.0, float(a.max()) if a.size else 0.0
    if hi <= lo:
        return np.zeros(a.shape, np.uint8)
    return np.clip((a - lo) / (hi - lo) * 255.0, 0, 255).astype(np.uint8)


def png_bytes(array2d_or_rgb: np.ndarray, upscale: int = 1) -> bytes:
    """Encode a 2D grey (any dtype, min-max scaled) or HxWx3 uint8 picture as PNG."""
    import matplotlib.image as mpimg

    a = np.asarray(array2d_or_rgb)
    if a.ndim == 2:
        a = to_uint8(a)
        a = np.stack([a] * 3, axis=-1)
    if upscale > 1:
        a = a.repeat(upscale, axis=0).repeat(upscale, axis=1)
    buf = io.BytesIO()
    mpimg.imsave(buf, np.ascontiguousarray(a), format="png")
    return buf.getvalue()


def xy_view(volume: np.ndarray) -> np.ndarray:
    """z-MIP: what you see looking down the stack (rows = y, columns = x)."""
    return mip(volume, axis=0)


def yz_view(volume: np.ndarray) -> np.ndarray:
    """x-MIP shown with y as rows and z as columns (front, z = 0, on the left)."""
    return mip(volume, axis=2).T


def depth_coded_mip(volume: np.ndarray) -> np.ndarray:
    """RGB z-MIP whose hue is the depth of the brightest voxel (blue = front, red = rear) and whose
    brightness is the MIP value; restores what a plain MIP loses where two fibres cross at different z."""
    import matplotlib

    v = np.asarray(volume, dtype=np.float32)
    value = v.max(axis=0)
    depth = v.argmax(axis=0).astype(np.float32) / max(1, v.shape[0] - 1)
    rgb = matplotlib.colormaps["turbo"](depth)[..., :3]
    bright = to_uint8(value).astype(np.float32)[..., None] / 255.0
    return (rgb * bright * 255).astype(np.uint8)


def global_mask_png(mask: np.ndarray, blocks: Sequence[Block], highlight: Sequence[int] = (),
                    depth_coded: bool = False, dpi: int = 80) -> bytes:
    """The mask's z-MIP with the block grid and each block's id drawn (the Inspector's global view);
    ``highlight`` blocks get a red outline."""
    plt = _agg()
    m = np.asarray(mask)
    picture = depth_coded_mip(m) if depth_coded else xy_view(m)
    h, w = picture.shape[:2]
    scale = max(4.0, min(10.0, max(h, w) / 80.0))
    fig, ax = plt.subplots(figsize=(scale * w / max(h, w), scale * h / max(h, w)), dpi=dpi)
    ax.imshow(picture, cmap="gray" if picture.ndim == 2 else None, interpolation="nearest")
    marked = set(int(b) for b in highlight)
    for b in blocks:
        sy, sx = b.slices[1], b.slices[2]
        red = b.id in marked
        ax.add_patch(plt.Rectangle((sx.start - 0.5, sy.start - 0.5), sx.stop - sx.start, sy.stop - sy.start,
                                   fill=False, edgecolor="red" if red else "yellow", linewidth=1.5 if red else 0.6))
        ax.text(sx.start + 3, sy.start + 3, str(b.id), color="red" if red else "yellow", fontsize=9,
                va="top", ha="left", fontweight="bold")
    return figure_png(fig)


def block_views(image_block: np.ndarray, mask_block: np.ndarray, upscale: int = 2) -> dict[str, bytes]:
    """The Advisor's four pictures of one block: image and mask, xy and yz."""
    return {"image_xy": png_bytes(xy_view(image_block), upscale), "mask_xy": png_bytes(xy_view(mask_block), upscale),
            "image_yz": png_bytes(yz_view(image_block), upscale), "mask_yz": png_bytes(yz_view(mask_block), upscale)}


def side_by_side(panels: Sequence[np.ndarray], gap: int = 4) -> np.ndarray:
    """2D panels (any sizes) scaled to 0..255 and placed left to right on a dark strip."""
    grey = [to_uint8(p) for p in panels]
    h = max(p.shape[0] for p in grey)
    w = sum(p.shape[1] for p in grey) + gap * (len(grey) - 1)
    out = np.full((h, w), 40, np.uint8)
    x = 0
    for p in grey:
        out[: p.shape[0], x: x + p.shape[1]] = p
        x += p.shape[1] + gap
    return out


def pair_png(image_block: np.ndarray, mask_block: np.ndarray, upscale: int = 2) -> bytes:
    """One picture of a block for a person: image xy | mask xy | image yz | mask yz."""
    panels = [xy_view(image_block), xy_view(mask_block).astype(np.float32),
              yz_view(image_block), yz_view(mask_block).astype(np.float32)]
    return png_bytes(side_by_side(panels), upscale)


def change_png(before: np.ndarray, after: np.ndarray, upscale: int = 3) -> bytes:
    """xy and yz MIPs of an edit: kept voxels white, added green, removed magenta."""
    b, a = np.asarray(before, bool), np.asarray(after, bool)

    def colour(view) -> np.ndarray:  # type: ignore[no-untyped-def]
        kept, added, removed = view(b & a), view(a & ~b), view(b & ~a)
        rgb = np.zeros(kept.shape + (3,), np.uint8)
        rgb[kept] = (230, 230, 230)
        rgb[added] = (40, 220, 60)
        rgb[removed] = (230, 40, 200)
        return rgb

    xy, yz = colour(xy_view), colour(yz_view)
    h = max(xy.shape[0], yz.shape[0])
    out = np.full((h, xy.shape[1] + 4 + yz.shape[1], 3), 40, np.uint8)
    out[: xy.shape[0], : xy.shape[1]] = xy
    out[: yz.shape[0], xy.shape[1] + 4:] = yz
    return png_bytes(out, upscale)
