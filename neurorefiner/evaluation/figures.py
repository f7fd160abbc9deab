"""Per-volume comparison figures in the style of the paper's Figure 4: the z-MIP of the image, of the gold
(its SWC rasterised) and of each mask side by side, every mask panel titled with its method and that
volume's F1 / SSD.

A mask panel is drawn over the image's MIP and coloured against the gold, so a reader sees where a method
adds or loses neurite without flipping between panels: **blue** mask on the gold (within ``tol`` pixels in
the projection), **magenta** mask away from the gold (false positive: noise, a distractor fibre),
**yellow** gold the mask misses (false negative: a break, a lost weak branch). The gold panel shows the gold
in the same yellow. A method whose mask is not available (its rows were read back from a run that kept no
mask) gets a panel that says so instead of a picture.

Everything here takes plain arrays and values (no config): :func:`comparison_figure` builds the figure,
:func:`write_comparison` saves it atomically.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# colour-blind safe against a grey image (RGB, 0-1)
ON_GOLD = (0.34, 0.71, 1.0)
OFF_GOLD = (1.0, 0.2, 0.85)
MISSED = (1.0, 0.85, 0.1)
ALPHA = 0.7
PREFERRED_PROTOCOLS = ("root_seeded", "full_volume")


@dataclass
class Panel:
    """One mask panel: ``mip`` the mask's z-MIP (2D bool) or None with ``note`` saying why it is missing;
    ``scores`` the row's metrics (F1, SSD, ...) or None when the mask was not scored in this run."""

    name: str
    mip: np.ndarray | None
    scores: dict[str, Any] | None = None
    note: str = ""


def zmip(volume: np.ndarray) -> np.ndarray:
    """Maximum-intensity projection along z (axis 0 of a ZYX stack)."""
    return np.asarray(volume).max(axis=0)


def contrast(image_mip: np.ndarray, lo: float = 0.5, hi: float = 99.8) -> np.ndarray:
    """The image MIP stretched to [0, 1] between two percentiles (Fiji's auto-contrast, roughly)."""
    img = np.asarray(image_mip, dtype=np.float32)
    a, b = np.percentile(img, [lo, hi]) if img.size else (0.0, 1.0)
    if not b > a:
        b = a + 1e-6
    return np.clip((img - a) / (b - a), 0.0, 1.0)


def compare_mips(mask_mip: np.ndarray, gold_mip: np.ndarray, tol: int = 2) -> dict[str, np.ndarray]:
    """Pixels of the projections by class: ``on`` mask within ``tol`` px of gold, ``off`` mask farther,
    ``missed`` gold farther than ``tol`` px from the mask."""
    from scipy.ndimage import binary_dilation

    mask, gold = np.asarray(mask_mip, bool), np.asarray(gold_mip, bool)
    near_gold = binary_dilation(gold, iterations=tol) if tol > 0 and gold.any() else gold
    near_mask = binary_dilation(mask, iterations=tol) if tol > 0 and mask.any() else mask
    return {"on": mask & near_gold, "off": mask & ~near_gold, "missed": gold & ~near_mask}


def overlay(image01: np.ndarray, layers: Sequence[tuple[np.ndarray, tuple[float, float, float]]],
            dim: float = 0.75) -> np.ndarray:
    """RGB picture: the (dimmed) grey image with each (2D bool, colour) layer blended on top in order."""
    rgb = np.repeat((dim * np.asarray(image01, np.float32))[..., None], 3, axis=-1)
    for sel, colour in layers:
        sel = np.asarray(sel, bool)
        rgb[sel] = (1 - ALPHA) * rgb[sel] + ALPHA * np.asarray(colour, np.float32)
    return rgb


def best_scores(rows: Sequence[dict], method: str, case: str,
                protocols: Sequence[str] = PREFERRED_PROTOCOLS) -> dict[str, Any] | None:
    """The row of ``method`` on ``case`` under the first protocol of ``protocols`` that has one."""
    for protocol in protocols:
        for r in rows:
            if r.get("method") == method and r.get("case") == case and r.get("protocol") == protocol:
                return r
    return None


def _score_line(scores: dict[str, Any] | None) -> str:
    if not scores:
        return "not scored in this run"

    def num(key: str, scale: float, fmt: str) -> str:
        v = scores.get(key)
        return format(scale * float(v), fmt) if v is not None and math.isfinite(float(v)) else "n/a"

    proto = str(scores.get("protocol", "")).replace("_", "-")
    return f"F1 {num('F1', 100, '.2f')} %  SSD {num('SSD', 1, '.2f')}" + (f"  ({proto})" if proto else "")


def comparison_figure(image_mip: np.ndarray, gold_mip: np.ndarray, panels: Sequence[Panel], title: str = "",
                      tol: int = 2, max_cols: int = 4) -> Any:
    """A matplotlib figure: image MIP, gold MIP, then one panel per mask in ``panels`` (2 + len(panels)
    axes, up to ``max_cols`` a row). Mask panels are coloured against the gold (module docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    img = contrast(image_mip)
    gold = np.asarray(gold_mip, bool)
    n = 2 + len(panels)
    rows = math.ceil(n / max_cols)
    cols = math.ceil(n / rows)
    h, w = img.shape
    width = float(np.clip(w / 110.0, 2.6, 5.0))  # about one screen pixel per voxel up to 550 px
    height = width * h / max(w, 1)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * width, rows * (height + 0.75) + 0.9), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat:
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_visible(False)
    flat[0].imshow(img, cmap="gray", interpolation="nearest")
    flat[0].set_title("image (z-MIP)", fontsize=9)
    flat[1].imshow(overlay(img, [(gold, MISSED)]), interpolation="nearest")
    flat[1].set_title("gold (SWC rasterised)", fontsize=9)
    for ax, panel in zip(flat[2:], panels):
        line = _score_line(panel.scores)
        if panel.mip is None:
            ax.imshow(0.35 * img, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.text(0.5, 0.5, panel.note or "mask not available", ha="center", va="center", wrap=True,
                    fontsize=7, color="white", transform=ax.transAxes)
            ax.set_title(f"{panel.name}\n{line}", fontsize=9)
            continue
        mask = np.asarray(panel.mip, bool)
        if mask.shape != gold.shape:
            ax.text(0.5, 0.5, f"mask shape {mask.shape} is not the image's {gold.shape}", ha="center",
                    va="center", fontsize=7, transform=ax.transAxes)
            ax.set_title(f"{panel.name}\n{line}", fontsize=9)
            continue
        cls = compare_mips(mask, gold, tol)
        ax.imshow(overlay(img, [(cls["missed"], MISSED), (cls["on"], ON_GOLD), (cls["off"], OFF_GOLD)]),
                  interpolation="nearest")
        ax.set_title(f"{panel.name}\n{line}", fontsize=9)
        n_mask = max(int(mask.sum()), 1)
        n_gold = max(int(gold.sum()), 1)
        ax.set_xlabel(f"off gold {100 * cls['off'].sum() / n_mask:.0f} % · "
                      f"gold missed {100 * cls['missed'].sum() / n_gold:.0f} %", fontsize=7)
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.legend(handles=[Patch(color=ON_GOLD, label="mask on gold"),
                        Patch(color=OFF_GOLD, label="mask off gold (false positive)"),
                        Patch(color=MISSED, label="gold missed by the mask (false negative)")],
               loc="lower center", ncol=3, fontsize=7, frameon=False,
               title=f"z-MIPs; 'on gold' = within {tol} px of the gold in the projection; under each mask: "
                     "% of its pixels off gold, % of gold pixels it misses", title_fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.97 if title else 1))
    return fig


def write_comparison(path: str | Path, image_mip: np.ndarray, gold_mip: np.ndarray, panels: Sequence[Panel],
                     title: str = "", tol: int = 2, dpi: int = 110) -> Path:
    """Draw :func:`comparison_figure` and save it as PNG atomically (never a half-written picture)."""
    from neurorefiner.io.atomic import save_figure_atomic

    return save_figure_atomic(comparison_figure(image_mip, gold_mip, panels, title, tol), path, dpi=dpi)
