"""Where the points are: what gold-vetted choices among the candidate edits would reach.

For each case (an image, a segmenter's initial mask, the gold SWC) every candidate edit is enumerated
(:mod:`neurorefiner.agents.candidates`), labelled from the gold (:mod:`neurorefiner.agents.learned.gold_labels`)
and the true ones are made directly, as a perfect editor would:

* ``ceiling_a``: the true joins and the true removals of isolated pieces;
* ``ceiling_b``: ``ceiling_a`` plus the true prunes (attached false structure inside the gold's scope);
* ``scope``: the initial mask cut to the gold's scope box, the effect of false structure beyond the gold's
  extent alone (not a refiner's job: a fibre the gold did not trace is not an error of the mask);

beside the initial mask and the classical refiner, each scored as the tables are (root-seeded APP2 against the
gold). Every later NeuroRefiner row is read against ``ceiling_a`` and ``ceiling_b``. Nothing here is tuned on
the test stacks: the command runs on dev / val splits. Command: ``neurorefiner study ceilings``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROWS = ("initial", "classical", "ceiling_a", "ceiling_b", "scope")
METRICS = ("SD", "SSD", "PRE", "REC", "F1")


def protocol_scorer() -> Callable[[np.ndarray, Any, Any], dict[str, float]]:
    """mask, gold tree, spacing -> the tables' metrics (root-seeded APP2, conf/tracing and conf/metrics)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir
    from neurorefiner.tracing.seeding import marker_nearest_root

    tracer = instantiate(OmegaConf.load(conf_dir() / "tracing" / "app2.yaml"))
    scorer = instantiate(OmegaConf.load(conf_dir() / "metrics" / "default.yaml"))

    def score(mask: np.ndarray, gold: Any, spacing: Any) -> dict[str, float]:
        pred = tracer(np.asarray(mask) > 0, spacing, marker=marker_nearest_root(mask, gold, spacing))
        return {k: float(v) for k, v in scorer(gold, pred, spacing).items()}

    return score


def classical_mask(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """The classical refiner with the parameters the tables use (conf/method/classical.yaml)."""
    from omegaconf import OmegaConf

    from neurorefiner.baselines.classical import classical_refine
    from neurorefiner.paths import conf_dir

    params = {k: v for k, v in OmegaConf.to_container(OmegaConf.load(conf_dir() / "method" / "classical.yaml")).items()
              if not k.startswith("_")}
    return classical_refine(image, mask, spacing, **params)


def ceiling_masks(image: np.ndarray, mask: np.ndarray, gold: Any, spacing: Sequence[float],
                  candidate_settings: Any = None, label_settings: Any = None) -> tuple[dict[str, np.ndarray], dict]:
    """The rows' masks for one case, and the candidate counts by kind and gold label."""
    from neurorefiner.agents.candidates import apply_candidates, find_candidates
    from neurorefiner.agents.learned.gold_labels import GoldIndex, label_all

    cands = find_candidates(image, mask, spacing, candidate_settings)
    index = GoldIndex(gold, spacing, mask.shape, label_settings)
    labels = label_all(cands.candidates, index)
    true = [c for c, y in zip(cands.candidates, labels) if y == 1]
    a = [c for c in true if c.kind in ("join", "remove")]
    masks = {
        "initial": mask,
        "classical": classical_mask(image, mask, spacing),
        "ceiling_a": apply_candidates(mask, a),
        "ceiling_b": apply_candidates(mask, true),
        "scope": _cut_to(mask, index.scope_slices()),
    }
    counts: dict[str, int] = {}
    for c, y in zip(cands.candidates, labels):
        key = f"{c.kind}_{'none' if y is None else y}"
        counts[key] = counts.get(key, 0) + 1
    return masks, counts


def _cut_to(mask: np.ndarray, box: tuple[slice, ...]) -> np.ndarray:
    out = np.zeros_like(mask, dtype=bool)
    out[box] = mask[box]
    return out


def run_ceilings(items: Sequence[tuple[str, str, np.ndarray, np.ndarray, Any, Sequence[float]]],
                 progress: bool = True) -> list[dict]:
    """One row per (case, segmenter, row kind). ``items``: (case, segmenter, image, mask, gold, spacing)."""
    from tqdm import tqdm

    score = protocol_scorer()
    rows = []
    for case, segmenter, image, mask, gold, spacing in tqdm(items, desc="ceilings", unit="case", disable=not progress):
        masks, counts = ceiling_masks(image, mask, gold, spacing)
        for name in ROWS:
            m = score(masks[name], gold, spacing)
            rows.append({"case": case, "segmenter": segmenter, "row": name, **{k: m[k] for k in METRICS},
                         "candidates": json.dumps(counts, sort_keys=True)})
    return rows


def dataset_items(dataset: str, split: str, segmenters: Sequence[str], limit: int | None = None
                  ) -> list[tuple[str, str, np.ndarray, np.ndarray, Any, Sequence[float]]]:
    """(case, segmenter, image, initial mask, gold, spacing) for a registry dataset's split, masks from the
    initial-mask cache (made on first use, as ``evaluate.py`` does)."""
    from neurorefiner.data.registry import get_dataset
    from neurorefiner.inference.init_masks import write_init_masks
    from neurorefiner.io.stacks import read_mask

    ds = get_dataset(dataset)
    cases = ds.cases(split)[: limit or None]
    out = []
    for seg in segmenters:
        paths = {p.stem: p for p in write_init_masks(dataset, seg, None, split, None, False,
                                                     only=[c.name for c in cases], progress=False)}
        for c in cases:
            img = c.image()
            spacing = tuple(float(v) for v in (c.spacing or img.spacing))
            out.append((c.name, seg, img.normalized(), read_mask(paths[c.name]).load() > 0, c.gold(), spacing))
    return out


def summary_table(rows: list[dict], title: str, command: str) -> str:
    """Markdown: mean metrics per (segmenter, row), F1 per case."""
    segs = sorted({r["segmenter"] for r in rows})
    cases = sorted({r["case"] for r in rows})
    lines = [f"# {title}", "", f"Produced by `{command}`.", "",
             "| Segmenter | Row | n | " + " | ".join(METRICS) + " | " + " | ".join(f"F1[{c}]" for c in cases) + " |",
             "|---|---|---|" + "---|" * (len(METRICS) + len(cases))]
    for s in segs:
        for name in ROWS:
            rs = [r for r in rows if r["segmenter"] == s and r["row"] == name]
            if not rs:
                continue
            means = [np.mean([r[k] for r in rs]) for k in METRICS]
            per = {r["case"]: r["F1"] for r in rs}
            lines.append(f"| {s} | {name} | {len(rs)} | " + " | ".join(f"{v:.2f}" for v in means) + " | "
                         + " | ".join(f"{per[c]:.2f}" if c in per else "" for c in cases) + " |")
    return "\n".join(lines) + "\n"


def write_rows(rows: list[dict], path: Path) -> Path:
    from neurorefiner.io.atomic import write_text_atomic

    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue())
    return path
