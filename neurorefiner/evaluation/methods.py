"""The methods the runner compares, as a registry of config nodes (``conf/method/*.yaml``).

A method is a mask-refining callable ``method(image, mask, case, spacing=...) -> mask``: ``image`` is the
stack normalised to [0, 1] (ZYX float32), ``mask`` the segmenter's initial mask (ZYX bool), ``case`` the
dataset case (gold tree, name), ``spacing`` z, y, x in um. A method that does not start from the initial
mask says so with ``needs_initial = False`` (``gold_mask``); one that has something to report per volume
(edits accepted, rounds) leaves it in ``last_info`` after each call, and the runner adds it to the row.

Where a name is looked up (:func:`method_node`): ``cfg.method_registry.<name>`` (filled from ``conf/method/``
by ``evaluate.yaml``'s defaults, overridable on the command line as ``method_registry.classical.max_gap=30``
and extended by experiment configs), else ``conf/method/<name>.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError
from neurorefiner.paths import conf_dir
from neurorefiner.topology.tree_root import TREE_ROOTS
from neurorefiner.tracing.seeding import gold_root_zyx


class Initial:
    """The segmenter's mask as it is."""

    needs_initial = True
    cache_version = "1"  # bump when a change of this code changes its masks: cached rows are then remade

    def __call__(self, image: np.ndarray, mask: np.ndarray, case: Any, spacing: Any = None) -> np.ndarray:
        return np.asarray(mask, dtype=bool)


class GoldMask:
    """The rasterised gold tree: an upper bound that checks the tracing and metrics chain."""

    needs_initial = False
    cache_version = "1"  # bump when a change of this code changes its masks: cached rows are then remade

    def __call__(self, image: np.ndarray, mask: np.ndarray | None, case: Any, spacing: Any = None) -> np.ndarray:
        return np.asarray(case.label(image.shape), dtype=bool)




def check_tree_root(tree_root: str) -> str:
    """``tree_root`` if it is one of :data:`TREE_ROOTS`, else an :class:`InputError` naming them."""
    if tree_root not in TREE_ROOTS:
        raise InputError(f"tree_root must be one of {', '.join(TREE_ROOTS)}, got {tree_root!r}")
    return tree_root


def case_root(case: Any, tree_root: str) -> tuple[float, float, float] | None:
    """The soma a refiner is told (ZYX voxels): the case's gold root for ``tree_root=gold`` (the root the
    root-seeded protocol gives APP2), None for ``largest`` (the largest piece is taken for the neuron)."""
    return gold_root_zyx(case.gold()) if check_tree_root(tree_root) == "gold" else None


class Classical:
    """:func:`neurorefiner.baselines.classical.classical_refine` with fixed parameters; ``tree_root`` as for
    :class:`NeuroRefiner` (the piece fragments are bridged to)."""

    needs_initial = True
    cache_version = "1"  # bump when a change of this code changes its masks: cached rows are then remade

    def __init__(self, tree_root: str = "largest", **params: Any) -> None:
        self.tree_root = check_tree_root(tree_root)
        self.params = params

    def __call__(self, image: np.ndarray, mask: np.ndarray, case: Any, spacing: Any = (1.0, 1.0, 1.0)) -> np.ndarray:
        from neurorefiner.baselines.classical import classical_refine

        return classical_refine(image, mask, spacing, **self.params, root=case_root(case, self.tree_root))


class NeuroRefiner:
    """The agent loop (Algorithm 1) with the configured roles and the editor, one volume per call: one
    :class:`neurorefiner.refine.run.RefineRun` built as ``refine.py`` builds it (one trace format), at each
    case's spacing (the dataset's known voxel size, recorded in the trace header).

    ``agent``: the ``agent`` config node (learned, heuristic, vlm, replay: any backend); ``loop``: :class:`LoopSettings`
    fields (``conf/loop/default.yaml``; ``roles`` and ``inspector_inputs`` are the Table 3 and Table 5
    switches); ``agent_overrides`` is merged onto ``agent`` (one registry entry per VLM in Table 4, e.g.
    ``{model: ...}``); ``editor``: the editor node (``conf/editor/``; built once, on the first edit, and kept
    for every volume), ``editor_overrides`` merged onto it (a registry entry that changes one decoding
    setting, e.g. ``{decoding: {max_radius: 3.0}}``). With ``trace_dir`` set each volume's decisions go to
    ``<trace_dir>/<case>.jsonl`` (written afresh each call). ``tree_root``: ``gold`` tells the agents the
    case's root (the soma, which the root-seeded protocol gives APP2 too), so the Inspector grows the piece
    there; ``largest``, the largest piece (what a run without a soma marker does).

    The run is built once, on the first volume, and kept: its roles (a learned judge read from file) and its
    editor serve every volume, each at its own spacing (:meth:`~neurorefiner.refine.run.RefineRun.with_spacing`).
    """

    needs_initial = True
    cache_version = "2"  # bump when a change of this code changes its masks: cached rows are then remade

    def __init__(self, agent: Any, loop: Any = None, editor: Any = None, t_max: int = 5,
                 agent_overrides: Any = None, trace_dir: str | None = None, editor_overrides: Any = None,
                 tree_root: str = "largest", policy: Any = None) -> None:
        from neurorefiner.refine.run import check_policy, loop_settings

        self.tree_root = check_tree_root(tree_root)
        self.policy = check_policy(_plain(policy) if policy is not None else None)
        self.agent_cfg = OmegaConf.to_container(OmegaConf.merge(_plain(agent), _plain(agent_overrides or {})),
                                                resolve=True)
        self.loop_cfg = _plain(loop or {})
        self.settings = loop_settings(t_max, self.loop_cfg)   # bad settings fail here, not per volume
        self.t_max = self.settings.t_max
        self.editor_cfg = OmegaConf.to_container(OmegaConf.merge(_plain(editor or {}), _plain(editor_overrides or {})),
                                                 resolve=True)
        self.trace_dir = trace_dir
        self.last_info: dict = {}
        self._run: Any = None

    @staticmethod
    def check_settings(node: DictConfig, prefix: str) -> None:
        """The loop settings of method ``node`` in range before any work (evaluate.py's entry calls it with
        ``prefix`` = ``method_registry.<name>.``): an :class:`InputError` naming the option."""
        from neurorefiner.refine.run import loop_settings

        loop_settings(node.get("t_max", 5), node.get("loop"), prefix)

    def run_for(self, spacing: Any) -> Any:
        """This method's :class:`~neurorefiner.refine.run.RefineRun` for one volume at ``spacing``: built on first
        use, then the same roles and editor with the roles' memory of earlier volumes cleared
        (:meth:`~neurorefiner.refine.run.RefineRun.afresh`), as when the run was built per volume."""
        if self._run is None:
            from neurorefiner.refine.run import RefineRun

            self._run = RefineRun.build(self.agent_cfg, self.loop_cfg, self.editor_cfg, self.t_max, policy=self.policy)
        return self._run.afresh().with_spacing(spacing, "the dataset's voxel size")

    def __call__(self, image: np.ndarray, mask: np.ndarray, case: Any, spacing: Any = (1.0, 1.0, 1.0)) -> np.ndarray:
        loop = self.run_for(spacing)
        m = np.asarray(mask, dtype=bool)
        t0 = time.perf_counter()
        if not m.any():
            self.last_info = {"edits_accepted": 0, "edits_rejected": 0, "edits_escalated": 0, "rounds": 0}
            return m
        path = None
        if self.trace_dir:
            path = Path(self.trace_dir) / f"{getattr(case, 'name', 'volume')}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
        root = case_root(case, self.tree_root)
        result = loop.run(image, m, path, {"case": getattr(case, "name", None)}, root=root)
        c = result.counts
        self.last_info = {"edits_accepted": c["accepted"], "edits_rejected": c["rejected"],
                          "edits_escalated": c["escalated"], "rounds": len(result.rounds),
                          "converged": bool(result.converged), "seconds_loop": round(time.perf_counter() - t0, 2),
                          **{f"seconds_{k}": v for k, v in result.seconds.items()}}
        if self.agent_cfg.get("model"):
            self.last_info["agent_model"] = self.agent_cfg["model"]
        return result.mask


def _plain(node: Any) -> dict:
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    return dict(node)


def method_node(cfg: DictConfig, name: str) -> DictConfig:
    """The config node of method ``name`` (resolved): ``cfg.method_registry.<name>``, else
    ``conf/method/<name>.yaml``; an unknown name is a clear error listing the known ones."""
    registry = cfg.get("method_registry") or {}
    if name in registry:
        node = OmegaConf.to_container(registry[name], resolve=True)
        _agent_with_overrides(cfg, registry[name], node)  # type: ignore[arg-type]
    else:
        path = conf_dir() / "method" / f"{name}.yaml"
        if not path.exists():
            known = sorted(set(registry) | {p.stem for p in (conf_dir() / "method").glob("*.yaml")})
            raise InputError(f"unknown method {name!r}; available: {', '.join(known)}")
        # resolved inside the run's config, so ${agent} and ${paths...} mean what they mean there
        holder = cfg.copy()
        OmegaConf.set_struct(holder, False)  # a composed run's config is in struct mode: no new keys otherwise
        holder = OmegaConf.merge(holder, {"_method_": OmegaConf.load(path)})
        node = OmegaConf.to_container(holder._method_, resolve=True)
        _agent_with_overrides(cfg, holder._method_, node)  # type: ignore[arg-type]
        node.pop("defaults", None)  # type: ignore[union-attr]  # composed by Hydra only; loop defaults: LoopSettings
    return OmegaConf.create(node)  # type: ignore[arg-type]


def _agent_with_overrides(cfg: DictConfig, raw: DictConfig, node: dict) -> None:
    """A method whose ``agent`` is the run's (``${agent}``) gets it resolved with ``agent_overrides`` merged
    in first, so an override reaches every key that refers to it: ``{model: OpenGVLab/InternVL3-8B}`` must
    change ``client.model`` (``${agent.model}``) too. Resolving the run's agent first made every Table 4 row
    ask the default model."""
    if OmegaConf.to_container(raw, resolve=False).get("agent") != "${agent}" or not node.get("agent_overrides"):
        return
    holder = cfg.copy()
    OmegaConf.set_struct(holder, False)
    holder.agent = OmegaConf.merge(holder.agent, node["agent_overrides"])
    node["agent"] = OmegaConf.to_container(holder.agent, resolve=True)


def method_class(node: DictConfig) -> Any:
    """The class (or function) a method node builds, without building it."""
    from hydra.utils import get_object

    try:
        return get_object(str(node.get("_target_")))
    except Exception:  # noqa: BLE001 - an unresolvable target fails clearly when the method is built
        return None


def needs_server(node: DictConfig) -> bool:
    """Whether a method's agents talk to a model server (its agent backend, after its overrides, is ``vlm``)."""
    agent = node.get("agent")
    if not agent:
        return False
    backend = (node.get("agent_overrides") or {}).get("backend", agent.get("backend"))
    return str(backend) == "vlm"


# settings added after rows were cached, at the value that does what the code did before they existed: left out of
# the key at that value, so a new switch that is off by default does not remake every cached row
UNKEYED_DEFAULTS: dict[tuple[str, ...], Any] = {("loop", "retry_declined"): True, ("policy",): None}


def _without_unkeyed_defaults(settings: Any) -> Any:
    for path, value in UNKEYED_DEFAULTS.items():
        parent = settings
        for part in path[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent and parent[path[-1]] == value:
            del parent[path[-1]]
    return settings


def method_key(node: DictConfig) -> str:
    """A short digest of a method's settings: rows are only reused for the same ones. Paths inside the checkout
    count from its root, so the same settings in another clone or worktree give the same key (the file's bytes
    enter the row key separately, through the checkpoints it names). A setting of :data:`UNKEYED_DEFAULTS` at its
    listed value is left out."""
    from neurorefiner.paths import project_root

    settings = _without_unkeyed_defaults(OmegaConf.to_container(node, resolve=True))
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(blob.replace(str(project_root()), "<checkout>").encode()).hexdigest()[:8]


def build_method(node: DictConfig, trace_dir: Path | None = None) -> Any:
    """Instantiate a method node (``_target_``); the loop's nested config stays a plain node."""
    from hydra.utils import instantiate

    kwargs: dict = {"_recursive_": False}
    if trace_dir is not None and "trace_dir" in node:
        kwargs["trace_dir"] = str(trace_dir)
    return instantiate(node, **kwargs)
