"""Draw one stage-1 defect of a random kind, with every knob in one place (:class:`DefectConfig`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from neurorefiner.defects.breaks import Defect, make_break
from neurorefiner.defects.noise import add_noise_blobs, paste_annotation
from neurorefiner.defects.touch import paste_touching_fibre
from neurorefiner.settings import build_settings

DEFECT_KINDS = ("break", "paste", "noise", "touch")
SOURCE_KINDS = ("paste", "touch")  # kinds that paste a piece of another neuron's mask (``sources``)


@dataclass
class DefectConfig:
    """Settings of the stage-1 defects (Hydra passes them as a plain mapping)."""

    # touch is off (probability 0) by default: a trailing zero leaves every draw of the shipped configs as it was
    probs: dict = field(default_factory=lambda: {"break": 0.5, "paste": 0.25, "noise": 0.25, "touch": 0.0})
    k_range: tuple[int, int] = (5, 20)  # break kernel, inclusive (paper: k in [5, 20])
    break_z_scale: float = 1.0  # kernel along z relative to y/x (1.0 = paper, voxels)
    min_piece: int = 8  # a break must split off a piece of at least this many voxels
    long_gap: float = 10.0  # voxels: longer gaps/noise with ends in two cells get the two-position form
    paste_size_range: tuple[int, int] = (10, 24)
    paste_z_scale: float = 0.5
    paste_min_voxels: int = 15
    noise_n_range: tuple[int, int] = (1, 5)
    noise_sigma_range: tuple[float, float] = (1.0, 2.5)
    noise_z_scale: float = 0.5
    noise_min_voxels: int = 10
    touch_size_range: tuple[int, int] = (14, 32)  # a longer patch than paste: its two ends must fall in two cells
    touch_z_scale: float = 0.5
    touch_min_voxels: int = 15
    touch_min_length: float = 10.0  # voxels along the main direction: a fibre, not a speck
    touch_max_overlap: float = 0.2  # share of the fibre allowed inside the neuron (it lies mostly outside)
    touch_contact_radius: float = 5.0  # voxels: the fibre touches the neuron only this close to one end

    def __post_init__(self) -> None:
        probs = {str(k): float(v) for k, v in dict(self.probs).items()}
        unknown = set(probs) - set(DEFECT_KINDS)
        if unknown:
            raise ValueError(f"unknown defect kinds {sorted(unknown)}; known: {DEFECT_KINDS}")
        if any(v < 0 for v in probs.values()) or sum(probs.values()) <= 0:
            raise ValueError(f"defect probabilities must be >= 0 and not all 0, got {probs}")
        self.probs = probs
        self.k_range = tuple(int(v) for v in self.k_range)  # type: ignore[assignment]
        self.paste_size_range = tuple(int(v) for v in self.paste_size_range)  # type: ignore[assignment]
        self.noise_n_range = tuple(int(v) for v in self.noise_n_range)  # type: ignore[assignment]
        self.noise_sigma_range = tuple(float(v) for v in self.noise_sigma_range)  # type: ignore[assignment]
        self.touch_size_range = tuple(int(v) for v in self.touch_size_range)  # type: ignore[assignment]

    @classmethod
    def build(cls, value: DefectConfig | Mapping | None) -> DefectConfig:
        return build_settings(cls, value, "defect")


def make_one(kind: str, gold: np.ndarray, rng: np.random.Generator, cfg: DefectConfig,
             sources: Sequence[np.ndarray] | None = None, fg: np.ndarray | None = None) -> Defect | None:
    """One defect of the given kind, or None when the block has no place for it."""
    if kind == "break":
        return make_break(gold, rng, cfg.k_range, cfg.break_z_scale, cfg.min_piece, cfg.long_gap, fg=fg)
    if kind == "paste":
        return paste_annotation(gold, rng, list(sources) if sources else [gold], cfg.paste_size_range,
                                cfg.paste_z_scale, cfg.paste_min_voxels, long_gap=cfg.long_gap)
    if kind == "noise":
        return add_noise_blobs(gold, rng, cfg.noise_n_range, cfg.noise_sigma_range,
                               z_scale=cfg.noise_z_scale, min_voxels=cfg.noise_min_voxels,
                               long_gap=cfg.long_gap)
    if kind == "touch":
        return paste_touching_fibre(gold, rng, list(sources) if sources else [gold], cfg.touch_size_range,
                                    cfg.touch_z_scale, cfg.touch_min_voxels, cfg.touch_min_length,
                                    cfg.touch_max_overlap, cfg.touch_contact_radius)
    raise ValueError(f"unknown defect kind {kind!r}; known: {DEFECT_KINDS}")


def draw_kind(rng: np.random.Generator, cfg: DefectConfig) -> str:
    kinds = list(cfg.probs)
    p = np.array([cfg.probs[k] for k in kinds])
    return kinds[int(rng.choice(len(kinds), p=p / p.sum()))]


def make_defect(gold: np.ndarray, rng: np.random.Generator, cfg: DefectConfig | Mapping | None = None,
                sources: Sequence[np.ndarray] | None = None, kind: str | None = None) -> Defect | None:
    """A defect of ``kind`` (drawn from ``cfg.probs`` when None) in the gold block ``gold``.

    ``sources`` are other neurons' masks for ``paste`` and ``touch`` (without them the block's own mask is used,
    mirrored and moved, which still reads as a foreign fragment). None when that kind has no place in
    this block; callers draw another block rather than switch kind, so the kind mix stays as asked.
    """
    cfg = DefectConfig.build(cfg)
    kind = draw_kind(rng, cfg) if kind is None else kind
    return make_one(kind, np.asarray(gold, dtype=bool), rng, cfg, sources)
