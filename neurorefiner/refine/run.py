"""One refine run, built once from config: roles, editor, loop settings, voxel size and the trace's header.

Why one place: ``refine.py`` (:mod:`neurorefiner.refine.local`), the Dask run (:mod:`.whole_volume`), the
evaluation method (:class:`neurorefiner.evaluation.methods.NeuroRefiner`), ``neurorefiner inspect`` and the
studies and bench cases that run the loop used to resolve their settings each in their own way:
:class:`LoopSettings` built in four places, the spacing chosen in three, the roles built by hand in three.
Each now builds a :class:`RefineRun` (:meth:`RefineRun.from_config` for a composed ``refine.yaml`` and its two
inputs, which resolves the voxel size; :meth:`RefineRun.build` for the pieces) and runs volumes with
:meth:`RefineRun.run`, so a trace from any of them is read the same way (report, replay, resume) and records the
same things, the voxel size among them.

A run built from config travels to another process (a Dask worker) as its settings, voxel size and the recipe of
its roles and editor (:class:`Recipe`): the roles and the lazy editor are rebuilt where it lands, once per
process that receives it, and nothing is resolved again from the config there.

The settings' defaults live in :class:`~neurorefiner.agents.loop.LoopSettings` (spelled for Hydra in
``conf/loop/default.yaml``); a ``loop`` node only needs the keys that differ.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurorefiner.agents.editor import LazyEditor, load_topo_refiner
from neurorefiner.agents.factory import build_agents
from neurorefiner.agents.loop import Agents, LoopResult, LoopSettingError, LoopSettings, PriorRun, run_loop
from neurorefiner.agents.roles import Editor
from neurorefiner.agents.trace import TRACE_VERSION, TraceWriter, array_hash
from neurorefiner.errors import InputError
from neurorefiner.io.spacing import SpacingChoice, resolve_spacing
from neurorefiner.io.volume import DEFAULT_SPACING, check_spacing

#: what must match between a trace's run header and a new run for the new run to reuse the trace; the voxel
#: size is among them (the Inspector's reach, the editor's context and APP2 work in um), where it came from is not
RUN_KEYS = ("version", "image_hash", "mask_hash", "spacing", "settings", "agent", "editor", "root_zyx", "policy")


def plain(node: Any) -> dict:
    """A config node (DictConfig, dict or None) as a plain, resolved dict."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node or {})


def loop_settings(t_max: Any = 5, loop_cfg: Any = None, prefix: str = "") -> LoopSettings:
    """:class:`LoopSettings` from ``t_max`` and a ``loop`` node (only the keys that differ from the defaults).

    A value :class:`LoopSettings` refuses (its checks are the one place of the rules) or a key it does not have is
    an :class:`~neurorefiner.errors.InputError` naming the option as a command line spells it, after ``prefix``:
    ``t_max=0 must be ...``, ``loop.halo=-2 must be ...`` (refine.py), ``method_registry.neurorefiner.t_max=0 ...``
    (evaluate.py), so every entry point answers it with one line and exit code 2."""
    node = plain(loop_cfg)
    known = [f.name for f in dataclasses.fields(LoopSettings) if f.name != "t_max"]
    unknown = sorted(set(node) - set(known))
    if unknown:
        raise InputError(f"{prefix}loop has no setting(s) {unknown}; known: {', '.join(known)}")
    try:
        return LoopSettings(t_max=t_max, **node)
    except LoopSettingError as exc:
        raise InputError(f"{prefix}{'' if exc.field == 't_max' else 'loop.'}{exc}") from None


def editor_factory(editor_cfg: Any) -> Callable[[], Editor]:
    """A no-argument callable that builds the editor: ``editor_cfg._target_`` (a ``_partial_`` node, as in
    ``conf/editor/``) or, without one, :func:`load_topo_refiner` with the node's keys."""
    node = plain(editor_cfg)
    if node.get("_target_") is None:
        return lambda: load_topo_refiner(**node)
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.create(node))


@dataclass(frozen=True)
class Recipe:
    """How a run's roles and editor are built: the resolved ``agent`` and ``editor`` nodes (secrets included,
    they never reach a trace). What a run carries to another process instead of built objects: a loaded
    judge, a network or a model server's client are rebuilt there, as the run that sent them built them."""

    agent: dict
    editor: dict

    def agents(self) -> tuple[Agents, list[str], dict]:
        """The roles, the secrets to keep out of the trace and the roles' secret-free description."""
        from omegaconf import OmegaConf

        return build_agents(OmegaConf.create(self.agent))

    def lazy_editor(self) -> LazyEditor:
        """The editor, built on its first edit."""
        return LazyEditor(editor_factory(self.editor))


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
    recipe: Recipe | None = field(default=None, repr=False, compare=False)
    policy: dict = field(default_factory=lambda: {"kind": "agents"})

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def build(cls, agent: Any, loop: Any = None, editor: Any = None, t_max: int = 5,
              spacing: SpacingChoice | None = None, editor_object: Editor | None = None,
              role_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
              policy: Mapping[str, Any] | None = None) -> RefineRun:
        """The run from its config pieces: roles from ``agent`` (any ``conf/agent/`` node; ``role_kwargs`` adds
        objects a config cannot hold, e.g. ``{"inspector": {"judge": judge}}``), :class:`LoopSettings` from
        ``t_max`` and the keys of ``loop``, the editor from ``editor`` (built on its first edit) unless
        ``editor_object`` is passed (the evaluation method keeps one for all its volumes). ``policy``: a refiner
        plan's kind (:mod:`neurorefiner.io.refiner_plans`): ``agents`` (the default), ``classical`` (with its
        ``min_size`` / ``max_gap``) or ``initial``."""
        from omegaconf import DictConfig, OmegaConf

        node = agent if isinstance(agent, DictConfig) else OmegaConf.create(plain(agent))
        agents, secrets, described = build_agents(node, role_kwargs)
        settings = loop_settings(t_max, loop)
        built = editor_object if editor_object is not None else LazyEditor(editor_factory(editor))
        # built from config alone, it can be rebuilt elsewhere; objects passed in cannot travel
        recipe = Recipe(plain(agent), plain(editor)) if editor_object is None and not role_kwargs else None
        run = cls(agents, built, settings, secrets, {"agent": described, "editor": plain(editor)}, recipe=recipe,
                  policy=check_policy(policy))
        return run if spacing is None else run.with_spacing(spacing)

    @classmethod
    def from_config(cls, cfg: Any, image: Any = None, mask: Any = None, **kwargs: Any) -> RefineRun:
        """The run of a composed ``refine.yaml`` (``agent``, ``loop``, ``editor``, ``t_max``, ``spacing``).

        With the inputs (``image`` and ``mask``: :class:`~neurorefiner.io.Volume` or
        :class:`~neurorefiner.io.ome_zarr.ZarrSource`) the voxel size is settled here, the one place of every
        refine run (local and Dask): ``spacing=`` over the files' calibration, and with neither an
        :class:`~neurorefiner.errors.InputError` naming the file (exit 2) before any role is built. Without
        them (``neurorefiner inspect``, tests) the run is at 1, 1, 1 um until :meth:`with_spacing`."""
        choice = None if image is None else resolve_spacing(cfg.get("spacing"), image, mask)
        return cls.build(cfg.agent, cfg.get("loop"), cfg.get("editor"), int(cfg.get("t_max", 5)), choice,
                         policy=plain(cfg.get("policy")) or None, **kwargs)

    def with_spacing(self, spacing: SpacingChoice | tuple | list, source: str | None = None) -> RefineRun:
        """The same run (same roles and editor objects) at another voxel size."""
        if isinstance(spacing, SpacingChoice):
            values, source = spacing.values, spacing.source
        else:
            values = check_spacing(spacing, "spacing")
        return dataclasses.replace(self, spacing=tuple(float(v) for v in values),  # type: ignore[arg-type]
                                   spacing_from=source or "given")

    def afresh(self) -> RefineRun:
        """The same run with its roles' memory of earlier volumes cleared: a fallback that gave up on its model
        server (``agent.fallback``) asks it again. What a run that refines many volumes (the evaluation method)
        gives each volume, as a run built anew for it would."""
        from neurorefiner.agents.fallback import WithFallback

        def fresh(role: Any) -> Any:
            return WithFallback(role.primary, role.fallback) if isinstance(role, WithFallback) else role

        roles = self.agents
        return dataclasses.replace(self, agents=Agents(fresh(roles.inspector), fresh(roles.advisor),
                                                       fresh(roles.validator)))

    # ------------------------------------------------------------------------------------------ running
    def header(self, image: np.ndarray | Mapping[str, Any], mask: np.ndarray | Mapping[str, Any],
               **extra: Any) -> dict:
        """The trace's first record: what must match (:func:`same_run`) for a restart to reuse the trace, and
        where the voxel size came from. ``image`` and ``mask`` are the arrays refined (recorded by their
        hashes) or, for a volume too large to hash at once (the Dask run), a description of each (path, shape,
        statistics; recorded as given); ``extra`` adds what else the run must match (the Dask run's engine and
        tile plan, a tile, ``root_zyx``: the soma the Inspector grows from, None when the largest piece is)."""
        if isinstance(image, Mapping) or isinstance(mask, Mapping):
            inputs: dict = {"image": dict(image), "mask": dict(mask)}  # type: ignore[arg-type]
        else:
            inputs = {"image_hash": array_hash(np.asarray(image, np.float32)),
                      "mask_hash": array_hash(np.asarray(mask, bool))}
        return {"type": "run", "version": TRACE_VERSION, **inputs, "spacing": list(self.spacing),
                "spacing_from": self.spacing_from, "settings": self.settings.as_dict(),
                "agent": self.description.get("agent"), "editor": self.description.get("editor"), "root_zyx": None,
                "policy": dict(self.policy), **extra}

    def __reduce__(self) -> tuple:
        """Pickled as its recipe, settings and voxel size (the roles and editor are rebuilt on unpickling):
        what lets the Dask driver hand its run to the workers."""
        if self.recipe is None:
            raise TypeError("a RefineRun built with objects (editor_object, role_kwargs) cannot be sent to another "
                            "process; build it from config alone")
        return (_rebuilt, (self.recipe, self.settings, self.secrets, self.description, self.spacing,
                           self.spacing_from, self.policy))

    def run(self, image: np.ndarray, mask: np.ndarray, trace_path: str | Path | None = None,
            inputs: Mapping[str, Any] | None = None, prior: PriorRun | None = None, header: dict | None = None,
            progress: bool = False, root: Sequence[float] | None = None) -> LoopResult:
        """Refine one volume (``image`` ZYX float32 in [0, 1], ``mask`` ZYX bool) at this run's spacing, growing
        the piece at ``root`` (ZYX voxels, the soma) when given. With ``trace_path`` every decision is appended
        there between a run header (plus ``inputs``, where the volume came from, and whether it ``resumed``
        from ``prior``) and a ``done`` record."""
        image = np.asarray(image, np.float32)
        mask = np.asarray(mask, bool)
        tree_root = None if root is None else tuple(float(v) for v in root)
        if self.policy["kind"] != "agents":
            return self._run_policy(image, mask, tree_root, trace_path, header, inputs)
        if trace_path is None:
            return run_loop(image, mask, self.agents, self.editor, self.settings, self.spacing, prior=prior,
                            progress=progress, root=tree_root)
        t0 = time.perf_counter()
        with TraceWriter(trace_path, self.secrets) as trace:
            head = header or self.header(image, mask, **({} if tree_root is None else {"root_zyx": list(tree_root)}))
            trace.write({**head, "resumed": prior is not None,
                         "inputs": {k: str(v) for k, v in (inputs or {}).items()}})
            result = run_loop(image, mask, self.agents, self.editor, self.settings, self.spacing, emit=trace.write,
                              prior=prior, progress=progress, root=tree_root)
            trace.write({"type": "done", "mask_hash": array_hash(result.mask),
                         "seconds": round(time.perf_counter() - t0, 3), "counts": result.counts,
                         "converged": result.converged})
        return result


    def _run_policy(self, image: np.ndarray, mask: np.ndarray, root: Sequence[float] | None,
                    trace_path: str | Path | None, header: dict | None, inputs: Mapping[str, Any] | None
                    ) -> LoopResult:
        """A plan whose validation chose no agents: the classical refiner (bridging to the piece at ``root``) or
        the mask as it is; the trace, when asked for, holds the run header and a ``done`` record naming it."""
        t0 = time.perf_counter()
        if self.policy["kind"] == "classical":
            from neurorefiner.baselines.classical import classical_refine

            settings = {"min_size": int(self.policy["min_size"]), "max_gap": float(self.policy["max_gap"])}
            if self.policy.get("join_veto") is not None:   # classical's bridges, each judged (the plan's judge)
                from neurorefiner.agents.learned.join_veto import judged_classical
                from neurorefiner.agents.learned.judge import Judge

                out = judged_classical(image, mask, self.spacing, Judge.load(self.policy["judge"]),
                                       float(self.policy["join_veto"]), root=root, **settings)
            else:
                out = classical_refine(image, mask, self.spacing, root=root, **settings)
        else:
            out = mask.copy()
        seconds = round(time.perf_counter() - t0, 3)
        counts = {"accepted": 0, "rejected": 0, "escalated": 0, "reused_blocks": 0,   # no agent edits: every
                  "policy": self.policy["kind"], "policy_name": policy_name(self.policy),
                  "voxels_added": int((out & ~mask).sum()),                                 # reader of counts
                  "voxels_removed": int((mask & ~out).sum())}                               # finds the loop's keys
        result = LoopResult(out, [], {}, {"policy": seconds}, True, counts)
        if trace_path is not None:
            with TraceWriter(trace_path, self.secrets) as trace:
                head = header or self.header(image, mask, **({} if root is None else {"root_zyx": list(root)}))
                trace.write({**head, "resumed": False, "inputs": {k: str(v) for k, v in (inputs or {}).items()}})
                trace.write({"type": "done", "mask_hash": array_hash(out), "seconds": seconds, "counts": counts,
                             "converged": True})
        return result


def policy_name(policy: Mapping[str, Any]) -> str:
    """What a plan's policy does, in the words of the choose step's table (``classical, reach 40 voxels, bridges
    judged at p >= 0.6``), for the run's summary line."""
    if policy.get("kind") != "classical":
        return str(policy.get("kind"))
    name = f"classical, reach {float(policy['max_gap']):g} voxels"
    veto = policy.get("join_veto")
    return name + (f", bridges judged at p >= {float(veto):.1f}" if veto is not None and float(veto) > 0 else "")


def check_policy(policy: Mapping[str, Any] | None) -> dict:
    """A run's policy as a plain dict (``{"kind": "agents"}`` when none is given), or an :class:`InputError`."""
    from neurorefiner.io.refiner_plans import POLICY_KINDS

    node = dict(policy or {"kind": "agents"})
    if node.get("kind") not in POLICY_KINDS:
        raise InputError(f"policy.kind must be one of {', '.join(POLICY_KINDS)}, got {node.get('kind')!r}")
    if node["kind"] == "classical" and not {"min_size", "max_gap"} <= set(node):
        raise InputError("a classical policy needs min_size and max_gap (the refiner's plans.json)")
    if node["kind"] == "classical" and node.get("join_veto") is not None and not node.get("judge"):
        raise InputError("a classical policy with a join_veto needs the judge that vetoes (the refiner's plans.json)")
    return node


def _rebuilt(recipe: Recipe, settings: LoopSettings, secrets: list[str], description: dict,
             spacing: tuple[float, float, float], spacing_from: str, policy: dict) -> RefineRun:
    """A pickled :class:`RefineRun` on arrival: roles and editor from its recipe, everything else as sent."""
    agents, _, _ = recipe.agents()
    return RefineRun(agents, recipe.lazy_editor(), settings, list(secrets), dict(description), tuple(spacing),
                     spacing_from, recipe, policy)


WHAT = {"image_hash": "another image", "mask_hash": "another mask", "version": "an older trace format",
        "settings": "other loop settings", "agent": "other agents", "editor": "another editor",
        "root_zyx": "another root (soma) position", "policy": "another refiner policy"}


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


def soma_root(cfg: Any) -> tuple[float, float, float] | None:
    """The soma (ZYX voxels) from ``tracing.marker`` (x, y, z, APP2's order), or None: the marker that starts
    APP2's trace also tells the Inspector which piece is the neuron to grow."""
    marker = (cfg.get("tracing") or {}).get("marker")
    if marker is None:
        return None
    values = [float(v) for v in marker]
    if len(values) != 3:
        raise InputError(f"tracing.marker must be x,y,z (three numbers), got {list(marker)}")
    x, y, z = values
    return z, y, x
