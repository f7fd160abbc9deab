"""Studies: one-off measurements behind the experiments/ tables (editor probes, realism, visibility, segmenter
tables, cross-validation). They sit above the evaluation protocol (they may use its tables and runner, never
the other way round), so ``neurorefiner.evaluation`` stays the protocol a newcomer reads first. Their commands
are under ``neurorefiner study ...`` (``neurorefiner.cli.study``)."""
