"""Networks (TopoRefineNet, baseline segmenters) and their LightningModules."""
