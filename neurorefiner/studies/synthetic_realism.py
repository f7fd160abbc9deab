"""How close are the synthetic presets to real fluorescence stacks? Every preset against the real DIADEM dev
stacks (OP_1-OP_6 only; OP_7-OP_9 are held out and never read), measured the same way
(:mod:`neurorefiner.synth.measure`). :func:`run` writes ``per_volume.csv`` (one row per stack),
``summary.csv`` and ``summary.md`` (medians per source), ``distributions.png`` (background histogram, local
SNR, radii, branch orders, segment lengths, foreground fraction) and ``mips.png`` (xy maximum-intensity
projections side by side).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neurorefiner.evaluation.tables import write_markdown, write_rows_csv

PRESETS = ("tiny", "synthetic_cwmbs_weak", "synthetic_cwmbs_noise", "synthetic_zbfwb", "synthetic_bigneuron")
WEAK_SNR = 2.0


def measure_one(source: str, name: str, image: np.ndarray, label: np.ndarray, gold, spacing) -> tuple[dict, dict]:
    """Scalar figures of one stack, and the samples that go into the pooled distributions."""
    from neurorefiner.synth.measure import (
        distractor_stats,
        morphology_stats,
        normalised_background,
        snr_along_tree,
        weak_runs,
    )

    prof = snr_along_tree(image, label, gold, spacing)
    runs = weak_runs(prof, spacing, WEAK_SNR)
    dist = distractor_stats(image, label, prof, spacing)
    morph = morphology_stats(gold, spacing)
    bg = normalised_background(image, label, spacing, n=50_000)
    gold_vox = max(len(prof.tree), 1)
    row = {
        "source": source, "volume": name, "shape": "x".join(str(s) for s in image.shape),
        "spacing_um": "x".join(f"{s:g}" for s in spacing), "dtype": str(image.dtype),
        "foreground_fraction": float(label.mean()),
        "bg_median_norm": float(np.median(bg)), "bg_p99_norm": float(np.percentile(bg, 99)),
        "bg_zero_fraction": float((bg <= 0).mean()),
        "snr_median": float(np.median(prof.snr)), "snr_p10": float(np.percentile(prof.snr, 10)),
        "weak_fraction": float((prof.snr < WEAK_SNR).mean()),
        "weak_runs_ge5_per_1000vox": float((runs >= 5).sum() * 1000.0 / gold_vox),
        "bright_away_fraction": dist["bright_away_fraction"],
        "away_components": dist["away_components"],
        "radius_median_um": float(np.median(morph["radius_um"])) if len(morph["radius_um"]) else float("nan"),
        "branch_order_max": float(morph["branch_order"].max()) if len(morph["branch_order"]) else 0.0,
        "segment_median_um": float(np.median(morph["segment_um"])) if len(morph["segment_um"]) else float("nan"),
        "gold_length_um": float(gold.total_length(spacing)),
    }
    samples = {"bg": bg, "snr": np.clip(prof.snr, -5, 100), "radius_um": morph["radius_um"],
               "branch_order": morph["branch_order"], "segment_um": morph["segment_um"]}
    return row, samples


def _mip(image: np.ndarray) -> np.ndarray:
    m = image.max(axis=0).astype(np.float32)
    lo, hi = np.percentile(m, [1, 99.8])
    return np.clip((m - lo) / max(hi - lo, 1e-6), 0, 1)


@dataclass
class _Measured:
    """What the measuring pass collects: one row per stack, the samples pooled per source for the
    distributions, and the maximum-intensity projections shown side by side."""

    rows: list[dict] = field(default_factory=list)
    pooled: dict[str, dict[str, list[np.ndarray]]] = field(default_factory=dict)
    mips: list[tuple[str, np.ndarray]] = field(default_factory=list)

    def add(self, source: str, row: dict, samples: dict) -> None:
        self.rows.append(row)
        for k, v in samples.items():
            self.pooled.setdefault(source, {}).setdefault(k, []).append(np.asarray(v, dtype=np.float64))


def run(out: Path, n: int = 3, presets: Sequence[str] = PRESETS, diadem: Sequence[str] | None = None,
        log: Callable[[str], object] = print) -> str:
    """Measure seeds 0 .. n-1 of every preset and the DIADEM dev stacks (``diadem``: a subset of OP_1-OP_6;
    test stacks are refused); write the tables and figures into ``out``; returns ``summary.md``. ``log``
    gets one line per measured stack."""

    import matplotlib

    matplotlib.use("Agg")

    out.mkdir(parents=True, exist_ok=True)
    measured = _Measured()
    _measure_diadem(measured, diadem, log)
    _measure_presets(measured, presets, n, log)
    rows = measured.rows
    summary = _summary_rows(rows)
    write_rows_csv(out / "per_volume.csv", rows)
    write_rows_csv(out / "summary.csv", summary)
    text = _summary_markdown(summary, n)
    write_markdown(out / "summary.md", text)
    sources = [s["source"] for s in summary]
    _distribution_figure(measured, sources, out / "distributions.png")
    _mip_figure(measured.mips, out / "mips.png")
    return text


def _measure_diadem(measured: _Measured, diadem: Sequence[str] | None, log: Callable[[str], object]) -> None:
    """Measure the real DIADEM dev stacks (OP_1-OP_6 only: OP_7-OP_9 are held out and never read)."""
    from neurorefiner.data.diadem import dev_cases

    dev = dev_cases(diadem, "the realism check")  # OP_1-OP_6 only: OP_7-OP_9 are held out
    for case in dev:
        assert case.split == "dev"
        t0 = time.time()
        image = case.image().load()
        label = case.label(image.shape)
        row, samples = measure_one("DIADEM (real)", case.name, image, label, case.gold(), case.spacing)
        measured.add("DIADEM (real)", row, samples)
        if case.name in ("OP_1", "OP_3"):
            measured.mips.append((f"DIADEM {case.name} (real)", _mip(image)))
        log(f"{case.name}: {time.time() - t0:.1f} s")


def _measure_presets(measured: _Measured, presets: Sequence[str], n: int, log: Callable[[str], object]) -> None:
    """Render and measure seeds 0 .. n-1 of every synthetic preset."""
    from neurorefiner.synth.render import render

    for preset in presets:
        for seed in range(n):
            t0 = time.time()
            r = render(preset, seed)
            row, samples = measure_one(preset, f"seed{seed}", r.image, r.label, r.gold, r.spacing)
            measured.add(preset, row, samples)
            if seed == 0:
                measured.mips.append((f"{preset} seed 0 (synthetic)", _mip(r.image)))
            log(f"{preset} seed {seed}: {time.time() - t0:.1f} s")


def _summary_rows(rows: list[dict]) -> list[dict]:
    """One row per source (in the order measured): how many volumes, and the median of every numeric column."""
    keys = list(rows[0])
    numeric = [k for k in keys if isinstance(rows[0][k], float)]
    sources = list(dict.fromkeys(r["source"] for r in rows))
    summary = []
    for s in sources:
        sel = [r for r in rows if r["source"] == s]
        summary.append({"source": s, "volumes": len(sel),
                        **{k: float(np.nanmedian([r[k] for r in sel])) for k in numeric}})
    return summary


def _summary_markdown(summary: list[dict], n: int) -> str:
    """``summary.md``: the medians per source as a Markdown table, with what each column measures."""
    show = ["volumes", "foreground_fraction", "bg_median_norm", "bg_p99_norm", "bg_zero_fraction", "snr_median",
            "snr_p10", "weak_fraction", "weak_runs_ge5_per_1000vox", "bright_away_fraction", "radius_median_um",
            "segment_median_um", "branch_order_max"]
    lines = ["# Synthetic presets vs real DIADEM dev stacks (OP_1-OP_6)", "",
             f"Medians over volumes. Written by `neurorefiner study realism --n {n}`; synthetic rows are SYNTHETIC "
             "data.", "",
             "| source | " + " | ".join(show) + " |", "|---" * (len(show) + 1) + "|"]
    for srow in summary:
        cells = []
        for k in show:
            v = srow[k]
            cells.append(f"{int(v)}" if k == "volumes" else (f"{v:.2e}" if k == "foreground_fraction" else f"{v:.3g}"))
        lines.append(f"| {srow['source']} | " + " | ".join(cells) + " |")
    lines += ["", "Columns: foreground_fraction = label voxels / all voxels; bg_* = background intensities "
              "(outside the label grown by 3 x-voxels) mapped so the stack's 0.1th/99.9th percentiles "
              "are 0/1; snr_* = local SNR along the gold centreline on the lightly denoised stack; "
              f"weak_fraction = centreline share with SNR < {WEAK_SNR:g}; weak_runs_ge5_per_1000vox = such "
              "stretches of >= 5 voxels per 1000 centreline voxels; bright_away_fraction = share of "
              "target-bright voxels away from the target (distractors); radius/segment in um; "
              "branch_order_max = highest centrifugal order."]
    return "\n".join(lines) + "\n"


def _distribution_figure(measured: _Measured, sources: list[str], path: Path) -> None:
    """``distributions.png``: the pooled distributions per source (real solid, synthetic dashed) and the
    foreground fraction per volume."""
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    rows, pooled = measured.rows, measured.pooled
    panels = [("bg", "background (p0.1 -> 0, p99.9 -> 1)", np.linspace(0, 0.6, 61), True),
              ("snr", "local SNR along gold", np.linspace(-5, 60, 66), False),
              ("radius_um", "gold radius (um)", np.linspace(0, 3, 31), False),
              ("branch_order", "branch order per segment", np.arange(0, 31) - 0.5, False),
              ("segment_um", "segment length (um)", np.linspace(0, 150, 51), False)]
    fig, axes = plt.subplots(2, 3, figsize=(16, 9))
    for ax, (key, title, bins, logy) in zip(axes.ravel(), panels):
        for s in sources:
            vals = np.concatenate(pooled[s][key]) if pooled[s][key] else np.zeros(0)
            if len(vals):
                ax.hist(np.clip(vals, bins[0], bins[-1]), bins=bins, density=True, histtype="step", lw=1.6,
                        label=s, ls="-" if s.startswith("DIADEM") else "--")
        ax.set_title(title)
        if logy:
            ax.set_yscale("log")
    ax = axes.ravel()[-1]
    for i, s in enumerate(sources):
        v = [r["foreground_fraction"] for r in rows if r["source"] == s]
        ax.scatter(np.full(len(v), i), v)
    ax.set_xticks(range(len(sources)), [s.replace("synthetic_", "syn_") for s in sources], rotation=30)
    ax.set_yscale("log")
    ax.set_title("foreground fraction per volume")
    axes.ravel()[0].legend(fontsize=8)
    fig.suptitle("Synthetic presets (dashed) vs real DIADEM OP_1-OP_6 (solid)")
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=80)


def _mip_figure(mips: list[tuple[str, np.ndarray]], path: Path) -> None:
    """``mips.png``: the xy maximum-intensity projections side by side, four to a row."""
    import matplotlib.pyplot as plt

    from neurorefiner.io.atomic import save_figure_atomic

    cols = 4
    rows_n = int(np.ceil(len(mips) / cols))
    fig, axes = plt.subplots(rows_n, cols, figsize=(4 * cols, 4 * rows_n))
    for ax in np.atleast_1d(axes).ravel():
        ax.axis("off")
    for ax, (title, m) in zip(np.atleast_1d(axes).ravel(), mips):
        ax.imshow(m, cmap="gray")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=50)
