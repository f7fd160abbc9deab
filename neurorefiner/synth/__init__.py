"""Synthetic fluorescence neuron stacks with exact ground truth, and the benchmark presets that stand
in for the paper's BigNeuron, CWMBS and ZBFWB (always labelled synthetic).

``render_volume(preset_or_params, seed)`` renders one stack in memory; ``get_dataset("tiny")`` (and
the other presets) gives cached train/val/test cases on disk.
"""

from neurorefiner.synth.params import GENERATOR_VERSION, SynthParams

# ``render`` (the function) is not re-exported: it would shadow the submodule of the same name, so that
# ``import neurorefiner.synth.render as R`` gave the function; use ``neurorefiner.synth.render.render``.
from neurorefiner.synth.render import Rendering, render_volume

__all__ = ["GENERATOR_VERSION", "Rendering", "SynthParams", "render_volume"]
