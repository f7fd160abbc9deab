"""A correct mask made wrong in the two commonest ways at once, for timing runs: boxes cut out of the neurites
(breaks) and small cubes added away from them (specks). Not the training defects (:mod:`.breaks`, :mod:`.noise`
draw realistic ones with their instructions); this is the quick, reproducible damage the speed benchmarks refine
(``bench/cases/refine.py``, ``bench/cases/whole_volume.py``), kept in one place so both damage a mask alike."""

from __future__ import annotations

import numpy as np


def cut_and_speckle(label: np.ndarray, rng: np.random.Generator, breaks: int, specks: int,
                    half_break: tuple[int, int, int] = (2, 4, 4), half_speck: int = 1) -> np.ndarray:
    """``label`` (ZYX bool) with ``breaks`` boxes of half-sides ``half_break`` (z, y, x) cleared around random
    foreground voxels and ``specks`` cubes of half-side ``half_speck`` set at random places at least 2 voxels in
    from the border; a copy, ``label`` is untouched. The same ``rng`` state gives the same mask."""
    mask = np.asarray(label, dtype=bool).copy()
    fg = np.argwhere(mask)
    hz, hy, hx = half_break
    for z, y, x in fg[rng.choice(len(fg), size=min(breaks, len(fg)), replace=False)]:
        mask[max(z - hz, 0):z + hz + 1, max(y - hy, 0):y + hy + 1, max(x - hx, 0):x + hx + 1] = False
    h = half_speck
    for _ in range(specks):
        z, y, x = (int(rng.integers(2, s - 3)) for s in mask.shape)
        mask[z - h:z + h + 1, y - h:y + h + 1, x - h:x + h + 1] = True
    return mask
