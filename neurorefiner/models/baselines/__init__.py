"""Networks of the learned 3D refinement baselines (SegFix-, SegRefiner- and Mask Transfiner-style), written here
from the papers' ideas, plus the pure functions each needs around its network (training targets, the discrete
diffusion schedule, the octree of uncertain voxels). Plain ``nn.Module``s with explicit arguments; training lives in
:mod:`neurorefiner.training.refinement_baselines`, whole-volume use in
:mod:`neurorefiner.inference.refinement_baselines`.
"""
