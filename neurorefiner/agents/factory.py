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
        if extra:  # passed to the built partial: Hydra would read a dataclass (a Judge) as config, not pass it on
            roles[role] = instantiate(agent_cfg[role], _partial_=True, **kwargs)(**extra)
        else:
            roles[role] = instantiate(agent_cfg[role], **kwargs)
    fallback = agent_cfg.get("fallback")
    if fallback:
        if fallback != "heuristic":
            raise ValueError(f"agent.fallback must be null or 'heuristic', got {fallback!r}")
        from neurorefiner.agents.fallback import WithFallback

        roles = {r: WithFallback(roles[r], _heuristic(r)) for r in ROLES}
    secrets = [client.secret] if client is not None and client.secret else []
    description = redact(OmegaConf.to_container(agent_cfg, resolve=True))
    return Agents(**roles), secrets, description
