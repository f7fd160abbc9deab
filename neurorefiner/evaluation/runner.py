"""Evaluation runner: for each method and case, get the mask, reconstruct it with APP2, score it against
the gold SWC, and write per-volume rows (CSV) and the paper-style summary (markdown).

Methods name where a mask comes from: ``initial`` is the segmenter's mask (``init_masks`` cache); other
methods are refinements of it, looked up in ``REFINERS`` as they land. A finished (method, case) pair is
read back from its row file, so an interrupted run resumes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
from omegaconf import DictConfig
from tqdm import tqdm

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError, MissingPieceError
from neurorefiner.evaluation.tables import markdown_table, summarize, write_rows_csv
from neurorefiner.io import read_mask
from neurorefiner.io.atomic import atomic_path, write_text_atomic
from neurorefiner.paths import cache_dir

MaskSource = Callable[[Case, np.ndarray], np.ndarray]


def init_mask_path(dataset: str, segmenter: str, case: str) -> Path:
    return cache_dir() / "init_masks" / dataset / segmenter / f"{case}.tif"


def initial_mask(dataset: str, segmenter: str) -> MaskSource:
    def source(case: Case, image: np.ndarray) -> np.ndarray:
        path = init_mask_path(dataset, segmenter, case.name)
        if not path.exists():
            raise InputError(f"no initial mask for {case.name}; make them first with "
                             f"`python -m neurorefiner.inference.init_masks dataset={dataset} segmenter={segmenter}`",
                             path)
        return read_mask(path).load()

    return source


def gold_mask() -> MaskSource:
    """The rasterised gold tree itself: an upper bound that checks the tracing + metrics chain."""
    return lambda case, image: case.label(image.shape)


def mask_source(method: str, dataset: str, segmenter: str) -> MaskSource:
    if method == "initial":
        return initial_mask(dataset, segmenter)
    if method == "gold_mask":
        return gold_mask()
    raise MissingPieceError(f"refinement method {method!r} has not landed; available: initial, gold_mask")


def evaluate(cfg: DictConfig, dataset, cases: list[Case]) -> list[dict]:  # type: ignore[no-untyped-def]
    try:
        from neurorefiner.metrics import score_mask
    except ImportError as exc:
        raise MissingPieceError("APP2 tracing and the metrics (issue 4) have not landed") from exc
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if cfg.get("limit"):
        cases = cases[: int(cfg.limit)]
    rows: list[dict] = []
    rows_dir = out_dir / "rows"
    for method in cfg.methods:
        source = mask_source(method, dataset.name, cfg.segmenter)
        for case in tqdm(cases, desc=f"{dataset.name}/{method}", unit="vol"):
            row_file = rows_dir / f"{method}__{case.name}.json"
            if row_file.exists():
                rows.append(json.loads(row_file.read_text()))
                continue
            image = case.image()
            mask = source(case, image.load())
            scores = score_mask(case.gold(), mask, image.spacing)
            row = {"dataset": dataset.name, "split": case.split, "case": case.name, "method": method,
                   "segmenter": cfg.segmenter, **{k: float(v) for k, v in scores.items()}}
            row_file.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(row_file) as tmp:
                tmp.write_text(json.dumps(row))
            rows.append(row)
    write_rows_csv(out_dir / "per_volume.csv", rows)
    table = markdown_table(summarize(rows))
    synthetic = dataset.name.startswith("synthetic") or dataset.name == "tiny"
    title = f"# {dataset.name} ({'SYNTHETIC data' if synthetic else 'real data'}), split {cfg.split}\n\n"
    write_text_atomic(out_dir / "table.md", title + table)
    print(title + table)
    return rows
