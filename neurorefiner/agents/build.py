"""The one place that assembles Algorithm 1 from config: roles, editor, settings, trace.

Why one place: ``refine.py`` (through :mod:`neurorefiner.agents.run`) and the evaluation method
(:class:`neurorefiner.evaluation.methods.NeuroRefiner`) used to assemble the loop each in their own way, with
a copied editor factory and two shapes of trace header. Both now call :func:`build_loop` and run a volume
with :meth:`RefinementLoop.run`, so a trace from either is read the same way (report, replay, resume).

The settings' defaults live in :class:`~neurorefiner.agents.loop.LoopSettings` (spelled for Hydra in
``conf/loop/default.yaml``); ``loop_cfg`` only needs the keys that differ.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.editor import LazyEditor, load_topo_refiner
from neurorefiner.agents.factory import build_agents
from neurorefiner.agents.loop import Agents, LoopResult, LoopSettings, PriorRun, run_loop
from neurorefiner.agents.roles import Editor
from neurorefiner.agents.trace import TRACE_VERSION, TraceWriter, array_hash

#: what must match between a trace's run header and a new run for the new run to reuse the trace
RUN_KEYS = ("version", "image_hash", "mask_hash", "settings", "agent", "editor")


def plain(node: Any) -> dict:
    """A config node (DictConfig, dict or None) as a plain, resolved dict."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node or {})


def editor_factory(editor_cfg: Any) -> Callable[[], Editor]:
    """A no-argument callable that builds the editor: ``editor_cfg._target_`` (a ``_partial_`` node, as in
    ``conf/editor/``) or, without one, :func:`load_topo_refiner` with the node's keys."""
    node = plain(editor_cfg)
    if node.get("_target_") is None:
        return lambda: load_topo_refiner(**node)
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.create(node))


@dataclass
class RefinementLoop:
    """Everything one run of Algorithm 1 needs, built from config by :func:`build_loop`.

    ``secrets`` are kept out of the trace; ``description`` is the secret-free config the trace's run header
    records (``agent`` and ``editor``)."""

    agents: Agents
    editor: Editor
    settings: LoopSettings
    secrets: list[str] = field(default_factory=list)
    description: dict = field(default_factory=dict)

    def header(self, image: np.ndarray, mask: np.ndarray) -> dict:
        """The trace's first record: what must match (:func:`same_run`) for a restart to reuse the trace."""
        return {"type": "run", "version": TRACE_VERSION, "image_hash": array_hash(np.asarray(image, np.float32)),
                "mask_hash": array_hash(np.asarray(mask, bool)), "settings": self.settings.as_dict(),
                "agent": self.description.get("agent"), "editor": self.description.get("editor")}

    def run(self, image: np.ndarray, mask: np.ndarray, spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
            trace_path: str | Path | None = None, inputs: Mapping[str, Any] | None = None,
            prior: PriorRun | None = None, header: dict | None = None, progress: bool = False) -> LoopResult:
        """Refine one volume (``image`` ZYX float32 in [0, 1], ``mask`` ZYX bool). With ``trace_path`` every
        decision is appended there between a run header (plus ``inputs``, where the volume came from, and
        whether it ``resumed`` from ``prior``) and a ``done`` record."""
        image = np.asarray(image, np.float32)
        mask = np.asarray(mask, bool)
        spacing = tuple(float(s) for s in spacing)  # type: ignore[assignment]
        if trace_path is None:
            return run_loop(image, mask, self.agents, self.editor, self.settings, spacing, prior=prior,
                            progress=progress)
        t0 = time.perf_counter()
        with TraceWriter(trace_path, self.secrets) as trace:
            trace.write({**(header or self.header(image, mask)), "resumed": prior is not None,
                         "inputs": {k: str(v) for k, v in (inputs or {}).items()}})
            result = run_loop(image, mask, self.agents, self.editor, self.settings, spacing, emit=trace.write,
                              prior=prior, progress=progress)
            trace.write({"type": "done", "mask_hash": array_hash(result.mask),
                         "seconds": round(time.perf_counter() - t0, 3), "counts": result.counts,
                         "converged": result.converged})
        return result


def build_loop(agent_cfg: Any, loop_cfg: Any = None, editor_cfg: Any = None, t_max: int = 5,
               editor: Editor | None = None) -> RefinementLoop:
    """The loop for one run: roles from ``agent_cfg`` (any ``conf/agent/`` node), :class:`LoopSettings` from
    ``t_max`` and the keys of ``loop_cfg``, the editor from ``editor_cfg`` (built on its first edit) unless an
    ``editor`` already built is passed (the evaluation method keeps one for all its volumes)."""
    from omegaconf import DictConfig, OmegaConf

    node = agent_cfg if isinstance(agent_cfg, DictConfig) else OmegaConf.create(plain(agent_cfg))
    agents, secrets, described = build_agents(node)
    settings = LoopSettings(t_max=int(t_max), **plain(loop_cfg))
    if editor is None:
        editor = LazyEditor(editor_factory(editor_cfg))
    return RefinementLoop(agents, editor, settings, secrets, {"agent": described, "editor": plain(editor_cfg)})


def same_run(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two run headers describe the same run (same inputs, settings, agents and editor)."""
    return all(a.get(k) == b.get(k) for k in RUN_KEYS)
