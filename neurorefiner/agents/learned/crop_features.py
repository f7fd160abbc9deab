"""Richer features read off a candidate's crop (:mod:`neurorefiner.agents.learned.crops`), for a tree model
beside the hand features: how bright the edit's own voxels are against the crop's unmasked background and its
noise (a local signal-to-noise ratio, comparable across microscopes), how much of the crop the mask and the
edit fill, and how much bright structure lies unsegmented around it (other fibres nearby: the crowded places
where a join is a false merge)."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.learned.crops import IMAGE_RANGE

CROP_FEATURES = ("edit_mean", "edit_q25", "edit_max", "mask_mean", "bg_mean", "bg_sd", "edit_snr", "mask_snr",
                 "mask_share", "edit_share", "bright_unmasked_share", "centre_mask_share", "centre_bright_share",
                 "edit_dark_share")


def crop_features(crops: np.ndarray) -> np.ndarray:
    """(N, len(CROP_FEATURES)) from uint8 crops (N, 3, D, H, W)."""
    n = len(crops)
    out = np.zeros((n, len(CROP_FEATURES)), np.float64)
    if not n:
        return out
    lo, hi = IMAGE_RANGE
    img = crops[:, 0].reshape(n, -1).astype(np.float32) / 255.0 * (hi - lo) + lo
    mask = crops[:, 1].reshape(n, -1) >= 128
    edit = crops[:, 2].reshape(n, -1) >= 64
    d, h, w = crops.shape[2:]
    centre = np.zeros((d, h, w), bool)
    centre[d // 4: d - d // 4, h // 4: h - h // 4, w // 4: w - w // 4] = True
    centre = centre.ravel()
    for i in range(n):
        im, m, e = img[i], mask[i], edit[i]
        bg = im[~m & ~e]
        bg_mean = float(np.median(bg)) if len(bg) else 0.0
        bg_sd = float(1.4826 * np.median(np.abs(bg - bg_mean))) if len(bg) else 1.0
        bg_sd = max(bg_sd, 0.02)
        ev = im[e] if e.any() else np.array([bg_mean])
        mv = im[m] if m.any() else np.array([bg_mean])
        bright = (im > 0.5) & ~m & ~e
        out[i] = (float(ev.mean()), float(np.percentile(ev, 25)), float(ev.max()), float(mv.mean()), bg_mean, bg_sd,
                  (float(np.percentile(ev, 25)) - bg_mean) / bg_sd, (float(mv.mean()) - bg_mean) / bg_sd,
                  float(m.mean()), float(e.mean()), float(bright.mean()), float(m[centre].mean()),
                  float(bright[centre].mean()), float((ev < 0.25).mean()))
    return out
