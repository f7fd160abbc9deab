"""``neurorefiner make ...``: the maintainers' steps that make a shipped artifact, or a file one is made from,
outside ``train.py``: a segmenter's post-processing chosen on validation and recorded in its checkpoint
(``postprocess``), a segmenter checkpoint's card (``segmenter-card``, ``standin-card``), the judge's mined
candidates that ``neurorefiner train-judge --table`` fits (``judge-candidates``), the tables of README.md and
docs/results.md (``doc-tables``), the segmenter tables (``segmenter-rows``: the scoring protocol applied to each
segmenter's masks and the naive floor; ``segmenter-summary``: one table of every segmenter per dataset) and a
per-stack table from the rows ``evaluate.py`` keeps (``rows-table``). Unlike ``neurorefiner study`` (measurements
that only read), each command here writes what ships; its code lives in the package stage it belongs to
(adaptation/, training/, evaluation/).

Each module here has a ``register(app)`` that adds its command(s), found by its place in this folder."""

from __future__ import annotations

from neurorefiner.cli.common import command_group, command_modules

COMMANDS: tuple[str, ...] = command_modules(__path__)

app = command_group(__name__, COMMANDS, "Maintainers' steps that make a shipped artifact (a segmenter's "
                                        "post-processing, checkpoint cards, the judge's mined candidates, the "
                                        "segmenter tables, the docs' tables).")
