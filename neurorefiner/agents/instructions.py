"""The instruction grammar as the agents see it.

The grammar itself lives in :mod:`neurorefiner.topology.instructions`, beside the position words it is
built from, so that the lower layers (defects, data, models) can use it without importing from the
agents' layer above them. This module is the agents' name for it; both names give the same objects.
"""

from neurorefiner.topology.instructions import (  # noqa: F401 - re-exported
    GRAMMAR,
    OPS,
    Instruction,
    InstructionParseError,
    all_instructions,
    parse_instruction,
)

__all__ = ["GRAMMAR", "OPS", "Instruction", "InstructionParseError", "all_instructions", "parse_instruction"]
