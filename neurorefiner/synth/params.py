"""Parameters of the synthetic fluorescence neuron generator.

One :class:`SynthParams` describes a *distribution* of volumes: every ``(lo, hi)`` pair is a range that
each volume samples uniformly from its own seed, so one preset yields varied stacks (contrast, noise,
number of distractors) the way a real benchmark does. Lengths are in voxels of x (the finest axis for
every preset here) unless the name says ``_um``; intensities are in photons before the camera model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.volume import check_spacing

Range = tuple[float, float]

# bumped whenever the same params + seed would render different bytes; cached benchmarks regenerate
GENERATOR_VERSION = "1.2"  # 1.1: image tubes drawn by io.capsules (6-connected centreline); 1.2: visibility floor

MORPHOLOGIES = ("procedural", "real", "mixed")
REAL_SOURCES = ("bigneuron", "zbfwb")
POOLS = ("train", "val", "test", "all")
INT_RANGES = ("n_dendrites", "n_fibres", "n_somata")  # counts: drawn as integers, bounds inclusive


@dataclass(frozen=True)
class SynthParams:
    name: str = "custom"
    shape: tuple[int, int, int] = (64, 64, 64)  # Z, Y, X voxels
    spacing: tuple[float, float, float] = (1.0, 0.5, 0.5)  # z, y, x um

    # ---------------------------------------------------------------- morphology of the target neuron
    morphology: str = "procedural"  # procedural | real | mixed
    real_fraction: float = 0.0  # mixed: probability that a volume uses a real gold tree
    real_sources: tuple[str, ...] = ("bigneuron",)  # bigneuron (114 Gold166 trees), zbfwb (GT.swc)
    real_pool: str = "all"  # which id-split of the real trees may be used (set per split by datasets)
    real_fit: Range = (0.7, 1.6)  # rescale: tree xy extent / field xy extent, before cropping
    soma_prob: float = 0.5  # procedural: soma in the field, else a fibre arbor entering from a face
    n_dendrites: tuple[int, int] = (2, 5)
    dendrite_length: Range = (30.0, 90.0)
    axon_length: Range = (1.0, 2.5)  # in field diagonals (stops at the border)
    step: float = 2.0  # growth step
    tortuosity_axon: float = 0.12  # sd of the per-step direction change (radians, roughly)
    tortuosity_dendrite: float = 0.35
    branch_prob_axon: float = 0.012  # per step
    branch_prob_dendrite: float = 0.05
    arbor_prob: float = 0.6  # an axon ending in the field grows a dense local terminal arbor
    radius: Range = (0.5, 3.0)  # neurite radii are kept in this range (x voxels)
    soma_radius_um: Range = (3.0, 5.0)
    soma_radius_max: float = 10.0  # voxels
    min_length: float = 60.0  # a target with less neurite length in the field is re-drawn

    # ---------------------------------------------------------------- imaging of the target
    signal: Range = (40.0, 80.0)  # peak photons of a neurite after the PSF (whatever its radius)
    signal_cv: float = 0.35  # log-normal sd of the slow intensity variation along neurites
    signal_corr: float = 15.0  # correlation length of that variation
    weak_rate: Range = (0.6, 1.2)  # weak-signal stretches per 100 voxels of neurite
    weak_length: Range = (5.0, 40.0)  # voxels of neurite
    weak_snr: Range = (0.0, 1.0)  # peak left in a weak stretch, in sd of the background noise
    visibility_floor: float = 0.0  # least local contrast-to-noise of any labelled node after the PSF (peak over
    #   the sd of the background box around it, camera noise included; synth.visibility); dimmer nodes,
    #   weak stretches included, are brightened to it, never dropped from the label. 0: no floor
    psf_xy: Range = (0.7, 1.1)  # sigma in x voxels
    psf_z_ratio: Range = (2.0, 4.0)  # z sigma / xy sigma, both in um

    # ---------------------------------------------------------------- what is not the target
    background: Range = (4.0, 10.0)  # photons of soft tissue background
    tissue_contrast: Range = (0.3, 0.6)  # relative amplitude of the tissue texture
    tissue_scale: float = 12.0  # correlation length of the tissue texture (voxels)
    neuropil: Range = (0.0, 3.0)  # photons of fine punctate texture (blurred by the PSF)
    n_fibres: tuple[int, int] = (1, 4)  # other neurons' fibres passing through
    fibre_signal: Range = (0.4, 1.2)  # relative to the target's signal
    n_somata: tuple[int, int] = (0, 2)  # bright cell bodies not in the label
    distractor_soma_signal: Range = (1.5, 3.0)
    blob_density: Range = (20.0, 60.0)  # autofluorescent blobs per 1e6 voxels
    blob_signal: Range = (0.3, 1.2)  # peak after the PSF, relative to the target's signal
    illumination: Range = (0.1, 0.35)  # amplitude of uneven (multiplicative) illumination
    depth_attenuation: Range = (0.0, 0.3)  # fraction of signal lost at the deepest slice

    # ---------------------------------------------------------------- camera
    read_noise: Range = (1.0, 3.0)  # photons (sd, Gaussian)
    gain: float = 2.0  # grey levels per photon
    offset: float = 0.0  # grey level of zero photons
    bit_depth: int = 8  # 8 or 16

    def __post_init__(self) -> None:
        # Hydra/JSON give lists; the dataclass is frozen and hashed into manifests, so store tuples
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (str, bytes, tuple, int, float)) and hasattr(v, "__iter__"):
                object.__setattr__(self, f.name, tuple(v))  # list, ListConfig, array
        self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise :class:`InputError` naming the parameter for sizes, spacings and ranges that cannot work."""
        src = f"synth preset {self.name!r}"
        shape = self.shape
        if len(shape) != 3 or any(not isinstance(s, (int, np.integer)) and not float(s).is_integer()
                                  for s in shape):
            raise InputError(f"shape must be three integers (Z, Y, X), got {shape!r}", src)
        object.__setattr__(self, "shape", tuple(int(s) for s in shape))
        if any(s < 16 for s in self.shape):
            raise InputError(f"shape must be at least 16 voxels per axis, got {self.shape}", src)
        if int(np.prod(self.shape, dtype=np.int64)) > 2_000_000_000:
            raise InputError(f"shape {self.shape} is over 2e9 voxels; render it in tiles", src)
        object.__setattr__(self, "spacing", check_spacing(self.spacing, src))
        sz, sy, sx = self.spacing
        if sy != sx:
            raise InputError(f"spacing must be isotropic in y and x (got y={sy}, x={sx})", src)
        if sz < sx:
            raise InputError(f"spacing z={sz} finer than x={sx} is not supported (z is the coarse axis)", src)
        if self.morphology not in MORPHOLOGIES:
            raise InputError(f"morphology must be one of {MORPHOLOGIES}, got {self.morphology!r}", src)
        bad = set(self.real_sources) - set(REAL_SOURCES)
        if bad:
            raise InputError(f"unknown real_sources {sorted(bad)}; known: {REAL_SOURCES}", src)
        if self.real_pool not in POOLS:
            raise InputError(f"real_pool must be one of {POOLS}, got {self.real_pool!r}", src)
        if self.bit_depth not in (8, 16):
            raise InputError(f"bit_depth must be 8 or 16, got {self.bit_depth}", src)
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name in ("shape", "spacing", "real_sources", "name"):
                continue
            if isinstance(v, tuple):
                if len(v) != 2 or not all(np.isfinite(float(x)) for x in v):
                    raise InputError(f"{f.name} must be a range [lo, hi], got {v!r}", src)
                if v[0] > v[1] or v[0] < 0:
                    raise InputError(f"{f.name} must satisfy 0 <= lo <= hi, got {v!r}", src)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                if not np.isfinite(v) or v < 0:
                    raise InputError(f"{f.name} must be a finite number >= 0, got {v!r}", src)
        for name in ("real_fraction", "soma_prob", "arbor_prob"):
            if getattr(self, name) > 1:
                raise InputError(f"{name} is a probability, got {getattr(self, name)}", src)
        if self.psf_z_ratio[0] < 1:
            raise InputError(f"psf_z_ratio must be >= 1 (z is blurred more than xy), got {self.psf_z_ratio}", src)
        if self.radius[0] < 0.25:
            raise InputError(f"radius range must start at >= 0.25 voxel, got {self.radius}", src)
        if self.step <= 0:
            raise InputError(f"step must be positive, got {self.step}", src)

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, Any], base: SynthParams | None = None) -> SynthParams:
        """Build from a dict (e.g. Hydra overrides); unknown keys are a clear error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise InputError(f"unknown synth parameter(s) {sorted(unknown)}; known: {sorted(known)}")
        if base is None:
            return cls(**values)
        return dataclasses.replace(base, **values)

    def replace(self, **changes: Any) -> SynthParams:
        return dataclasses.replace(self, **changes)


@dataclass
class Draw:
    """Per-volume values sampled from the ranges of :class:`SynthParams` (kept for the manifest/info)."""

    values: dict[str, float] = field(default_factory=dict)

    def __getitem__(self, key: str) -> float:
        return self.values[key]


def sample_ranges(params: SynthParams, rng: np.random.Generator) -> Draw:
    """One uniform draw from every range; the counts in ``INT_RANGES`` draw integers (inclusive)."""
    out: dict[str, float] = {}
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        if f.name in ("shape", "spacing", "real_sources") or not isinstance(v, tuple):
            continue
        lo, hi = v
        if f.name in INT_RANGES:
            out[f.name] = int(rng.integers(int(lo), int(hi) + 1))
        else:
            out[f.name] = float(rng.uniform(lo, hi)) if hi > lo else float(lo)
    return Draw(out)
