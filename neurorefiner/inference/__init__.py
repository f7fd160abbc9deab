"""Using trained networks: checkpoint I/O (``weights_only``), sliding-window segmentation, the editor
:class:`~neurorefiner.inference.refiner.TopoRefiner` with its topology-aware decoding, and the initial
masks that refinement starts from."""
