"""The ``learned`` agent backend: candidates scored by a judge trained on gold (see ``roles``)."""

from neurorefiner.agents.learned.roles import ATTACHED, LearnedAdvisor, LearnedInspector, LearnedValidator

__all__ = ["ATTACHED", "LearnedAdvisor", "LearnedInspector", "LearnedValidator"]
