"""Target and distractor morphologies for the synthetic stacks.

Two sources: procedural trees (a persistent random walk that branches, tapers and stops at the field
border: long axonal projections, bushy dendrites, dense terminal arbors) and real gold reconstructions
(BigNeuron Gold166, the ZBFWB GT.swc) rotated, rescaled to the field and cropped.

Everything here works in an *isotropic* frame measured in x voxels (z is stretched by z/x spacing),
so that a random direction is a random direction in physical space; :func:`to_grid` converts to the
anisotropic voxel grid at the end.
"""

from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.swc import Tree, read_swc
from neurorefiner.synth.params import Draw, SynthParams

MAX_NODES = 60_000  # growth stops here whatever the parameters: never hang


@dataclass
class Skeleton:
    """Nodes in the isotropic frame (Z, Y, X in x voxels); every parent index precedes its child."""

    zyx: np.ndarray
    parent: np.ndarray
    radius: np.ndarray
    types: np.ndarray
    source: str = "procedural"

    def __len__(self) -> int:
        return len(self.parent)

    def length(self) -> float:
        child = np.nonzero(self.parent >= 0)[0]
        if len(child) == 0:
            return 0.0
        return float(np.linalg.norm(self.zyx[child] - self.zyx[self.parent[child]], axis=1).sum())


def iso_extent(params: SynthParams) -> np.ndarray:
    """Largest coordinate of the field per axis in the isotropic frame."""
    sz, _, sx = params.spacing
    z, y, x = params.shape
    return np.array([(z - 1) * sz / sx, y - 1, x - 1], dtype=np.float64)


def to_grid(sk: Skeleton, params: SynthParams, comments: list[str] | None = None) -> Tree:
    """Isotropic frame -> voxel grid of ``params`` as an SWC :class:`Tree` (radii in x voxels)."""
    sz, _, sx = params.spacing
    zyx = sk.zyx / np.array([sz / sx, 1.0, 1.0])
    hi = np.asarray(params.shape, dtype=np.float64) - 1
    zyx = np.clip(zyx, 0.0, hi)  # growth stays inside; this only removes rounding below 1e-9
    return Tree.from_points(zyx, sk.parent, sk.radius, sk.types, comments=comments)


# ---------------------------------------------------------------------------------------- procedural
class _Builder:
    def __init__(self) -> None:
        self.zyx: list[np.ndarray] = []
        self.parent: list[int] = []
        self.radius: list[float] = []
        self.types: list[int] = []

    def add(self, pos: np.ndarray, parent: int, radius: float, kind: int) -> int:
        self.zyx.append(np.asarray(pos, dtype=np.float64))
        self.parent.append(parent)
        self.radius.append(float(radius))
        self.types.append(kind)
        return len(self.parent) - 1

    def build(self, source: str) -> Skeleton:
        if not self.parent:
            return Skeleton(np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), source)
        return Skeleton(np.asarray(self.zyx), np.asarray(self.parent, np.int64), np.asarray(self.radius),
                        np.asarray(self.types, np.int64), source)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else np.array([0.0, 0.0, 1.0])


def _random_unit(rng: np.random.Generator) -> np.ndarray:
    return _unit(rng.standard_normal(3))


def _turn(rng: np.random.Generator, d: np.ndarray, lo_deg: float, hi_deg: float) -> np.ndarray:
    """A direction at a random angle in [lo, hi] degrees from ``d``."""
    u = _unit(np.cross(d, _random_unit(rng)))
    a = math.radians(rng.uniform(lo_deg, hi_deg))
    return _unit(math.cos(a) * d + math.sin(a) * u)


def _inside(p: np.ndarray, hi: np.ndarray) -> bool:
    return bool((p >= 0).all() and (p <= hi).all())


# kind: (SWC type, tortuosity key, branch probability key, taper per step, child kind)
_AXON, _DENDRITE, _ARBOR = 2, 3, 4


def _grow(rng: np.random.Generator, b: _Builder, tips: list[tuple], params: SynthParams,
          hi: np.ndarray) -> None:
    """Grow every tip (parent, pos, dir, radius, length, kind) as a persistent random walk.

    Branches push new tips; the walk stops at the field border, at the end of its length, or when the
    node budget is spent.
    """
    rlo, rhi = params.radius
    step = params.step
    while tips and len(b.parent) < MAX_NODES:
        parent, pos, d, r, length, kind = tips.pop()
        if kind == _AXON:
            tort, pb, taper = params.tortuosity_axon, params.branch_prob_axon, 0.997
        elif kind == _DENDRITE:
            tort, pb, taper = params.tortuosity_dendrite, params.branch_prob_dendrite, 0.985
        else:
            tort, pb, taper = params.tortuosity_dendrite * 1.3, 0.12, 0.97
        walked = 0.0
        ended_inside = True
        while walked < length and len(b.parent) < MAX_NODES:
            d = _unit(d + tort * rng.standard_normal(3))
            new = pos + step * d
            if not _inside(new, hi):
                ended_inside = False
                break
            r = max(rlo, r * taper)
            parent = b.add(new, parent, r, kind)
            pos = new
            walked += step
            if rng.random() < pb:
                child_kind = _DENDRITE if kind == _DENDRITE else (_ARBOR if kind == _ARBOR else _AXON)
                if kind == _AXON:  # collaterals: shorter than the main projection
                    child_len = rng.uniform(0.15, 0.5) * (length - walked + 40.0)
                elif kind == _DENDRITE:
                    child_len = rng.uniform(0.4, 0.9) * max(length - walked, 10.0)
                else:
                    child_len = rng.uniform(4.0, 14.0)
                tips.append((parent, pos.copy(), _turn(rng, d, 25, 75), max(rlo, r * 0.75), child_len,
                             child_kind))
                d = _turn(rng, d, 5, 20)
                r = max(rlo, r * 0.9)
        if kind == _AXON and ended_inside and walked >= length and rng.random() < params.arbor_prob:
            for _ in range(int(rng.integers(3, 7))):
                tips.append((parent, pos.copy(), _turn(rng, d, 20, 100), max(rlo, min(rhi, r) * 0.8),
                             rng.uniform(8.0, 25.0), _ARBOR))


def _entry_point(rng: np.random.Generator, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A point on a random face of the field and an inward direction (fibres entering the crop)."""
    axis = int(rng.integers(0, 3))
    side = int(rng.integers(0, 2))
    p = rng.uniform(0.1, 0.9, 3) * hi
    p[axis] = 0.0 if side == 0 else hi[axis]
    inward = np.zeros(3)
    inward[axis] = 1.0 if side == 0 else -1.0
    d = _unit(inward + 0.8 * rng.standard_normal(3) * np.array([1, 1, 1]) * (1 - inward ** 2))
    return p, d


def procedural_target(rng: np.random.Generator, params: SynthParams, draw: Draw) -> Skeleton:
    """A neuron with a soma in the field (dendrites + axon), or an axonal arbor entering from a face."""
    hi = iso_extent(params)
    diag = float(np.linalg.norm(hi))
    rlo, rhi = params.radius
    b = _Builder()
    tips: list[tuple] = []
    axon_len = draw["axon_length"] * diag
    if rng.random() < params.soma_prob:
        soma = rng.uniform(0.2, 0.8, 3) * hi
        _, _, sx = params.spacing
        rs = min(params.soma_radius_max, draw["soma_radius_um"] / sx)
        root = b.add(soma, -1, rs, 1)
        for _ in range(int(draw["n_dendrites"])):
            d = _random_unit(rng)
            start = soma + d * rs * 0.8
            if not _inside(start, hi):
                continue
            first = b.add(start, root, rng.uniform((rlo + rhi) / 2, rhi), _DENDRITE)
            tips.append((first, start, d, b.radius[first], draw["dendrite_length"] * rng.uniform(0.7, 1.3),
                         _DENDRITE))
        d = _random_unit(rng)
        start = soma + d * rs * 0.8
        if _inside(start, hi):
            first = b.add(start, root, rng.uniform(rlo, (rlo + rhi) / 2), _AXON)
            tips.append((first, start, d, b.radius[first], axon_len, _AXON))
        tips.reverse()  # the axon grows last: dendrites keep the low indices near the soma
    else:
        start, d = _entry_point(rng, hi)
        first = b.add(start, -1, rng.uniform(rlo, (rlo + rhi) / 2), _AXON)
        tips.append((first, start, d, b.radius[first], axon_len, _AXON))
    _grow(rng, b, tips, params, hi)
    return b.build("procedural")


def procedural_fibre(rng: np.random.Generator, params: SynthParams) -> Skeleton:
    """Another neuron's fibre crossing the field (a distractor: rendered, never labelled)."""
    hi = iso_extent(params)
    b = _Builder()
    start, d = _entry_point(rng, hi)
    rlo, rhi = params.radius
    first = b.add(start, -1, rng.uniform(rlo, (rlo + rhi) / 2), _AXON)
    thin = params.replace(branch_prob_axon=params.branch_prob_axon * 0.5, arbor_prob=0.3)
    _grow(rng, b, [(first, start, d, b.radius[first], 3.0 * float(np.linalg.norm(hi)), _AXON)], thin, hi)
    return b.build("fibre")


# ---------------------------------------------------------------------------------------- real trees
@dataclass(frozen=True)
class RealEntry:
    key: str  # e.g. bigneuron/105, zbfwb/GT
    path: Path
    spacing: tuple[float, float, float]  # z, y, x um of the SWC's voxel coordinates
    planar: bool
    organism: str


def _pool_of(key: str) -> str:
    """Stable split of real trees by id, so no tree is in two splits: 70 % train, 10 % val, 20 % test."""
    h = int(hashlib.sha1(key.encode()).hexdigest(), 16) % 10
    return "train" if h < 7 else ("val" if h == 7 else "test")


def _bigneuron_index(root: Path) -> list[tuple[str, Path, tuple[float, float, float], bool, str]]:
    """(key, gold SWC, spacing z/y/x um, planar, organism) per row of ``index.csv``.

    Read here rather than through ``neurorefiner.data`` (which sits above synth in the import order).
    """
    index = root / "index.csv"
    if not index.exists():
        raise InputError("index.csv not found; BigNeuron gold SWCs ship with the repository", index)
    rows = []
    with open(index, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                xy, z = float(row["xy_um"]), float(row["z_um"])
                rows.append((f"bigneuron/{row['id']}", root / row["gold"], (z, xy, xy),
                             row["planar"].upper() == "2D", row["organism"]))
            except (KeyError, ValueError) as exc:
                raise InputError(f"bad row {row}: {exc}", index) from exc
    return rows


@lru_cache(maxsize=8)
def real_catalog(sources: tuple[str, ...], pool: str) -> tuple[RealEntry, ...]:
    """Real gold trees available to a split. ZBFWB's single GT.swc is held out to ``test``."""
    from neurorefiner.paths import data_dir

    out: list[RealEntry] = []
    if "bigneuron" in sources:
        for key, path, spacing, planar, organism in _bigneuron_index(data_dir() / "bigneuron_gold"):
            if pool in ("all", _pool_of(key)):
                out.append(RealEntry(key, path, spacing, planar, organism))
    if "zbfwb" in sources and pool in ("all", "test"):
        path = data_dir() / "zbfwb_gold" / "GT.swc"
        if not path.exists():
            raise InputError("ZBFWB gold tree not found (ships with the repository)", path)
        out.append(RealEntry("zbfwb/GT", path, (1.0, 0.4971846916833431, 0.4971846916833431), False,
                             "Zebrafish"))
    return tuple(out)


@lru_cache(maxsize=256)
def _load_physical(path: Path, spacing: tuple[float, float, float]) -> Skeleton:
    """A gold tree in um (Z, Y, X), resampled every 1 um, nodes in parent-first order."""
    tree = read_swc(path)
    tree = tree.resampled(1.0, spacing).reindexed()  # nodes every 1 um, still in voxels of ``spacing``
    return Skeleton(tree.physical_zyx(spacing), tree.parent_index.copy(), tree.radius * spacing[2], tree.types.copy(),
                    str(path))


def _rotation(rng: np.random.Generator, planar: bool) -> np.ndarray:
    """Random rotation about z (any angle), tilted up to 30 degrees for 3D trees; (Z, Y, X) order."""
    phi = rng.uniform(0, 2 * math.pi)
    c, s = math.cos(phi), math.sin(phi)
    rz = np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if planar:
        return rz
    t = math.radians(rng.uniform(-30, 30))
    c, s = math.cos(t), math.sin(t)
    rx = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])  # tilts z into y
    return rx @ rz


def _components(parent: np.ndarray) -> np.ndarray:
    comp = np.arange(len(parent))
    for i in range(len(parent)):  # parent index < child index (reindexed order)
        if parent[i] >= 0:
            comp[i] = comp[parent[i]]
    return comp


def crop(sk: Skeleton, hi: np.ndarray, min_piece: float) -> Skeleton:
    """Keep nodes inside [0, hi]; pieces cut off from the main tree survive if at least ``min_piece`` long."""
    keep = ((sk.zyx >= 0) & (sk.zyx <= hi)).all(axis=1)
    if not keep.any():
        return Skeleton(np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), sk.source)
    new_index = np.cumsum(keep) - 1
    parent = np.where((sk.parent >= 0) & keep[np.maximum(sk.parent, 0)], new_index[np.maximum(sk.parent, 0)], -1)
    sub = Skeleton(sk.zyx[keep], parent[keep], sk.radius[keep], sk.types[keep], sk.source)
    comp = _components(sub.parent)
    child = np.nonzero(sub.parent >= 0)[0]
    seg = np.linalg.norm(sub.zyx[child] - sub.zyx[sub.parent[child]], axis=1)
    comp_len = np.bincount(comp[child], weights=seg, minlength=len(sub))
    best = comp_len.max() if len(comp_len) else 0.0
    good = comp_len[comp] >= min(min_piece, best)
    if good.all():
        return sub
    new_index = np.cumsum(good) - 1
    parent = np.where(sub.parent >= 0, new_index[np.maximum(sub.parent, 0)], -1)
    return Skeleton(sub.zyx[good], parent[good], sub.radius[good], sub.types[good], sub.source)


def real_target(rng: np.random.Generator, params: SynthParams, draw: Draw) -> Skeleton:
    """A real gold tree: rotated, rescaled so its xy extent is ``real_fit`` x the field, placed, cropped."""
    catalog = real_catalog(tuple(params.real_sources), params.real_pool)
    if not catalog:
        raise InputError(f"no real trees for sources {params.real_sources} in pool {params.real_pool!r}")
    entry = catalog[int(rng.integers(0, len(catalog)))]
    sk = _load_physical(entry.path, tuple(entry.spacing))
    hi = iso_extent(params)
    zyx = (sk.zyx - sk.zyx.mean(axis=0)) @ _rotation(rng, entry.planar).T
    if rng.random() < 0.5:
        zyx[:, 2] = -zyx[:, 2]
    span = float(np.ptp(zyx[:, 1:], axis=0).max()) if len(zyx) > 1 else 1.0
    k = draw["real_fit"] * min(hi[1], hi[2]) / max(span, 1e-6)  # um -> iso units of this field
    zyx = zyx * k + rng.uniform(0.3, 0.7, 3) * hi
    rlo, rhi = params.radius
    radius = sk.radius * k
    soma = sk.types == 1
    radius = np.where(soma, np.clip(radius, rlo, params.soma_radius_max), np.clip(radius, rlo, rhi))
    # resample in the field's frame so the crop boundary is accurate to one step
    tree = Tree.from_points(zyx, sk.parent, radius, sk.types).resampled(params.step).reindexed()
    placed = Skeleton(tree.zyx.copy(), tree.parent_index.copy(), tree.radius.copy(), tree.types.copy(),
                      entry.key)
    return crop(placed, hi, min_piece=max(params.min_length / 4, 10.0))


# ---------------------------------------------------------------------------------------- user trees
def user_target(tree: Tree, tree_spacing: tuple[float, float, float], params: SynthParams) -> Skeleton:
    """A user's SWC placed as it is (no rescale, no crop), centred in the field; refuse it if it does not fit."""
    if len(tree) == 0:
        raise InputError("the SWC has no nodes", tree.source)
    sz, _, sx = params.spacing
    t = tree.reindexed()
    zyx = t.physical_zyx(tree_spacing) / sx
    hi = iso_extent(params)
    ext = np.ptp(zyx, axis=0)
    if (ext > hi).any():
        need = np.ceil(ext * np.array([sx / sz, 1, 1])).astype(int) + 1
        raise InputError(f"the tree spans {tuple(int(v) for v in need)} voxels (Z, Y, X) at spacing "
                         f"{params.spacing}, larger than the field {params.shape}; use a larger shape",
                         tree.source)
    zyx = zyx - zyx.min(axis=0) + (hi - ext) / 2
    radius = np.maximum(t.radius * tree_spacing[2] / sx, params.radius[0])
    return Skeleton(zyx, t.parent_index.copy(), radius, t.types.copy(), str(tree.source))
