"""The Inspector's verdict per block, for ``neurorefiner inspect`` (no editing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurorefiner.agents.roles import GlobalView
from neurorefiner.topology.blocks import all_block_stats, grid_blocks, label_components, slices_to_list

CONF_AGENT = Path(__file__).resolve().parents[2] / "conf" / "agent"


def build_inspector(agent: str = "heuristic"):  # type: ignore[no-untyped-def]
    """The Inspector of ``conf/agent/<agent>.yaml``: the one of the run ``refine.py`` would build (its config
    composed through Hydra, the run built by :class:`~neurorefiner.refine.run.RefineRun`)."""
    from hydra import compose, initialize_config_dir

    from neurorefiner.refine.run import RefineRun

    conf = CONF_AGENT.parent
    with initialize_config_dir(version_base="1.3", config_dir=str(conf)):
        cfg = compose(config_name="refine", overrides=["image=_", "mask=_", f"agent={agent}",
                                                       "paths.output_dir=_"])
    return RefineRun.from_config(cfg).agents.inspector


def inspect_volume(image: np.ndarray, mask: np.ndarray, spacing=(1.0, 1.0, 1.0), block_size: int = 128,
                   agent: str = "heuristic") -> list[dict]:
    """One row per block: id, extent, Betti-0, verdict (FN / FP / None) and the defects found."""
    blocks = grid_blocks(mask.shape, block_size)
    inspector = build_inspector(agent)
    inspection = inspector.inspect(GlobalView(0, image, mask, blocks, tuple(spacing)))
    labels, _ = label_components(mask)
    rows = []
    for st in all_block_stats(mask, blocks, labels):
        flag = inspection.flags.get(st.block.id)
        rows.append({"block": st.block.id, "extent": slices_to_list(st.block.slices), "betti0": st.betti0,
                     "foreground": st.foreground, "verdict": None if flag is None else flag.kind,
                     "defects": [] if flag is None else [d.as_dict() for d in flag.defects]})
    return rows
