"""Render one synthetic fluorescence stack with exact ground truth.

The imaging model, in the order light goes through it:

1. the target neuron (procedural or real) is painted as tubes whose brightness drifts slowly along the
   neurites (log-normal, correlated over ``signal_corr`` voxels) and drops to ``weak_snr`` x the
   background noise over **weak-signal stretches** of 5-40 voxels (what breaks segmentations);
2. distractors that are *not* in the label: other neurons' fibres crossing the field, bright somata,
   autofluorescent blobs, fine punctate neuropil;
3. one anisotropic Gaussian PSF blurs all of it (z sigma 2-4 x the xy sigma, in um);
4. a soft tissue background (smooth random texture) is added, then uneven illumination and depth
   attenuation multiply everything;
5. the camera: Poisson shot noise on the photon count, Gaussian read noise, gain, offset, 8/16-bit.

Ground truth: the target's SWC (voxel coordinates, radii in x voxels) and its rasterisation with
:meth:`Tree.rasterize`, so label and SWC agree exactly.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.errors import InputError
from neurorefiner.io.swc import Tree, format_swc, parse_swc
from neurorefiner.synth import morphology as morph
from neurorefiner.synth.camera import camera
from neurorefiner.synth.fields import paint_spheres, paint_tree, smooth_field
from neurorefiner.synth.params import GENERATOR_VERSION, Draw, SynthParams, sample_ranges
from neurorefiner.synth.visibility import floor_intensities

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 20
WEAK_RAMP = 3.0  # voxels of cosine ramp on each side of a weak stretch (outside its stated length)


@dataclass
class Rendering:
    image: np.ndarray  # ZYX uint8/uint16
    label: np.ndarray  # ZYX bool, == gold.rasterize(shape, spacing)
    gold: Tree  # voxel coordinates of this grid
    spacing: tuple[float, float, float]  # z, y, x um
    info: dict[str, Any] = field(default_factory=dict)


def resolve_params(preset_or_params: str | SynthParams | dict) -> SynthParams:
    """A preset name, a :class:`SynthParams`, or a dict of overrides: of the preset named by its ``preset``
    key (``{"preset": "tiny", "signal": [20, 30]}``), else of the defaults."""
    if isinstance(preset_or_params, SynthParams):
        return preset_or_params
    if isinstance(preset_or_params, dict):
        values = dict(preset_or_params)
        base = values.pop("preset", None)
        if base is not None:
            from neurorefiner.synth.presets import preset_params

            return SynthParams.from_dict(values, base=preset_params(base))
        return SynthParams.from_dict(values)
    if isinstance(preset_or_params, str):
        from neurorefiner.synth.presets import preset_params

        return preset_params(preset_or_params)
    raise InputError(f"expected a preset name, SynthParams or dict, got {type(preset_or_params).__name__}")


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def render_volume(preset_or_params: str | SynthParams | dict, seed: int
                  ) -> tuple[np.ndarray, np.ndarray, Tree, tuple[float, float, float]]:
    """``(image, label, gold, spacing)`` of one synthetic stack, in memory (nothing touches disk)."""
    r = render(preset_or_params, seed)
    return r.image, r.label, r.gold, r.spacing


def render(preset_or_params: str | SynthParams | dict, seed: int, tree: Tree | None = None,
           tree_spacing: tuple[float, float, float] | None = None) -> Rendering:
    """Render one stack; ``tree`` (with its ``tree_spacing``) replaces the drawn target morphology.

    A draw whose neuron leaves less than ``min_length`` voxels of neurite in the field is re-drawn
    (logged, at most ``MAX_ATTEMPTS`` times, then a clear error): never a hang, never an empty label.
    The random stream depends on ``seed`` and ``params.name``, so two presets never share a volume.
    """
    params = resolve_params(preset_or_params)
    seed = check_seed(seed)
    if tree is not None and tree_spacing is None:
        raise InputError("a user tree needs its voxel spacing (z, y, x um)", tree.source)
    skeleton = None
    last = 0.0
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([seed, attempt, zlib.crc32(params.name.encode())])
        draw = sample_ranges(params, rng)
        if tree is not None:
            skeleton = morph.user_target(tree, tree_spacing, params)  # type: ignore[arg-type]
            break
        use_real = params.morphology == "real" or (params.morphology == "mixed"
                                                   and rng.random() < params.real_fraction)
        if use_real and params.morphology == "mixed" and not morph.real_catalog(
                tuple(params.real_sources), params.real_pool):
            use_real = False  # e.g. ZBFWB's one real tree is held out to the test split
        skeleton = morph.real_target(rng, params, draw) if use_real else morph.procedural_target(rng, params, draw)
        last = skeleton.length()
        if last >= params.min_length:
            break
        log.warning("synth %s seed %d: draw %d placed only %.0f voxels of neurite in the field "
                    "(min_length %.0f); retrying with another draw", params.name, seed, attempt, last,
                    params.min_length)
        skeleton = None
    if skeleton is None:
        raise InputError(f"could not place a neuron with >= {params.min_length:.0f} voxels of neurite in a "
                         f"{params.shape} field after {MAX_ATTEMPTS} draws (last: {last:.0f}); enlarge the "
                         f"shape or lower min_length", f"synth preset {params.name!r}")
    return _render_skeleton(params, seed, attempt, rng, draw, skeleton)


# ---------------------------------------------------------------------------------------- intensities
def _along_tree_variation(rng: np.random.Generator, zyx: np.ndarray, parent: np.ndarray, cv: float,
                          corr: float) -> np.ndarray:
    """Log-normal brightness drifting along the tree (AR(1) over arc length), mean 1."""
    n = len(parent)
    v = np.empty(n)
    noise = rng.standard_normal(n)
    seg = np.zeros(n)
    child = parent >= 0
    seg[child] = np.linalg.norm(zyx[child] - zyx[parent[child]], axis=1)
    rho = np.exp(-seg / max(corr, 1e-6))
    innov = np.sqrt(1 - rho ** 2) * noise
    par = parent.tolist()
    for i in range(n):  # parents precede children
        p = par[i]
        v[i] = noise[i] if p < 0 else rho[i] * v[p] + innov[i]
    return np.exp(cv * v - 0.5 * cv * cv)


def _weak_stretches(rng: np.random.Generator, zyx: np.ndarray, parent: np.ndarray, types: np.ndarray,
                    inten: np.ndarray, noise_sd: float, draw: Draw, params: SynthParams
                    ) -> tuple[np.ndarray, list[dict]]:
    """Dim stretches of 5-40 voxels (iso frame, walking toward the root) down to ``weak_snr`` x the
    background noise sd, with short cosine ramps outside both ends. Returns the new intensities and
    the stretches (a stretch stopped early by a root or the soma is shorter than drawn)."""
    n = len(parent)
    out = inten.copy()
    seg = np.zeros(n)
    child = parent >= 0
    seg[child] = np.linalg.norm(zyx[child] - zyx[parent[child]], axis=1)
    total = float(seg.sum())
    count = int(rng.poisson(draw["weak_rate"] * total / 100.0))
    if total >= 2 * params.weak_length[0]:
        count = max(count, 1)  # every volume long enough gets at least one break-prone stretch
    candidates = np.nonzero(child & (types != 1))[0]
    planted: list[dict] = []
    if len(candidates) == 0:
        return out, planted
    par = parent.tolist()
    for _ in range(count):
        start = int(candidates[int(rng.integers(0, len(candidates)))])
        length = float(rng.uniform(*params.weak_length))
        snr = float(rng.uniform(*params.weak_snr))
        path = [start]
        arc = [0.0]
        i = start
        while par[i] >= 0 and arc[-1] < length + 2 * WEAK_RAMP and types[par[i]] != 1:
            arc.append(arc[-1] + seg[i])
            i = par[i]
            path.append(i)
        a = np.asarray(arc)
        w = np.clip(np.minimum(a, a[-1] - a) / WEAK_RAMP, 0, 1)  # 0 at the ends, 1 inside
        w = 0.5 - 0.5 * np.cos(np.pi * w)
        idx = np.asarray(path)
        floor = np.minimum(inten[idx], snr * noise_sd)
        out[idx] = np.minimum(out[idx], inten[idx] - w * (inten[idx] - floor))
        planted.append({"node": start, "length": round(float(max(arc[-1] - 2 * WEAK_RAMP, 0.0)), 2),
                        "snr": round(snr, 3)})
    return out, planted


def peak_factor(radii: np.ndarray, sigma_vox: tuple[float, float, float], spacing: tuple[float, float, float],
                kind: str = "tube") -> np.ndarray:
    """Peak of a unit-intensity tube (along x) or sphere of each radius (x voxels) after the PSF.

    A neurite thinner than the PSF loses most of its peak to the blur (on isotropic 0.38 um voxels a
    half-voxel fibre keeps ~7 %). Real thin fibres are still visible because they are bright, so
    painted intensities are divided by this factor: ``signal`` is then the peak photons the neurite
    shows *after* the optics, whatever its radius and the voxel size.
    """
    radii = np.asarray(radii, dtype=np.float64)
    grid = np.unique(np.round(np.maximum(radii, 0.5), 2))
    if len(grid) > 12:
        grid = np.linspace(grid.min(), grid.max(), 12)
    sz, _, sx = spacing
    out = []
    for r in grid:
        half = [int(np.ceil(3 * sg + r * sx / sp)) + 1 for sg, sp in zip(sigma_vox, spacing)]
        shape = (2 * half[0] + 1, 2 * half[1] + 1, 2 * half[2] + 1)
        vol = np.zeros(shape, np.float32)
        c = np.array(half, dtype=np.float64)
        if kind == "tube":
            ends = np.array([[c[0], c[1], 0.0], [c[0], c[1], shape[2] - 1.0]])
            paint_tree(vol, ends, np.array([-1, 0]), np.array([r, r]), np.array([1.0, 1.0]), spacing)
        else:
            paint_spheres(vol, c[None], np.array([r]), np.array([1.0]), spacing)
        blurred = ndi.gaussian_filter(vol, sigma_vox, truncate=3.0)
        out.append(float(blurred[half[0], half[1], half[2]]))
    return np.interp(np.maximum(radii, 0.5), grid, np.asarray(out))


def _fibre_arrays(sk: morph.Skeleton, params: SynthParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sz, _, sx = params.spacing
    return sk.zyx / np.array([sz / sx, 1.0, 1.0]), sk.parent, sk.radius


# ---------------------------------------------------------------------------------------- rendering
def _render_skeleton(params: SynthParams, seed: int, attempt: int, rng: np.random.Generator, draw: Draw,
                     sk: morph.Skeleton) -> Rendering:
    """Render one stack around a drawn skeleton, one function per stage of the imaging model (module
    docstring). The stages run in the order light goes through them, which is also the order of their random
    draws: a seed renders the same stack as long as that order stays."""
    shape = params.shape
    spacing = params.spacing
    sz, _, sx = spacing
    gold, label = _gold_and_label(params, seed, sk)

    sig_xy = draw["psf_xy"]
    sig_z = sig_xy * sx * draw["psf_z_ratio"] / sz  # z sigma / xy sigma = psf_z_ratio in um
    psf = (sig_z, sig_xy, sig_xy)
    s_vol = np.zeros(shape, dtype=np.float32)
    inten, planted = _target_intensities(rng, sk, draw, params)
    n_fibres, n_somata, n_blobs = _paint_distractors(s_vol, rng, draw, params, psf)

    # optics: one anisotropic Gaussian PSF for everything in focus (linear: distractors and target apart)
    optical = ndi.gaussian_filter(s_vol, psf, truncate=3.0)
    _add_tissue(optical, rng, draw, params)
    visibility = _add_target(optical, s_vol, sk, gold, label, inten, draw, params, psf)
    del s_vol
    _illuminate(optical, rng, draw, params)

    # camera: shot noise, read noise, gain, offset, quantisation
    image = camera(optical, int(rng.integers(0, 2 ** 63)), draw["read_noise"], params.gain, params.offset,
                   params.bit_depth)
    del optical

    info = {
        "synthetic": True, "preset": params.name, "seed": seed, "attempt": attempt,
        "generator_version": GENERATOR_VERSION, "morphology": sk.source,
        "neurite_length_vox": round(sk.length(), 2),
        "psf_sigma_vox": [round(sig_z, 4), round(sig_xy, 4), round(sig_xy, 4)],
        "psf_sigma_um": [round(sig_z * sz, 4), round(sig_xy * sx, 4), round(sig_xy * sx, 4)],
        "weak_stretches": planted, "visibility": visibility, "n_fibres": n_fibres, "n_somata": n_somata,
        "n_blobs": n_blobs,
        "draw": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in draw.values.items()},
    }
    return Rendering(image, label, gold, spacing, info)


def _gold_and_label(params: SynthParams, seed: int, sk: morph.Skeleton) -> tuple[Tree, np.ndarray]:
    """The gold tree on this grid, as the SWC file will hold it, and the label rasterised from it."""
    spacing = params.spacing
    gold = morph.to_grid(sk, params, comments=[
        f"SYNTHETIC neuron (not real data): neurorefiner.synth {GENERATOR_VERSION}, preset {params.name}, "
        f"seed {seed}, morphology {sk.source}",
        f"voxel spacing (z, y, x) um: {spacing[0]}, {spacing[1]}, {spacing[2]}"])
    # the label is rasterised from exactly what the SWC file will hold (4 decimals), so a reader that
    # rasterises the written SWC gets the written label bit for bit
    gold = parse_swc(format_swc(gold), validate=False)
    return gold, gold.rasterize(params.shape, spacing)


def _target_intensities(rng: np.random.Generator, sk: morph.Skeleton, draw: Draw, params: SynthParams
                        ) -> tuple[np.ndarray, list[dict]]:
    """The target's brightness per node: drifting along the neurites, somata a little brighter, and the weak
    stretches planted in it (returned with the stretches)."""
    inten = draw["signal"] * _along_tree_variation(rng, sk.zyx, sk.parent, params.signal_cv, params.signal_corr)
    inten[sk.types == 1] *= 1.5
    noise_sd = float(np.sqrt(draw["background"] + draw["read_noise"] ** 2))  # photons
    return _weak_stretches(rng, sk.zyx, sk.parent, sk.types, inten, noise_sd, draw, params)


def _paint_distractors(s_vol: np.ndarray, rng: np.random.Generator, draw: Draw, params: SynthParams,
                       psf: tuple[float, float, float]) -> tuple[int, int, int]:
    """Paint into ``s_vol`` what is never in the label: other neurons' fibres, bright somata, autofluorescent
    blobs and punctate neuropil. Returns how many fibres, somata and blobs."""
    shape, spacing = params.shape, params.spacing
    sx = spacing[2]
    signal = draw["signal"]
    n_fibres = int(draw["n_fibres"])
    for _ in range(n_fibres):
        f = morph.procedural_fibre(rng, params)
        zyx, par, rad = _fibre_arrays(f, params)
        fi = signal * rng.uniform(*params.fibre_signal) * _along_tree_variation(
            rng, f.zyx, f.parent, params.signal_cv, params.signal_corr)
        paint_tree(s_vol, zyx, par, rad, fi / peak_factor(rad, psf, spacing), spacing)
    n_somata = int(draw["n_somata"])
    if n_somata:
        pos = rng.uniform(0, 1, (n_somata, 3)) * (np.asarray(shape) - 1)
        rad = np.minimum(rng.uniform(*params.soma_radius_um, n_somata) / sx, params.soma_radius_max)
        paint_spheres(s_vol, pos, rad, signal * rng.uniform(*params.distractor_soma_signal, n_somata), spacing)
    n_voxels = float(np.prod(shape))
    n_blobs = int(rng.poisson(draw["blob_density"] * n_voxels / 1e6))
    if n_blobs:
        pos = rng.uniform(0, 1, (n_blobs, 3)) * (np.asarray(shape) - 1)
        rad = rng.uniform(0.5, 2.0, n_blobs)
        bi = signal * rng.uniform(*params.blob_signal, n_blobs) / peak_factor(rad, psf, spacing, "sphere")
        paint_spheres(s_vol, pos, rad, bi, spacing)
    neuropil = draw["neuropil"]
    if neuropil > 0:
        q = 0.03  # fraction of voxels holding a punctum; mean added = neuropil photons
        u = rng.random(shape, dtype=np.float32)
        s_vol += np.where(u < q, (2.0 * neuropil / q) * (u / q), 0.0).astype(np.float32)
        del u
    return n_fibres, n_somata, n_blobs


def _add_tissue(optical: np.ndarray, rng: np.random.Generator, draw: Draw, params: SynthParams) -> None:
    """Add the soft tissue background (a smooth random texture around the background level) to ``optical``."""
    sz, _, sx = params.spacing
    tissue_cell = (max(params.tissue_scale * sx / sz, 1.5), params.tissue_scale, params.tissue_scale)
    tissue = smooth_field(params.shape, tissue_cell, rng)
    tissue *= draw["background"] * draw["tissue_contrast"]
    tissue += draw["background"]
    np.maximum(tissue, 0.05 * draw["background"], out=tissue)
    optical += tissue


def _add_target(optical: np.ndarray, s_vol: np.ndarray, sk: morph.Skeleton, gold: Tree, label: np.ndarray,
                inten: np.ndarray, draw: Draw, params: SynthParams, psf: tuple[float, float, float]
                ) -> dict[str, float]:
    """Add the blurred target to ``optical`` (``s_vol`` is reused as scratch), its nodes below the preset's
    visibility floor brightened to it (never dropped from the label); returns what the floor did."""
    spacing = params.spacing
    inten, visibility = floor_intensities(inten, gold.zyx, optical, label, spacing, params.visibility_floor,
                                          draw["read_noise"])
    s_vol[...] = 0.0
    paint_tree(s_vol, gold.zyx, sk.parent, gold.radius, inten / peak_factor(gold.radius, psf, spacing), spacing)
    optical += ndi.gaussian_filter(s_vol, psf, truncate=3.0)
    return visibility


def _illuminate(optical: np.ndarray, rng: np.random.Generator, draw: Draw, params: SynthParams) -> None:
    """Multiply ``optical`` by uneven illumination (a smooth field over half the stack) and depth attenuation."""
    shape = params.shape
    big = (max(shape[0] / 2, 2), max(shape[1] / 2, 2), max(shape[2] / 2, 2))
    illum = smooth_field(shape, big, rng)
    illum *= draw["illumination"]
    illum += 1.0
    depth = 1.0 - draw["depth_attenuation"] * np.linspace(0, 1, shape[0], dtype=np.float32)
    illum *= depth[:, None, None]
    np.maximum(illum, 0.1, out=illum)
    optical *= illum

