"""Deterministic, topology-driven roles: run anywhere, no model, same answer every time."""

from neurorefiner.agents.heuristic.advisor import HeuristicAdvisor
from neurorefiner.agents.heuristic.inspector import HeuristicInspector
from neurorefiner.agents.heuristic.validator import HeuristicValidator

__all__ = ["HeuristicAdvisor", "HeuristicInspector", "HeuristicValidator"]
