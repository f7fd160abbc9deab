"""A refiner folder's plans file (``plans.json``): the decision policy its ``choose`` step picked on validation.

Why a file beside the checkpoints, not numbers in ``conf/refiner/*.yaml``: every decision setting of a refiner
(the judge's threshold per kind, the reach, the gates, T_max, which editor, or the classical refiner instead of
the agents) is chosen by a command on the dataset's validation data by the tables' own score, as nnU-Net writes
its post-processing choice beside its model (:mod:`neurorefiner.adaptation.choose`). The config only names the
folder; it reads the plan through the ``${plan:<folder>,<key>}`` resolver registered here, so a value given on
the command line (``t_max=1``, ``agent.inspector.reach_um=8``) still wins over the plan's.

A leaf module (JSON and OmegaConf only): conf resolution, the refine run and the choose step all read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError

PLANS = "plans.json"
FORMAT = 1
POLICY_KINDS = ("agents", "classical", "initial")
"""``agents``: Algorithm 1 with the plan's settings; ``classical``: the classical refiner (drop specks, bridge to
the root's piece) with the plan's two settings, and with a ``join_veto`` its bridges judged by the folder's judge
(:mod:`neurorefiner.agents.learned.join_veto`); ``initial``: the mask is left as it is (nothing helped on val)."""

MAKE = "neurorefiner adapt --dataset NAME --out {folder}   (or: neurorefiner choose --dataset NAME --refiner {folder})"

#: defaults of an ``agents`` plan's keys that a plan may leave out (the learned backend's own defaults)
AGENT_DEFAULTS: dict[str, Any] = {
    "t_max": 5,
    "judge": None,             # None: checkpoints/judge.json; else a file name inside the refiner folder
    "editor": None,            # None: the shipped checkpoints/toporefinenet.ckpt; else a file inside the folder
    "max_brightness": 0.3,
    "reach_um": 8.0,
    "thresholds": {},
    "join_signal_min": 0.25,
    "join_max_crowding": 4.0,
    "join_piece_min_signal": 0.6,
    "prune": True,
    "chain_joins": False,
}


def plans_path(folder: str | Path) -> Path:
    return Path(folder) / PLANS


#: what a refiner folder holds (any one of them tells it from an empty or mistaken folder)
REFINER_FILES = ("editor.ckpt", "judge.json", PLANS, "adapt.json")


def check_refiner_folder(folder: str | Path | None, need_plan: bool = True) -> Path:
    """``folder`` as a refiner folder (with a plans file unless ``need_plan`` is false), or an :class:`InputError`
    naming it and the command that makes one: unset (Hydra's ``???``), missing, empty or mistaken (it used to be
    reported as a missing editor.ckpt), or made before plans existed."""
    if folder is None or str(folder) in ("", "???"):
        raise InputError("refiner=adapted needs refiner_dir=<folder>, a folder made by "
                         f"`{MAKE.format(folder='FOLDER')}` (e.g. refiner_dir=my_refiner)")
    path = Path(str(folder)).expanduser()
    if not path.is_dir() or not any((path / name).exists() for name in REFINER_FILES):
        what = "no such folder" if not path.exists() else (
            "not a folder" if not path.is_dir() else f"none of {', '.join(REFINER_FILES)} in it")
        raise InputError(f"refiner_dir= is not a refiner folder ({what}); make one with "
                         f"`{MAKE.format(folder=folder)}`", path)
    if need_plan and not plans_path(path).is_file():
        raise InputError(f"not a refiner folder with a chosen policy (no {PLANS} in it); its plan is made by: "
                         f"{MAKE.format(folder=folder)}", path)
    return path


def check_refiner_config(cfg: Any) -> None:
    """The run's refiner before anything resolves it (``refine.py``, ``evaluate.py``): ``refiner_dir`` set, a
    refiner folder, and, for a refiner that reads its plan (``refiner=adapted``, a chosen preset), one with
    ``plans.json``: one line naming the folder and the command, not omegaconf's traceback from inside resolution."""
    from omegaconf import OmegaConf

    if "refiner_dir" not in cfg.keys():   # (``in cfg`` is false for a value left at ``???``)
        return
    if OmegaConf.is_missing(cfg, "refiner_dir"):
        check_refiner_folder(None)
    check_refiner_folder(cfg.refiner_dir, need_plan="policy" in cfg.keys())


def read_plan(folder: str | Path) -> dict[str, Any]:
    """The plan of refiner ``folder`` with every key an ``agents`` plan may leave out filled in; paths of the
    folder's own files (``judge``, ``editor``) made absolute."""
    path = check_refiner_folder(folder)
    try:
        data = json.loads(plans_path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the plans file ({exc}); make it again with {MAKE.format(folder=folder)}",
                         plans_path(path)) from None
    if data.get("format") != FORMAT or data.get("policy", {}).get("kind") not in POLICY_KINDS:
        raise InputError(f"not a plans file of format {FORMAT} with a policy kind in {POLICY_KINDS}",
                         plans_path(path))
    policy = {**AGENT_DEFAULTS, **data["policy"]}
    for key in ("judge", "editor"):
        if policy.get(key):
            policy[key] = str((path / policy[key]).resolve())
    return policy


def plan_value(folder: str, key: str) -> Any:
    """The resolver ``${plan:<folder>,<key>}``: one key of the folder's plan (``policy``: the kind and, for
    ``classical``, its settings, as the refine run takes them)."""
    from omegaconf import OmegaConf

    policy = read_plan(folder)
    if key == "policy":
        keys = ("kind", "min_size", "max_gap") + (("join_veto", "judge") if policy.get("join_veto") is not None
                                                   else ())
        return OmegaConf.create({k: v for k, v in policy.items() if k in keys})
    if key not in policy:
        raise InputError(f"the plan has no key {key!r} (keys: {', '.join(sorted(policy))})", plans_path(folder))
    value = policy[key]
    return OmegaConf.create(dict(value)) if isinstance(value, Mapping) else value


def register_plan_resolver() -> None:
    """Register ``${plan:...}`` with OmegaConf once (the entry points and any test that composes the config)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("plan"):
        OmegaConf.register_new_resolver("plan", plan_value)


def write_plan(folder: str | Path, policy: Mapping[str, Any], record: Mapping[str, Any]) -> Path:
    """Write ``<folder>/plans.json`` (atomically): the chosen ``policy`` and ``record`` (dataset, validation
    table, commit)."""
    from neurorefiner.io.atomic import write_text_atomic

    if policy.get("kind") not in POLICY_KINDS:
        raise ValueError(f"policy kind must be one of {POLICY_KINDS}, got {policy.get('kind')!r}")
    path = plans_path(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({"format": FORMAT, "policy": dict(policy), **dict(record)}, indent=1) + "\n")
    return path
