"""Build the three roles from the ``agent`` config node (Hydra ``_target_``), with the optional
fallback and a secret-free description for the trace."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neurorefiner.agents.loop import Agents
from neurorefiner.agents.trace import redact

ROLES = ("inspector", "advisor", "validator")


def _heuristic(role: str) -> Any:
    from neurorefiner.agents import heuristic

    return {"inspector": heuristic.HeuristicInspector, "advisor": heuristic.HeuristicAdvisor,
            "validator": heuristic.HeuristicValidator}[role]()


def _learned(role: str) -> Any:
    from neurorefiner.agents import learned

    return {"inspector": learned.LearnedInspector, "advisor": learned.LearnedAdvisor,
            "validator": learned.LearnedValidator}[role]


def role_node(role: str, node: Any, passed: set[str]) -> Any:
    """``node`` (one role's config) checked against its target's arguments before Hydra builds it, so a wrong key
    is one line naming it, not a traceback from inside Hydra. Keys only the learned role takes (a refiner preset's
    judge and join reach, made for the learned agents) are dropped with a warning when another role is chosen:
    ``refiner=<preset> agent=heuristic`` then runs the preset's editor with the heuristic agents. ``passed``:
    arguments given besides the config (the client, objects)."""
    import inspect
    import logging

    from hydra.utils import get_object
    from omegaconf import OmegaConf

    from neurorefiner.errors import InputError

    target = get_object(str(node.get("_target_")))
    params = inspect.signature(target).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return node
    unknown = [k for k in node if k != "_target_" and k not in params and k not in passed]
    if not unknown:
        return node
    learned = inspect.signature(_learned(role)).parameters
    foreign = [k for k in unknown if k in learned]
    wrong = [k for k in unknown if k not in learned]
    if wrong:
        raise InputError(f"agent.{role}: {target.__name__} takes no {', '.join(wrong)} (it takes "
                         f"{', '.join(k for k in params if k != 'self')})")
    logging.getLogger(__name__).warning("agent.%s: %s: settings of the learned %s, not of %s; ignored",
                                        role, ", ".join(foreign), role, target.__name__)
    return OmegaConf.masked_copy(node, [k for k in node if k not in foreign])


def build_agents(agent_cfg: Any, role_kwargs: Mapping[str, Mapping[str, Any]] | None = None
                 ) -> tuple[Agents, list[str], dict]:
    """(roles, secrets to keep out of the trace, description of the config without secrets). ``role_kwargs``:
    per role, objects a config cannot hold that override its keys (a judge trained in the same process)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    client = instantiate(agent_cfg.client) if agent_cfg.get("client") is not None else None
    roles = {}
    for role in ROLES:
        kwargs = {"client": client} if client is not None else {}
        extra = dict((role_kwargs or {}).get(role, {}))
        node = role_node(role, agent_cfg[role], set(kwargs) | set(extra))
        if extra:  # passed to the built partial: Hydra would read a dataclass (a Judge) as config, not pass it on
            roles[role] = instantiate(node, _partial_=True, **kwargs)(**extra)
        else:
            roles[role] = instantiate(node, **kwargs)
    fallback = agent_cfg.get("fallback")
    if fallback:
        if fallback != "heuristic":
            raise ValueError(f"agent.fallback must be null or 'heuristic', got {fallback!r}")
        from neurorefiner.agents.fallback import WithFallback

        roles = {r: WithFallback(roles[r], _heuristic(r)) for r in ROLES}
    secrets = [client.secret] if client is not None and client.secret else []
    description = redact(OmegaConf.to_container(agent_cfg, resolve=True))
    return Agents(**roles), secrets, description
