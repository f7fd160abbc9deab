"""The agents (inspector, advisor, validator), the loop that runs them (Algorithm 1), and the instruction
grammar they share with TopoRefineNet.

The roles are interfaces (:mod:`neurorefiner.agents.roles`) with ``learned`` (the default), ``heuristic``, ``vlm``
and ``replay`` implementations chosen by ``conf/agent/``; :mod:`neurorefiner.agents.loop` knows only the interfaces.
The grammar lives in ``neurorefiner.topology.instructions`` (lower layers use it from there);
``neurorefiner.agents.instructions`` re-exports it under the agents' name.
"""

from neurorefiner.agents.instructions import (
    GRAMMAR,
    Instruction,
    InstructionParseError,
    all_instructions,
    parse_instruction,
)
from neurorefiner.agents.roles import Advisor, Editor, Inspector, Validator

__all__ = ["GRAMMAR", "Advisor", "Editor", "Inspector", "Instruction", "InstructionParseError", "Validator",
           "all_instructions", "parse_instruction"]
