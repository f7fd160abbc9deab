"""Synthetic segmentation defects and the instruction each implies (TopoRefineNet stage 1).

FN: :func:`make_break` cuts a neurite (local erosion with a kernel k in [5, 20]); FP:
:func:`paste_annotation` copies another neuron's annotation into a local region and
:func:`add_noise_blobs` adds Gaussian blobs; :func:`paste_touching_fibre` pastes a fibre merged into
the neuron at one end (attached false structure, off unless its probability is set). Each returns a
:class:`Defect` (defective mask, target mask, :class:`~neurorefiner.topology.instructions.Instruction`)
or None when the block offers no place for that defect. :func:`make_defect` draws one of them.
"""

from neurorefiner.defects.breaks import Defect, cut_break, make_break
from neurorefiner.defects.describe import betti0, describe_change
from neurorefiner.defects.generate import DEFECT_KINDS, make_defect
from neurorefiner.defects.noise import add_noise_blobs, paste_annotation
from neurorefiner.defects.touch import paste_touching_fibre

__all__ = ["DEFECT_KINDS", "Defect", "add_noise_blobs", "betti0", "cut_break", "describe_change",
           "make_break", "make_defect", "paste_annotation", "paste_touching_fibre"]
