"""One refine run, built once from config: roles, editor, loop settings, voxel size and the trace's header.

Why one place: ``refine.py`` (:mod:`neurorefiner.refine.local`), the Dask run (:mod:`.whole_volume`), the
evaluation method (:class:`neurorefiner.evaluation.methods.NeuroRefiner`), ``neurorefiner inspect`` and the
studies and bench cases that run the loop used to resolve their settings each in their own way:
:class:`LoopSettings` built in four places, the spacing chosen in three, the roles built by hand in three.
Each now builds a :class:`RefineRun` (:meth:`RefineRun.from_config` for a composed ``refine.yaml``,
:meth:`RefineRun.build` for the pieces) and runs volumes with :meth:`RefineRun.run`, so a trace from any of
them is read the same way (report, replay, resume) and records the same things, the voxel size among them.

The settings' defaults live in :class:`~neurorefiner.agents.loop.LoopSettings` (spelled for Hydra in
``conf/loop/default.yaml``); a ``loop`` node only needs the keys that differ.
"""

from __future__ import annotations

import dataclasses
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
from neurorefiner.io.spacing import SpacingChoice
from neurorefiner.io.volume import DEFAULT_SPACING, check_spacing

#: what must match between a trace's run header and a new run for the new run to reuse the trace; the voxel
#: size is among them (the Inspector's reach, the editor's context and APP2 work in um), where it came from is not
RUN_KEYS = ("version", "image_hash", "mask_hash", "spacing", "settings", "agent", "editor")


def plain(node: Any) -> dict:
    """A config node (DictConfig, dict or None) as a plain, resolved dict."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node or {})


def loop_settings(t_max: Any = 5, loop_cfg: Any = None) -> LoopSettings:
    """:class:`LoopSettings` from ``t_max`` and a ``loop`` node (only the keys that differ from the defaults)."""
    return LoopSettings(t_max=int(t_max), **plain(loop_cfg))


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
class RefineRun:
    """Everything one run of Algorithm 1 needs: roles, editor, settings and the voxel size with its source.

    ``secrets`` are kept out of the trace; ``description`` is the secret-free config the trace's run header
    records (``agent`` and ``editor``). One run refines one volume (``refine.py``) or, with
    :meth:`with_spacing` per volume, many (the evaluation method; each dataset case has its own spacing)."""

    agents: Agents
    editor: Editor
    settings: LoopSettings
    secrets: list[str] = field(default_factory=list)
    description: dict = field(default_factory=dict)
    spacing: tuple[float, float, float] = DEFAULT_SPACING
    spacing_from: str = "not given (1, 1, 1 um)"

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def build(cls, agent: Any, loop: Any = None, editor: Any = None, t_max: int = 5,
              spacing: SpacingChoice | None = None, editor_object: Editor | None = None,
              role_kwargs: Mapping[str, Mapping[str, Any]] | None = None) -> RefineRun:
        """The run from its config pieces: roles from ``agent`` (any ``conf/agent/`` node; ``role_kwargs`` adds
        objects a config cannot hold, e.g. ``{"inspector": {"judge": judge}}``), :class:`LoopSettings` from
        ``t_max`` and the keys of ``loop``, the editor from ``editor`` (built on its first edit) unless
        ``editor_object`` is passed (the evaluation method keeps one for all its volumes)."""
        from omegaconf import DictConfig, OmegaConf

        node = agent if isinstance(agent, DictConfig) else OmegaConf.create(plain(agent))
        agents, secrets, described = build_agents(node, role_kwargs)
        settings = loop_settings(t_max, loop)
        built = editor_object if editor_object is not None else LazyEditor(editor_factory(editor))
        run = cls(agents, built, settings, secrets, {"agent": described, "editor": plain(editor)})
        return run if spacing is None else run.with_spacing(spacing)

    @classmethod
    def from_config(cls, cfg: Any, spacing: SpacingChoice | None = None, **kwargs: Any) -> RefineRun:
        """The run of a composed ``refine.yaml`` (``agent``, ``loop``, ``editor``, ``t_max``)."""
        return cls.build(cfg.agent, cfg.get("loop"), cfg.get("editor"), int(cfg.get("t_max", 5)), spacing, **kwargs)

    def with_spacing(self, spacing: SpacingChoice | tuple | list, source: str | None = None) -> RefineRun:
        """The same run (same roles and editor objects) at another voxel size."""
        if isinstance(spacing, SpacingChoice):
            values, source = spacing.values, spacing.source
        else:
            values = check_spacing(spacing, "spacing")
        return dataclasses.replace(self, spacing=tuple(float(v) for v in values),  # type: ignore[arg-type]
                                   spacing_from=source or "given")

    # ------------------------------------------------------------------------------------------ running
    def header(self, image: np.ndarray, mask: np.ndarray) -> dict:
        """The trace's first record: what must match (:func:`same_run`) for a restart to reuse the trace, and
        where the voxel size came from."""
        return {"type": "run", "version": TRACE_VERSION, "image_hash": array_hash(np.asarray(image, np.float32)),
                "mask_hash": array_hash(np.asarray(mask, bool)), "spacing": list(self.spacing),
                "spacing_from": self.spacing_from, "settings": self.settings.as_dict(),
                "agent": self.description.get("agent"), "editor": self.description.get("editor")}

    def run(self, image: np.ndarray, mask: np.ndarray, trace_path: str | Path | None = None,
            inputs: Mapping[str, Any] | None = None, prior: PriorRun | None = None, header: dict | None = None,
            progress: bool = False) -> LoopResult:
        """Refine one volume (``image`` ZYX float32 in [0, 1], ``mask`` ZYX bool) at this run's spacing. With
        ``trace_path`` every decision is appended there between a run header (plus ``inputs``, where the volume
        came from, and whether it ``resumed`` from ``prior``) and a ``done`` record."""
        image = np.asarray(image, np.float32)
        mask = np.asarray(mask, bool)
        if trace_path is None:
            return run_loop(image, mask, self.agents, self.editor, self.settings, self.spacing, prior=prior,
                            progress=progress)
        t0 = time.perf_counter()
        with TraceWriter(trace_path, self.secrets) as trace:
            trace.write({**(header or self.header(image, mask)), "resumed": prior is not None,
                         "inputs": {k: str(v) for k, v in (inputs or {}).items()}})
            result = run_loop(image, mask, self.agents, self.editor, self.settings, self.spacing, emit=trace.write,
                              prior=prior, progress=progress)
            trace.write({"type": "done", "mask_hash": array_hash(result.mask),
                         "seconds": round(time.perf_counter() - t0, 3), "counts": result.counts,
                         "converged": result.converged})
        return result


WHAT = {"image_hash": "another image", "mask_hash": "another mask", "version": "an older trace format",
        "settings": "other loop settings", "agent": "other agents", "editor": "another editor"}


def same_run(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two run headers describe the same run (same inputs, spacing, settings, agents and editor)."""
    return not differences(a, b)


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between an earlier run's header and this run's, in words (empty: the same run). The voxel
    size is named with both values and their sources: a rerun with a corrected ``spacing=`` must not look like
    "some other run"."""
    out = []
    for key in RUN_KEYS:
        if old.get(key) == new.get(key):
            continue
        if key == "spacing":
            before = old.get("spacing_from", "source not recorded")
            out.append(f"its trace was made at spacing {old.get('spacing')} um ({before}), this run's is "
                       f"{new.get('spacing')} um ({new.get('spacing_from')})")
        else:
            out.append(WHAT.get(key, key))
    return out
