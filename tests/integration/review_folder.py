"""A refine output folder written by the demo's own refine config (``cli.demo.refine_cfg`` ->
``refine.local.refine_volume``) on the synthetic tubes, with a scripted editor that mends breaks and leaves
specks alone: the Validator accepts the joins and rejects every removal, so the folder holds accepted
edits, rejected tries and escalated defects, like the demo's, in a second instead of minutes. Shared by
the review tests with and without Qt."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.topology.instructions import parse_instruction

EDITOR = ["agent=heuristic", "editor._target_=tests.integration.review_folder.joins_only_editor", "loop.block_size=64",
          "progress=false", "report=true", "t_max=2"]


def joins_only_editor(**_: object):  # type: ignore[no-untyped-def]
    """Connects through bright voxels; a removal changes nothing (so the Validator rejects it)."""

    class JoinsOnly:
        def edit(self, image_block, mask_block, instruction):  # type: ignore[no-untyped-def]
            ins = parse_instruction(instruction)
            out = np.asarray(mask_block, bool).copy()
            if ins.op != "remove":
                out[ins.region(out.shape) & (image_block > 0.5)] = True
            return out

    return JoinsOnly()


def make_run_folder(tmp: Path, n_blocks: int = 2) -> Path:
    """Inputs under ``tmp/inputs``, the run's folder ``tmp/run`` (returned)."""
    from neurorefiner.cli.demo import refine_cfg
    from neurorefiner.io import read_mask, read_volume
    from neurorefiner.refine.local import refine_volume
    from tests.integration.test_refine_loop import synthetic

    inputs, out = tmp / "inputs", tmp / "run"
    inputs.mkdir(parents=True)
    image, mask = synthetic(inputs, n_blocks=n_blocks)
    refine_volume(read_volume(image), read_mask(mask), refine_cfg(image, mask, out, (1.0, 0.5, 0.5), extra=EDITOR))
    return out
