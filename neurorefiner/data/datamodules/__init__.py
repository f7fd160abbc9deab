"""LightningDataModules: segmenter training, TopoRefineNet stage 1 (synthetic defects) and stage 2
(defects mined from segmenters' masks)."""
