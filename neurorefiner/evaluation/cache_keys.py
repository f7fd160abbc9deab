"""The keys finished rows are kept under, and the rows a table may reuse.

Why keys at all: a row (one method on one volume under one protocol) costs minutes, so a finished one is read
back instead of recomputed, and a run that stops resumes. That is only right while everything that made the row
is unchanged: the tracing and metric settings (:func:`settings_key`, the row folder), the method's settings and
code version, and the bytes of every file it loads (:func:`row_key`): the editor's and segmenter's checkpoints
and the judge the learned agents actually run, the shipped ``checkpoints/judge.json`` when the config leaves
``judge: null``. Anything else changed means another key, so a stale row is never taken for a current one.
The data are part of it too (:func:`case_data_key`, kept in the row): the same case name under another dataset
seed or root, or a regenerated preset, holds another volume, and its old row is not that volume's score.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.evaluation.methods import method_class, method_key, method_node
from neurorefiner.inference.init_masks import file_digest, preset_name

#: keys of a method node whose string value names a file of weights the method loads
CHECKPOINT_KEYS = ("checkpoint", "ckpt", "ckpt_path", "checkpoint_path", "judge")
ROLES = ("inspector", "advisor", "validator")


def case_data_key(case: Any) -> str:
    """A short digest of what a case's row is computed from: the bytes of its image, gold SWC and label files
    and the voxel size and tube radius the dataset gives them. Why: rows were kept by method and scoring
    settings alone, so an evaluation of fresh volumes (another ``dataset.seed`` or ``dataset.root``, the same
    case names) into the same ``out_dir`` read back the first volumes' rows and reported their F1."""
    files = {}
    for what in ("image_path", "swc_path", "label_path"):
        path = getattr(case, what, None)
        files[what] = file_digest(Path(path)) if path is not None and Path(path).exists() else None
    spacing = getattr(case, "spacing", None)
    blob = json.dumps({"files": files, "spacing": None if spacing is None else [float(v) for v in spacing],
                       "label_radius": getattr(case, "label_radius", None)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def settings_key(cfg: DictConfig) -> str:
    """A short digest of the tracing and metric settings: rows are only reused under the same ones."""
    blob = json.dumps({"tracing": OmegaConf.to_container(cfg.tracing, resolve=True),
                       "metrics": OmegaConf.to_container(cfg.metrics, resolve=True)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _checkpoint_values(node: Any) -> list[str]:
    """Every ``checkpoint``/``ckpt``/``checkpoint_path`` value set anywhere in a method node, and the learned
    agents' ``judge`` file: a retrained judge changes the edits as new weights do."""
    found: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in CHECKPOINT_KEYS and isinstance(v, str) and v:
                found.append(v)
            else:
                found += _checkpoint_values(v)
    elif isinstance(node, list):
        for v in node:
            found += _checkpoint_values(v)
    return found


def _takes_judge(target: Any) -> bool:
    """Whether a role's ``_target_`` loads a judge (has a ``judge`` argument: the learned Inspector)."""
    from hydra.utils import get_object

    try:
        return "judge" in inspect.signature(get_object(str(target))).parameters
    except Exception:  # noqa: BLE001 - an unresolvable target fails clearly when the method is built
        return False


def default_judges(node: dict) -> list[Path]:
    """The judge file each role of the method's agents loads when its config names none (``judge: null`` or
    no ``judge`` key): the shipped ``checkpoints/judge.json``. The agent is the one the method runs: its
    ``agent`` with ``agent_overrides`` merged on. Judges the config names are :func:`_checkpoint_values`'."""
    from neurorefiner.agents.learned.roles import shipped_judge

    agent = node.get("agent")
    if not isinstance(agent, dict):
        return []
    merged = OmegaConf.to_container(OmegaConf.merge(agent, node.get("agent_overrides") or {}), resolve=True)
    roles = [merged.get(role) for role in ROLES]  # type: ignore[union-attr]
    return [shipped_judge() for spec in roles
            if isinstance(spec, dict) and not spec.get("judge") and _takes_judge(spec.get("_target_"))]


def method_checkpoints(node: DictConfig, segmenter: str, dataset: str) -> list[Path]:
    """The checkpoint files a method's rows depend on: those its node names (the editor's ``null`` means
    the shipped ``checkpoints/toporefinenet.ckpt``, a learned role's ``judge: null`` the shipped
    ``checkpoints/judge.json``) and, when it starts from the initial mask, the segmenter's shipped checkpoint
    for ``dataset``, the dataset's full name (with its subset: ``preset_name``)."""
    from neurorefiner.inference.init_masks import NAIVE, shipped_checkpoint
    from neurorefiner.paths import project_root

    plain = OmegaConf.to_container(node, resolve=True)
    files = [Path(v) for v in _checkpoint_values(plain)]
    editor = plain.get("editor") if isinstance(plain, dict) else None
    if isinstance(editor, dict) and not editor.get("checkpoint"):
        files.append(project_root() / "checkpoints" / "toporefinenet.ckpt")
    if isinstance(plain, dict):
        files += default_judges(plain)
    if getattr(method_class(node), "needs_initial", True) and segmenter != NAIVE:
        files.append(shipped_checkpoint(segmenter, dataset))
    return [f for f in files if f.is_file()]


def row_key(node: DictConfig, segmenter: str, dataset: str) -> str:
    """The key a row is kept under: the method's settings (:func:`method_key`), its code version (the
    class's ``cache_version``) and the sha256 of every checkpoint it or the segmenter loads. Rows made by
    other code or other weights are then never read back as if they were current."""
    blob = json.dumps({"settings": method_key(node),
                       "version": str(getattr(method_class(node), "cache_version", "0")),
                       "checkpoints": sorted(file_digest(p) for p in method_checkpoints(node, segmenter, dataset))},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def table_rows(cfg: DictConfig, split_dir: Path, rows: list[dict], dataset: str | None = None,
               data_keys: dict[str, str] | None = None) -> list[dict]:
    """This run's rows plus every row already in ``split_dir`` (any segmenter, e.g. from a multirun over
    ``segmenter`` or ``cases``) made with the current settings, code version and checkpoints of a method the
    config knows. ``data_keys`` (case -> :func:`case_data_key` of the split's current cases): when given, a row
    joins only if it was made on its case's current data (a row of a case the split no longer holds, or from
    before rows carried the key, does not)."""
    dataset = dataset or preset_name(str(cfg.dataset.get("name", "")), cfg.dataset.get("subset"))
    keys: dict[tuple[str, str], str] = {}
    out = {(r["segmenter"], r["method"], r["protocol"], r["case"]): r for r in rows}
    for path in sorted(split_dir.glob("*/*.json")):
        name, segmenter = path.name.split("-", 1)[0], path.parent.name
        if (name, segmenter) not in keys:
            try:
                keys[(name, segmenter)] = row_key(method_node(cfg, name), segmenter, dataset)
            except InputError:
                keys[(name, segmenter)] = ""
        if not path.name.startswith(f"{name}-{keys[(name, segmenter)]}__"):
            continue
        row = json.loads(path.read_text())
        if data_keys is not None and row.get("data_key") != data_keys.get(str(row.get("case"))):
            continue
        out.setdefault((row["segmenter"], row["method"], row["protocol"], row["case"]), row)
    return list(out.values())
