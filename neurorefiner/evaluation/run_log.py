"""Send an evaluation's results to the experiment loggers of ``cfg.logger`` (built by
:func:`neurorefiner.training.loggers.build_loggers`, the same nodes training uses, ``conf/logger/``).

Every logger gets the run's settings (``log_hyperparams``) and the summary means as scalars
(``<method (protocol)>/<metric>``); one that can hold tables and images (wandb) also gets the per-volume rows
and the summary as tables and each comparison figure as an image. wandb runs offline unless the logger node
says otherwise (``conf/logger/wandb.yaml``: ``WANDB_OFFLINE=false`` and a key to go online) and its run is
finished here, so the offline run directory is complete when ``evaluate`` returns. Nothing here imports
wandb: the loggers do, and only when one is configured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neurorefiner.evaluation.tables import row_columns

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from neurorefiner.evaluation.plan import Plan


def _cell(value: Any) -> Any:
    """A table cell of one type per column: numbers as float, text as text, missing as None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return str(value)


def table(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Columns (the union of the rows' keys, first-seen order) and one list of cells per row."""
    columns = row_columns(rows)
    return columns, [[_cell(row.get(c)) for c in columns] for row in rows]


def summary_scalars(summary: Sequence[Mapping[str, Any]], group: str = "method_protocol") -> dict[str, float]:
    """``{"<group value>/<metric>": mean}`` for every finite number of the summary rows."""
    out = {}
    for s in summary:
        for k, v in s.items():
            if k != group and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[f"{s[group]}/{k}"] = float(v)
    return out


def log_evaluation(loggers: Sequence[Any], rows: Sequence[Mapping[str, Any]],
                   summary: Sequence[Mapping[str, Any]], figures: Mapping[str, Path],
                   params: Mapping[str, Any]) -> None:
    """Log to each of ``loggers`` (Lightning loggers): settings, summary scalars and, where the logger has
    ``log_table`` / ``log_image``, the ``per_volume`` and ``summary`` tables and the ``comparison`` figures
    (``figures``: case name -> PNG). Each logger is saved, finalised and its run finished."""
    for logger in loggers:
        if hasattr(logger, "log_hyperparams"):
            logger.log_hyperparams(dict(params))
        scalars = summary_scalars(summary)
        if scalars:
            logger.log_metrics(scalars)
        if hasattr(logger, "log_table"):
            cols, data = table(rows)
            logger.log_table("per_volume", columns=cols, data=data)
            cols, data = table(summary)
            logger.log_table("summary", columns=cols, data=data)
        if hasattr(logger, "log_image") and figures:
            names = list(figures)
            logger.log_image("comparison", images=[str(figures[n]) for n in names], caption=names)
        logger.save()
        logger.finalize("success")
        finish = getattr(getattr(logger, "experiment", None), "finish", None)
        if callable(finish):  # a wandb run: close it so its offline directory is complete
            finish()


def send_to_loggers(cfg: DictConfig, plan: Plan, rows: list[dict], summary: list[dict], figures: dict[str, Path],
                    loggers: list[Any] | None) -> None:
    """The rows, the summary and the figures of an evaluation to its experiment loggers: ``loggers`` as given,
    or (None) those ``cfg.logger`` builds, none when it is unset (then nothing is imported)."""
    if loggers is None:
        from neurorefiner.training.loggers import build_loggers

        loggers = build_loggers(cfg)  # [] when cfg.logger is unset: nothing imported
    if not loggers:
        return
    from neurorefiner.evaluation.paper_tables import provenance

    log_evaluation(loggers, rows, summary, figures,
                   {"dataset": plan.dataset, "split": plan.split, "segmenter": plan.segmenter,
                    "methods": plan.methods, "protocols": plan.protocols, "settings_key": plan.settings,
                    "method_keys": dict(plan.keys), "commit": provenance("")["commit"],
                    "out_dir": str(plan.out_dir)})
