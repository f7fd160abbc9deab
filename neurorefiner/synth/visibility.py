"""How visible is each labelled segment? Local contrast-to-noise along the gold path, after the PSF.

One figure, two uses:

* :func:`segment_visibility` measures it on any stack with a gold tree (synthetic or real, e.g. DIADEM
  OP_1-OP_6): the local SNR profile of :func:`neurorefiner.synth.measure.snr_along_tree` (lightly denoised
  intensity at the centreline minus the mean of the background box around it, over that box's sd),
  summarised per segment (between branch points and tips) by its median.
* :func:`floor_intensities` is what the renderer applies *before* the camera: every node of the target
  whose peak (after the PSF) is below ``floor`` x the local background sd (texture, distractors and the
  camera noise that background will get) is brightened to it. Segments below the floor are **brightened,
  never dropped from the label**: dropping would cut the gold tree into pieces (the tracing metrics and the
  refinement loop assume one connected neuron) and would delete the weak-signal stretches the presets
  exist to show; brightened, a weak stretch stays faint but supported by the pixels.

The renderer's floor is on raw voxel noise; the measure denoises lightly first (what a segmenter
effectively sees), so measured figures sit above the floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.io.swc import Tree
from neurorefiner.synth.measure import Spacing, near_label, snr_along_tree

WINDOW_UM = 8.0  # side of the background box, as snr_along_tree
VISIBLE = 2.0  # CNR below this: a segmenter sees noise (the realism report's weak threshold)


def window_size(spacing: Spacing, window_um: float = WINDOW_UM) -> tuple[int, int, int]:
    """Box (z, y, x voxels, odd) of ``window_um`` per side, at least 3 slices."""
    sz, _, sx = spacing
    xy = int(round(window_um / sx)) | 1
    return max(3, int(round(window_um / sz)) | 1), xy, xy


def local_background_at(points: np.ndarray, background: np.ndarray, exclude: np.ndarray, spacing: Spacing,
                        window_um: float = WINDOW_UM) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sd of ``background`` over the voxels of a box around each point (z, y, x voxel coordinates)
    that are not in ``exclude``. Boxes with no such voxel fall back to the whole box."""
    size = window_size(spacing, window_um)
    shape = np.asarray(background.shape)
    idx = np.clip(np.rint(np.asarray(points, dtype=np.float64)).astype(np.int64), 0, shape - 1)
    w = (~exclude).astype(np.float32)
    img = background.astype(np.float32)
    cnt = ndi.uniform_filter(w, size)
    s1 = ndi.uniform_filter(img * w, size)
    s2 = ndi.uniform_filter(img * img * w, size)
    z, y, x = idx.T
    c = cnt[z, y, x].astype(np.float64)
    a, b = s1[z, y, x].astype(np.float64), s2[z, y, x].astype(np.float64)
    del cnt, s1, s2
    empty = c < 1e-6
    if empty.any():
        m_all = ndi.uniform_filter(img, size)[z, y, x].astype(np.float64)
        q_all = ndi.uniform_filter(img * img, size)[z, y, x].astype(np.float64)
        a, b, c = np.where(empty, m_all, a), np.where(empty, q_all, b), np.where(empty, 1.0, c)
    mean = a / c
    sd = np.sqrt(np.maximum(b / c - mean * mean, 0.0))
    return mean, sd


def floor_intensities(peak: np.ndarray, points: np.ndarray, background: np.ndarray, label: np.ndarray,
                      spacing: Spacing, floor: float, read_noise: float, window_um: float = WINDOW_UM
                      ) -> tuple[np.ndarray, dict[str, float]]:
    """Raise the target's per-node peak photons (after the PSF) to at least ``floor`` x the local noise.

    ``background`` is everything but the target, in photons, before the camera (distractors through the
    PSF plus the tissue). The local noise is the sd of that background in the box around the node (outside
    the grown label) combined with the camera noise it will get there (Poisson: variance = mean photons,
    plus ``read_noise`` squared). Returns the new peaks and what was done (share of nodes raised, median
    contrast before and after).
    """
    peak = np.asarray(peak, dtype=np.float64)
    if floor <= 0 or len(peak) == 0:
        return peak, {"visibility_floor": float(floor), "raised_fraction": 0.0}
    mean, sd = local_background_at(points, background, near_label(label, spacing), spacing, window_um)
    noise = np.sqrt(sd * sd + np.maximum(mean, 0.0) + float(read_noise) ** 2)
    need = floor * noise
    raised = peak < need
    before = peak / np.maximum(noise, 1e-6)
    out = np.maximum(peak, need)
    return out, {"visibility_floor": float(floor), "raised_fraction": round(float(raised.mean()), 4),
                 "cnr_median_before": round(float(np.median(before)), 3),
                 "cnr_median_after": round(float(np.median(out / np.maximum(noise, 1e-6))), 3)}


@dataclass
class SegmentVisibility:
    cnr: np.ndarray  # median local CNR of each segment
    length_um: np.ndarray  # its length
    node_cnr: np.ndarray  # the per-node profile (one node per x voxel)

    def summary(self, visible: float = VISIBLE) -> dict[str, float]:
        """Length-weighted figures: median segment CNR, 10th percentile, share of labelled length below
        ``visible``."""
        if len(self.cnr) == 0:
            return {"segments": 0, "cnr_median": float("nan"), "cnr_p10": float("nan"),
                    "invisible_length_fraction": float("nan")}
        total = float(self.length_um.sum()) or 1.0
        return {"segments": int(len(self.cnr)), "cnr_median": float(np.median(self.cnr)),
                "cnr_p10": float(np.percentile(self.cnr, 10)),
                "invisible_length_fraction": float(self.length_um[self.cnr < visible].sum() / total)}


def segment_ids(tree: Tree) -> np.ndarray:
    """For each node of a reindexed tree (parents first), the id of its segment: the run of nodes between
    branch points and tips it belongs to (the edge to its parent belongs to the child's segment)."""
    pi = tree.parent_index
    nch = tree.n_children()
    seg = np.arange(len(tree))
    for i in range(len(tree)):
        p = pi[i]
        if p >= 0 and nch[p] == 1 and pi[p] >= 0:
            seg[i] = seg[p]
    return seg


def segment_visibility(image: np.ndarray, label: np.ndarray, tree: Tree, spacing: Spacing,
                       window_um: float = WINDOW_UM) -> SegmentVisibility:
    """Per-segment median local CNR of the gold path on the final image (any stack with a gold tree)."""
    prof = snr_along_tree(image, label, tree, spacing, window_um=window_um)
    t = prof.tree
    if len(t) == 0:
        return SegmentVisibility(np.zeros(0), np.zeros(0), np.zeros(0))
    seg = segment_ids(t)
    pi = t.parent_index
    pos = t.physical_zyx(spacing)
    edge = np.zeros(len(t))
    has = pi >= 0
    edge[has] = np.linalg.norm(pos[has] - pos[pi[has]], axis=1)
    ids = np.unique(seg)
    cnr = np.array([float(np.median(prof.snr[seg == s])) for s in ids])
    length = np.array([float(edge[seg == s].sum()) for s in ids])
    return SegmentVisibility(cnr, length, prof.snr)
