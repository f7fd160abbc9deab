"""SWC morphologies: read, write, validate, resample, transform and rasterise.

A :class:`Tree` holds the SWC columns as arrays. Coordinates stay as written (x = column, y = row,
z = slice, in voxels for the data here); ``spacing`` (z, y, x) in um converts them to physical units
where distances matter. Radii are in the same units as x/y.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path
from neurorefiner.io.capsules import paint_capsules

Spacing = tuple[float, float, float]


@dataclass
class Tree:
    """SWC columns as arrays. ``parents`` holds parent *ids* (-1 for a root)."""

    ids: np.ndarray
    types: np.ndarray
    xyz: np.ndarray  # (N, 3): x, y, z as in the file
    radius: np.ndarray
    parents: np.ndarray
    comments: list[str] = field(default_factory=list)
    source: str | None = None
    lines: np.ndarray | None = None  # file line number of each node, for error messages

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls, source: str | None = None) -> Tree:
        z = np.zeros(0)
        return cls(z.astype(np.int64), z.astype(np.int64), np.zeros((0, 3)), z, z.astype(np.int64),
                   source=source)

    @classmethod
    def from_points(cls, zyx: np.ndarray, parent_index: np.ndarray, radius: np.ndarray | float = 1.0,
                    types: np.ndarray | int = 3, comments: list[str] | None = None) -> Tree:
        """Build from node positions (Z, Y, X order) and parent *indices* (-1 for roots)."""
        zyx = np.asarray(zyx, dtype=np.float64).reshape(-1, 3)
        n = len(zyx)
        parent_index = np.asarray(parent_index, dtype=np.int64)
        ids = np.arange(1, n + 1, dtype=np.int64)
        parents = np.where(parent_index >= 0, parent_index + 1, -1)
        return cls(ids, np.broadcast_to(np.asarray(types, np.int64), (n,)).copy(), zyx[:, ::-1].copy(),
                   np.broadcast_to(np.asarray(radius, np.float64), (n,)).copy(), parents,
                   comments=list(comments or []))

    def __len__(self) -> int:
        return int(self.ids.size)

    # ------------------------------------------------------------------ views
    @property
    def zyx(self) -> np.ndarray:
        """Node positions in Z, Y, X order (voxels), matching ZYX arrays."""
        return self.xyz[:, ::-1]

    def physical_zyx(self, spacing: Spacing = (1.0, 1.0, 1.0)) -> np.ndarray:
        return self.zyx * np.asarray(spacing, dtype=np.float64)

    @property
    def parent_index(self) -> np.ndarray:
        """Index of each node's parent (-1 for roots and for parents not in the tree)."""
        order = np.argsort(self.ids, kind="stable")
        sorted_ids = self.ids[order]
        pos = np.searchsorted(sorted_ids, self.parents)
        pos = np.clip(pos, 0, max(len(sorted_ids) - 1, 0))
        found = (self.parents >= 0) & (len(sorted_ids) > 0)
        if len(sorted_ids):
            found &= sorted_ids[pos] == self.parents
        return np.where(found, order[pos] if len(order) else -1, -1)

    def edges(self) -> np.ndarray:
        """(E, 2) array of (child index, parent index)."""
        pi = self.parent_index
        child = np.nonzero(pi >= 0)[0]
        return np.stack([child, pi[child]], axis=1)

    def roots(self) -> np.ndarray:
        return np.nonzero(self.parent_index < 0)[0]

    def n_children(self) -> np.ndarray:
        pi = self.parent_index
        return np.bincount(pi[pi >= 0], minlength=len(self))

    def total_length(self, spacing: Spacing = (1.0, 1.0, 1.0)) -> float:
        e = self.edges()
        if len(e) == 0:
            return 0.0
        p = self.physical_zyx(spacing)
        return float(np.linalg.norm(p[e[:, 0]] - p[e[:, 1]], axis=1).sum())

    # ------------------------------------------------------------------ checks
    def _where(self, i: int) -> int | None:
        return None if self.lines is None else int(self.lines[i])

    def validate(self) -> Tree:
        """Raise :class:`InputError` (file and line) for duplicate ids, missing parents, cycles,
        NaN/inf values and negative radii. Returns self so calls chain."""
        src = self.source
        for name, arr in (("coordinate", self.xyz), ("radius", self.radius)):
            bad = ~np.isfinite(arr)
            if bad.any():
                i = int(np.nonzero(bad.reshape(len(self), -1).any(axis=1))[0][0])
                raise InputError(f"node {self.ids[i]} has a NaN/inf {name}", src, self._where(i))
        neg = np.nonzero(self.radius < 0)[0]
        if len(neg):
            i = int(neg[0])
            raise InputError(f"node {self.ids[i]} has a negative radius {self.radius[i]}", src, self._where(i))
        uniq, first, counts = np.unique(self.ids, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = uniq[counts > 1][0]
            i = int(np.nonzero(self.ids == dup)[0][1])
            raise InputError(f"duplicate node id {dup}", src, self._where(i))
        pi = self.parent_index
        missing = np.nonzero((self.parents >= 0) & (pi < 0))[0]
        if len(missing):
            i = int(missing[0])
            raise InputError(f"node {self.ids[i]} names parent {self.parents[i]}, which does not exist",
                             src, self._where(i))
        self_loop = np.nonzero(self.parents == self.ids)[0]
        if len(self_loop):
            i = int(self_loop[0])
            raise InputError(f"node {self.ids[i]} is its own parent (cycle)", src, self._where(i))
        cyc = _find_cycle_node(pi)
        if cyc is not None:
            raise InputError(f"cycle through node {self.ids[cyc]}: following parents never reaches a root",
                             src, self._where(cyc))
        return self

    def check_within(self, shape: Sequence[int], tolerance: float = 0.5) -> None:
        """Raise if any node lies outside a ZYX image of ``shape`` (by more than ``tolerance`` voxels)."""
        if len(self) == 0:
            return
        zyx = self.zyx
        hi = np.asarray(shape, dtype=np.float64) - 1 + tolerance
        out = np.nonzero(((zyx < -tolerance) | (zyx > hi)).any(axis=1))[0]
        if len(out):
            i = int(out[0])
            z, y, x = zyx[i]
            raise InputError(f"{len(out)} node(s) fall outside the image of shape (Z, Y, X) {tuple(shape)}; "
                             f"first: node {self.ids[i]} at x={x:.1f}, y={y:.1f}, z={z:.1f}",
                             self.source, self._where(i))

    # ------------------------------------------------------------------ transforms
    def copy(self) -> Tree:
        return replace(self, ids=self.ids.copy(), types=self.types.copy(), xyz=self.xyz.copy(),
                       radius=self.radius.copy(), parents=self.parents.copy(), comments=list(self.comments),
                       lines=None if self.lines is None else self.lines.copy())

    def scaled(self, xyz_scale: Sequence[float], radius_scale: float | None = None) -> Tree:
        """Multiply coordinates by (sx, sy, sz); radii by ``radius_scale`` (default: the x scale)."""
        s = np.asarray(xyz_scale, dtype=np.float64)
        out = self.copy()
        out.xyz = self.xyz * s
        out.radius = self.radius * (s[0] if radius_scale is None else radius_scale)
        return out

    def offset(self, xyz_offset: Sequence[float]) -> Tree:
        """Translate coordinates by (dx, dy, dz)."""
        out = self.copy()
        out.xyz = self.xyz + np.asarray(xyz_offset, dtype=np.float64)
        return out

    def to_voxels(self, spacing_um: Spacing) -> Tree:
        """Convert a tree in micrometres to voxels of ``spacing_um`` (z, y, x); radii in x voxels."""
        z, y, x = spacing_um
        return self.scaled((1.0 / x, 1.0 / y, 1.0 / z), radius_scale=1.0 / x)

    def to_physical(self, spacing_um: Spacing) -> Tree:
        """Convert voxel coordinates to micrometres; radii from x voxels to um."""
        z, y, x = spacing_um
        return self.scaled((x, y, z), radius_scale=x)

    def subset(self, keep: np.ndarray) -> Tree:
        """Keep nodes where ``keep`` is True; a node whose parent is dropped becomes a root."""
        keep = np.asarray(keep, dtype=bool)
        kept_ids = set(self.ids[keep].tolist())
        parents = np.array([p if p in kept_ids else -1 for p in self.parents[keep].tolist()], dtype=np.int64)
        return Tree(self.ids[keep], self.types[keep], self.xyz[keep], self.radius[keep], parents,
                    list(self.comments), self.source, None if self.lines is None else self.lines[keep])

    def reindexed(self) -> Tree:
        """Ids 1..N in depth-first order with every parent before its children (Vaa3D sorted SWC)."""
        if len(self) == 0:
            return self.copy()
        pi = self.parent_index
        order = _topological_order(pi)
        new_of_old = np.empty(len(self), np.int64)
        new_of_old[order] = np.arange(len(self))
        parents = np.where(pi[order] >= 0, new_of_old[np.maximum(pi[order], 0)] + 1, -1)
        return Tree(np.arange(1, len(self) + 1), self.types[order], self.xyz[order], self.radius[order],
                    parents, list(self.comments), self.source, None)

    def resampled(self, step: float, spacing: Spacing = (1.0, 1.0, 1.0)) -> Tree:
        """Place nodes every ``step`` (physical units of ``spacing``) along each unbranched segment.

        Roots, branch points and tips are kept; radii are interpolated along the path.
        """
        if step <= 0:
            raise ValueError(f"resampling step must be positive, got {step}")
        if len(self) == 0:
            return self.copy()
        pi = self.parent_index
        nchild = self.n_children()
        pos = self.physical_zyx(spacing)
        sp = np.asarray(spacing, dtype=np.float64)
        new_zyx: list[np.ndarray] = []
        new_r: list[np.ndarray] = []
        new_t: list[np.ndarray] = []
        new_parent: list[np.ndarray] = []
        new_index = np.full(len(self), -1, np.int64)
        children = _children_lists(pi)
        count = 0
        for root in np.nonzero(pi < 0)[0].tolist():
            new_index[root] = count
            new_zyx.append(pos[root][None])
            new_r.append(self.radius[root:root + 1])
            new_t.append(self.types[root:root + 1])
            new_parent.append(np.array([-1]))
            count += 1
            stack = [root]
            while stack:
                start = stack.pop()
                for c in children[start]:
                    path = [start, c]
                    while nchild[path[-1]] == 1:
                        path.append(children[path[-1]][0])
                    pts = pos[path]
                    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
                    nseg = max(1, int(math.ceil(arc[-1] / step - 1e-9)))
                    targets = np.linspace(0.0, arc[-1], nseg + 1)[1:]
                    new_zyx.append(np.stack([np.interp(targets, arc, pts[:, k]) for k in range(3)], axis=1))
                    new_r.append(np.interp(targets, arc, self.radius[path]))
                    new_t.append(np.full(len(targets), self.types[path[-1]]))
                    ids = np.arange(count, count + len(targets))
                    new_parent.append(np.concatenate([[new_index[start]], ids[:-1]]))
                    count += len(targets)
                    new_index[path[-1]] = count - 1
                    stack.append(path[-1])
        zyx = np.concatenate(new_zyx) / sp
        return Tree.from_points(zyx, np.concatenate(new_parent), np.concatenate(new_r),
                                np.concatenate(new_t), comments=list(self.comments))

    # ------------------------------------------------------------------ rasterisation
    def rasterize(self, shape: Sequence[int], spacing: Spacing = (1.0, 1.0, 1.0), radius: float | None = None,
                  radius_scale: float = 1.0, min_radius: float = 0.5, strict: bool = True) -> np.ndarray:
        """Boolean ZYX mask of the tubes around every edge (radius interpolated along the edge).

        Distances are physical (``spacing``), radii are in x-voxel units (``radius`` overrides the SWC
        radii). The centreline voxels are always set, so the mask of a connected tree is connected.
        ``strict`` refuses nodes outside the image; otherwise they are clipped.
        """
        shape = tuple(int(s) for s in shape)
        if strict:
            self.check_within(shape)
        if len(self) == 0:
            return np.zeros(shape, dtype=bool)
        sp = np.asarray(spacing, dtype=np.float64)
        r = np.full(len(self), float(radius)) if radius is not None else self.radius * radius_scale
        r = np.maximum(r, min_radius) * sp[2]
        pos = self.physical_zyx(spacing)
        e = self.edges()
        isolated = np.setdiff1d(np.arange(len(self)), e.ravel()) if len(e) else np.arange(len(self))
        a = np.concatenate([e[:, 0], isolated]) if len(e) else isolated
        b = np.concatenate([e[:, 1], isolated]) if len(e) else isolated
        drawn = np.zeros(shape, dtype=np.uint8)
        ones = np.ones(len(a))
        paint_capsules(drawn, pos[a], pos[b], r[a], r[b], ones, ones, sp)
        return drawn.view(bool)


# ---------------------------------------------------------------------- helpers
def _children_lists(pi: np.ndarray) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in range(len(pi))]
    for c, p in enumerate(pi.tolist()):
        if p >= 0:
            children[p].append(c)
    return children


def _topological_order(pi: np.ndarray) -> np.ndarray:
    """Depth-first order from each root; every parent precedes its children."""
    children = _children_lists(pi)
    order: list[int] = []
    for root in np.nonzero(pi < 0)[0].tolist():
        stack = [root]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(reversed(children[i]))
    return np.asarray(order, dtype=np.int64)


def _find_cycle_node(pi: np.ndarray) -> int | None:
    """A node on a parent cycle, or None. Nodes reachable from a root by child links are acyclic."""
    reached = np.zeros(len(pi), bool)
    if len(pi):
        reached[_topological_order(pi)] = True
    bad = np.nonzero(~reached)[0]
    return int(bad[0]) if len(bad) else None


# ---------------------------------------------------------------------- file I/O
def parse_swc(text: str, source: str | None = None, validate: bool = True) -> Tree:
    """Parse SWC text. Comments (lines starting with '#') are kept; extra columns are ignored."""
    comments: list[str] = []
    rows: list[list[float]] = []
    lines: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            comments.append(line[1:].strip() if line.startswith("# ") else line[1:])
            continue
        parts = line.replace(",", " ").split()
        if len(parts) < 7:
            raise InputError(f"expected 7 columns (id type x y z radius parent), found {len(parts)}",
                             source, lineno)
        try:
            rows.append([float(p) for p in parts[:7]])
        except ValueError as exc:
            raise InputError(f"non-numeric value in SWC row: {line!r}", source, lineno) from exc
        lines.append(lineno)
    if not rows:
        tree = Tree.empty(source)
        tree.comments = comments
        return tree
    arr = np.asarray(rows, dtype=np.float64)
    for col, name in ((0, "id"), (6, "parent")):
        vals = arr[:, col]
        frac = np.nonzero(~np.isfinite(vals) | (vals != np.round(vals)))[0]
        if len(frac):
            raise InputError(f"{name} must be an integer, got {vals[frac[0]]}", source, lines[int(frac[0])])
    tree = Tree(ids=arr[:, 0].astype(np.int64), types=arr[:, 1].astype(np.int64), xyz=arr[:, 2:5].copy(),
                radius=arr[:, 5].copy(), parents=np.where(arr[:, 6] < 0, -1, arr[:, 6]).astype(np.int64),
                comments=comments, source=source, lines=np.asarray(lines, dtype=np.int64))
    return tree.validate() if validate else tree


def read_swc(path: str | Path, validate: bool = True) -> Tree:
    """Read an SWC file; problems raise :class:`InputError` naming the file and line."""
    p = Path(path)
    if not p.exists():
        raise InputError("file not found", p)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", p) from exc
    return parse_swc(text, str(p), validate=validate)


def format_swc(tree: Tree, extra_comments: Iterable[str] = ()) -> str:
    out = [f"# {c}" for c in list(tree.comments) + list(extra_comments)]
    for i in range(len(tree)):
        x, y, z = tree.xyz[i]
        out.append(f"{tree.ids[i]} {tree.types[i]} {x:.4f} {y:.4f} {z:.4f} {tree.radius[i]:.4f} "
                   f"{tree.parents[i] if tree.parents[i] >= 0 else -1}")
    return "\n".join(out) + "\n"


def write_swc(path: str | Path, tree: Tree, extra_comments: Iterable[str] = ()) -> Path:
    """Write atomically; comments are kept (plus ``extra_comments``, e.g. provenance)."""
    p = Path(path)
    with atomic_path(p) as tmp:
        tmp.write_text(format_swc(tree, extra_comments))
    return p
