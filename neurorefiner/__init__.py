"""neurorefiner: morphology-aware multi-agent refinement of 3D neuron segmentations."""

__version__ = "0.1.0"
