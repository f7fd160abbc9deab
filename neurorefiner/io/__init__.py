"""Reading and writing stacks (TIFF, Vaa3D, Zarr, npy) and SWC trees, with voxel spacing kept."""

from neurorefiner.io.stacks import check_same_shape, read_mask, read_volume, write_volume
from neurorefiner.io.swc import Tree, read_swc, write_swc
from neurorefiner.io.volume import Volume

__all__ = ["Tree", "Volume", "check_same_shape", "read_mask", "read_swc", "read_volume", "write_swc",
           "write_volume"]
