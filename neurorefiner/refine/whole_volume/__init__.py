"""The whole-volume engine (``refine.py executor=dask``): Algorithm 1 over tiles of a chunked volume, on Dask.

A tile is a box of the volume aligned to the loop's blocks and to the output's Zarr chunks. One task per tile
reads the tile and a halo around it from the OME-Zarr inputs, runs the same in-memory loop as ``executor=local``
(same agents, same editor) on that region, and writes the tile's interior, and only it, to the output store:
tiles never share a chunk, so no two workers write one chunk and no lock is needed. The driver records each
committed tile in the trace, so a killed run resumes from the tiles not yet committed.

Modules: :mod:`.tiles` (the plan), :mod:`.guard` (pieces that continue past a region's cut faces),
:mod:`.task` (one tile's work, what a worker runs), :mod:`.engine` (cluster, resume, progress, outputs).
"""
