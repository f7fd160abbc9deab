"""The refine stage: one run of the agents' loop (:mod:`neurorefiner.agents`) on a user's volume, from config.

:class:`~neurorefiner.refine.run.RefineRun` is built once per run (roles, editor, loop settings, the voxel size
and where it came from) and is what every way in uses: ``refine.py`` (:mod:`.entry`, :mod:`.local`: one volume in
memory, TIFF out), the Dask run over OME-Zarr (:mod:`.whole_volume`), the evaluation method, ``neurorefiner
inspect`` (:mod:`.inspect`). Beside it: the output folder's lock (:mod:`.output_lock`) and the run's
``report.html`` (:mod:`.report`). Sits above ``agents`` (roles, backends, the loop) and below ``evaluation``.
"""

from neurorefiner.refine.run import RefineRun

__all__ = ["RefineRun"]
