"""The agents (inspector, advisor, validator) and the instruction grammar they share with TopoRefineNet.

Kept free of heavy imports: lower layers (defects, data) import the grammar through this package.
"""

from neurorefiner.agents.instructions import (
    GRAMMAR,
    Instruction,
    InstructionParseError,
    all_instructions,
    parse_instruction,
)

__all__ = ["GRAMMAR", "Instruction", "InstructionParseError", "all_instructions", "parse_instruction"]
