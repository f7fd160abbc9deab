"""How the candidate input normalisations line DIADEM dev stacks up (OP_1-OP_6 only; no test case).

For each dev stack and each normalisation: the median normalised intensity on the gold centreline
(neurite brightness) and the 99.5th percentile of the normalised stack (the bright end of the
background), and across stacks the coefficient of variation of the neurite brightness. A normalisation
that brings neurites of all stacks to a similar level, without lifting the background, is easier to
learn and to transfer. Writes normalisation_dev.md.

    .venv/bin/python experiments/segmenters/normalisation_dev.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.data import get_dataset
from neurorefiner.data.transforms import normalize_image

CANDIDATES = {"min-max": None, "percentile 1 / 99.9": (1.0, 99.9), "percentile 1 / 99.95": (1.0, 99.95),
              "percentile 1 / 99.99 (chosen)": (1.0, 99.99), "percentile 1 / 99.999": (1.0, 99.999)}


def main() -> None:
    cases = get_dataset("diadem").cases("dev")
    rows: dict[str, list[tuple[float, float]]] = {k: [] for k in CANDIDATES}
    for case in cases:
        raw = case.image().load()
        cl = case.gold().rasterize(raw.shape, case.spacing, radius=0.5, min_radius=0.0, strict=False)
        for name, pct in CANDIDATES.items():
            img = normalize_image(raw, str(case.image_path), pct)
            rows[name].append((float(np.median(img[cl])), float(np.percentile(img, 99.5))))
    names = [c.name for c in cases]
    lines = ["# Input normalisation on DIADEM dev (OP_1-OP_6)", "",
             "Cell: median normalised intensity on the gold centreline / 99.5th percentile of the stack "
             "(background). CV: coefficient of variation of the centreline medians across the six stacks.", "",
             "| normalisation | " + " | ".join(names) + " | CV |", "|---" * (len(names) + 2) + "|"]
    for name, vals in rows.items():
        med = np.array([v[0] for v in vals])
        cv = float(med.std() / med.mean()) if med.mean() > 0 else float("nan")
        lines.append(f"| {name} | " + " | ".join(f"{a:.2f} / {b:.2f}" for a, b in vals) + f" | {cv:.2f} |")
    out = Path(__file__).resolve().parent / "normalisation_dev.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
