"""Visibility of the labelled neuron: every stand-in preset beside the real DIADEM dev stacks (OP_1-OP_6 only).

Part of the realism report (``experiments/synthetic_realism/``). For each labelled segment (between branch
points and tips) the local contrast-to-noise of the gold path after the PSF
(:func:`neurorefiner.synth.visibility.segment_visibility`); reported per source as the length-weighted
distribution, with the share of labelled length a segmenter cannot see (CNR < 2) and xy MIPs of each preset
beside the same MIP with the gold path drawn over it. Synthetic volumes come from the cached val splits
(never test); DIADEM OP_7-OP_9 are held out and never read.

    neurorefiner study visibility --out experiments/synthetic_realism/results
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError

STAND_INS = ("synthetic_cwmbs_weak", "synthetic_cwmbs_noise", "synthetic_zbfwb", "synthetic_bigneuron")
SPLITS = ("train", "val")  # never test
DIADEM = "DIADEM (real)"


def _mip(image: np.ndarray) -> np.ndarray:
    m = image.max(axis=0).astype(np.float32)
    lo, hi = np.percentile(m, [1, 99.8])
    return np.clip((m - lo) / max(hi - lo, 1e-6), 0, 1)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if len(values) == 0:
        return float("nan")
    order = np.argsort(values)
    v, w = values[order], np.maximum(weights[order], 1e-9)
    c = np.cumsum(w) / w.sum()
    return float(v[min(int(np.searchsorted(c, q)), len(v) - 1)])


def measure_cases(source: str, cases, log: Callable[[str], object]) -> tuple[list[dict], dict]:  # type: ignore[no-untyped-def]
    """Per-case rows and the pooled (cnr, length) of every segment of these cases."""
    from neurorefiner.synth.visibility import VISIBLE, segment_visibility

    rows, cnr, length, first = [], [], [], None
    for case in cases:
        t0 = time.time()
        image = case.image().load()
        label = case.label(image.shape)
        gold = case.gold()
        vis = segment_visibility(image, label, gold, case.spacing)
        s = vis.summary()
        rows.append({"source": source, "case": case.name, "split": case.split, **s,
                     "node_cnr_p10": float(np.percentile(vis.node_cnr, 10)) if len(vis.node_cnr) else float("nan"),
                     "node_invisible_fraction": float((vis.node_cnr < VISIBLE).mean()) if len(vis.node_cnr)
                     else float("nan")})
        cnr.append(vis.cnr)
        length.append(vis.length_um)
        if first is None:
            first = (case.name, image, gold)
        log(f"{source} {case.name}: {time.time() - t0:.1f} s")
    return rows, {"cnr": np.concatenate(cnr) if cnr else np.zeros(0),
                  "length": np.concatenate(length) if length else np.zeros(0), "first": first}


def run(out: Path, presets: Sequence[str] = STAND_INS, split: str = "val", diadem: Sequence[str] | None = None,
        log: Callable[[str], object] = print) -> str:
    """Measure the presets' ``split`` (train or val) and the DIADEM dev stacks; write ``visibility.md``,
    ``visibility_cases.csv``, ``visibility.png`` (length-weighted CNR distributions) and
    ``visibility_mips.png``; returns the Markdown."""
    import matplotlib

    matplotlib.use("Agg")

    from neurorefiner.data import get_dataset
    from neurorefiner.data.diadem import dev_cases
    from neurorefiner.evaluation.tables import write_rows_csv

    if split not in SPLITS:
        raise InputError(f"the visibility report reads the train or val split only, not {split!r}")
    out.mkdir(parents=True, exist_ok=True)
    dev = dev_cases(diadem, "the visibility report")  # OP_1-OP_6 only: OP_7-OP_9 are held out
    rows, pooled = [], {}
    r, p = measure_cases(DIADEM, dev, log)
    rows += r
    pooled[DIADEM] = p
    for preset in presets:
        r, p = measure_cases(preset, get_dataset(preset).cases(split), log)
        rows += r
        pooled[preset] = p
    write_rows_csv(out / "visibility_cases.csv", rows)
    text = _visibility_markdown(rows, pooled, split)
    (out / "visibility.md").write_text(text)
    _cnr_figure(pooled, out / "visibility.png")
    _mips_figure(pooled, out / "visibility_mips.png")
    return text


def _visibility_markdown(rows: list[dict], pooled: dict[str, dict], split: str) -> str:
    """``visibility.md``: per source the length-weighted CNR quantiles, the invisible share of labelled length
    and the per-node figures, with how they were measured."""
    from neurorefiner.synth.visibility import VISIBLE

    lines = [f"# Visibility of the labelled neuron: stand-ins ({split} split, SYNTHETIC) vs DIADEM dev (real)", "",
             "Made by `neurorefiner study visibility` (`neurorefiner.studies.synthetic_visibility`). "
             "Per labelled segment (between branch points and tips): the median local contrast-to-noise of the "
             "gold path, (denoised intensity - mean of the background box around it) / that box's sd, 8 um box, "
             "the label grown by 3 voxels excluded (`neurorefiner.synth.visibility`). Quantiles are "
             f"length-weighted over every segment of the source; 'invisible' = CNR < {VISIBLE:g}. Node figures: "
             "the same per centreline node (one per x voxel). DIADEM OP_7-OP_9 are never read.", "",
             "| source | volumes | segments | CNR p10 | CNR median | CNR p90 | invisible length | node CNR p10 "
             "| invisible nodes |", "|---|---|---|---|---|---|---|---|---|"]
    for source, p in pooled.items():
        sel = [x for x in rows if x["source"] == source]
        c, w = p["cnr"], p["length"]
        inv = float(w[c < VISIBLE].sum() / max(w.sum(), 1e-9)) if len(c) else float("nan")
        lines.append(f"| {source} | {len(sel)} | {len(c)} | {_weighted_quantile(c, w, 0.1):.2f} | "
                     f"{_weighted_quantile(c, w, 0.5):.2f} | {_weighted_quantile(c, w, 0.9):.2f} | {inv:.3f} | "
                     f"{np.nanmedian([x['node_cnr_p10'] for x in sel]):.2f} | "
                     f"{np.nanmedian([x['node_invisible_fraction'] for x in sel]):.3f} |")
    lines += ["", "Figures: `visibility.png` (length-weighted CNR distribution per source), `visibility_mips.png` "
              "(xy MIP of the first volume of each source, and the same MIP with the gold path in red).", ""]
    return "\n".join(lines)


def _cnr_figure(pooled: dict[str, dict], path: Path) -> None:
    """``visibility.png``: the length-weighted cumulative CNR distribution per source (real solid, synthetic
    dashed), with the visibility limit marked."""
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic
    from neurorefiner.synth.visibility import VISIBLE

    fig, ax = plt.subplots(figsize=(7, 4))
    for source, p in pooled.items():
        c, w = p["cnr"], p["length"]
        if not len(c):
            continue
        order = np.argsort(c)
        ax.plot(np.clip(c[order], -2, 40), np.cumsum(w[order]) / w.sum(), label=source,
                ls="-" if source == DIADEM else "--")
    ax.axvline(VISIBLE, color="k", lw=0.8)
    ax.set_xlabel("segment CNR (local, after the PSF)")
    ax.set_ylabel("share of labelled length")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=80)
    plt.close(fig)


def _mips_figure(pooled: dict[str, dict], path: Path) -> None:
    """``visibility_mips.png``: the xy MIP of each source's first volume, beside it with the gold path in red."""
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    panels = [(s, p["first"]) for s, p in pooled.items() if p["first"] is not None]
    fig, axes = plt.subplots(len(panels), 2, figsize=(8, 4 * len(panels)), squeeze=False)
    for row, (source, (name, image, gold)) in zip(axes, panels):
        m = _mip(image)
        tag = "real" if source == DIADEM else "SYNTHETIC"
        row[0].imshow(m, cmap="gray")
        row[0].set_title(f"{source} {name} ({tag})", fontsize=8)
        row[1].imshow(m, cmap="gray")
        zyx = gold.zyx
        row[1].scatter(zyx[:, 2], zyx[:, 1], s=0.2, c="red", alpha=0.5)
        row[1].set_title("gold path in red", fontsize=8)
        for a in row:
            a.set_axis_off()
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=60)
    plt.close(fig)
