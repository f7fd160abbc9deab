"""What the learned Inspector makes of the joins at the soma's piece of one SYNTHETIC zbfwb stack's initial mask
(``neurorefiner study soma-joins CASE SPLIT``; experiments/soma_piece_check/): why a tree stays at its soma.

Takes the U-Net's initial mask as the evaluation does (cached, remade when the stack differs) and lists the soma's
piece, each join candidate from it (judge probability, whether the judge and the gates pass it, the piece check's
reading) and how far the largest pieces lie from it.
The preset's Inspector settings (conf/refiner/synthetic_zbfwb.yaml).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from neurorefiner.agents.candidates import find_candidates
from neurorefiner.agents.learned.judge import CropView
from neurorefiner.agents.learned.roles import LearnedInspector
from neurorefiner.data.registry import get_dataset
from neurorefiner.evaluation.initial_masks import initial_mask
from neurorefiner.paths import project_root
from neurorefiner.topology.components import label_components
from neurorefiner.topology.tree_root import nearest_foreground
from neurorefiner.tracing.seeding import gold_root_zyx


def soma_joins(case_name: str, split: str) -> list[str]:
    """The probe's lines for ``case_name`` of ``split``."""
    root_dir = project_root()
    case = next(c for c in get_dataset("synthetic_zbfwb").cases(split) if c.name == case_name)
    vol = case.image()
    image, spacing = vol.normalized(), tuple(vol.spacing)
    mask = initial_mask("synthetic_zbfwb", "unet3d", split, only=[case_name])(case, image) > 0
    root = gold_root_zyx(case.gold())
    labels, n = label_components(mask)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    seed = tuple(int(v) for v in nearest_foreground(mask, root, spacing))
    main_piece = labels[seed]
    lines = [f"{case_name}: {n} pieces, the soma's piece {sizes[main_piece]} voxels (seed {seed}), "
             f"largest {sizes.max()}"]
    inspector = LearnedInspector(judge=root_dir / "checkpoints/judge_synthetic_zbfwb.json", reach_um=16.0,
                                 join_signal_min=-1.0)
    found = find_candidates(image, mask, spacing, inspector.settings, ("join",), root)
    view = CropView(image, mask, spacing, found.levels) if inspector.judge.uses_crops else None
    p, passed = inspector.judge.decide(found.candidates, view)
    for c, pc, ok in sorted(zip(found.candidates, p, passed), key=lambda t: -t[1]):
        f = c.features
        lines.append(f"join p={pc:.3f} judge={bool(ok)} gates={inspector.gate(c)} gap={f['gap_um']:.2f} um "
              f"far piece {sizes[c.pieces[0]]} voxels, signal {f['small_signal_p50']:.2f} vs tree "
              f"{f['big_signal_p50']:.2f} (piece check applies: {inspector.piece.applies(c)})")
    tree = cKDTree(np.argwhere(labels == main_piece) * spacing)
    for q in [int(q) for q in np.argsort(-sizes)[:8] if sizes[q] and q != main_piece]:
        d, _ = tree.query(np.argwhere(labels == q)[::7] * spacing)
        lines.append(f"piece of {sizes[q]} voxels: {d.min():.1f} um from the soma's piece")
    return lines

