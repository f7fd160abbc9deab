"""The agents (inspector, advisor, validator) and the instruction grammar they share with TopoRefineNet.

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

__all__ = ["GRAMMAR", "Instruction", "InstructionParseError", "all_instructions", "parse_instruction"]
