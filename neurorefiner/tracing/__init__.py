"""Neuron reconstruction from masks and images: APP2 (all-path pruning 2).

Call ``neurorefiner.tracing.app2.app2(...)`` (the submodule keeps its name so that Hydra targets and
``from neurorefiner.tracing.app2 import app2`` both resolve) or the ``trace_mask`` shortcut.
"""

from neurorefiner.tracing import app2
from neurorefiner.tracing.app2 import trace_mask

__all__ = ["app2", "trace_mask"]
