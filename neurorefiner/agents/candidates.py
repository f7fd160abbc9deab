"""Every edit a refiner could make to a mask, with the measurements a judge decides it from.

Three kinds, each enumerated in full rather than ranked by a rule first (the heuristic Inspector examined the
64 largest pieces only, and in a mask of thousands of fragments the pieces next to the tree are not among them):

* **join**: two pieces whose closest voxels come within ``reach_um`` micrometres (physical distance, so the
  z axis of an anisotropic stack counts at its real size), whatever their size rank; by default
  (``joins_to_tree``) one of them is the tree (the piece at the root when the root is given, else the
  largest piece). Between two loose pieces, nineteen in twenty joins on DIADEM dev were wrong and nearly all
  of them sat in one noisy stack, so no judge held out on that stack could learn them; joins to the tree are
  half right on every stack, and a chain of fragments still joins, one per round of the loop. The bridge is
  the brightest path between the two closest voxels.
* **remove**: every piece but the tree (an isolated piece: noise, or a fragment of neurite).
* **prune**: every terminal branch of the skeleton of a piece of at least ``prune_min_piece`` voxels (a branch
  from a junction to a tip, from ``skan``'s skeleton graph): a spur, or a fibre merged into the neuron that the
  paper's Inspector, which sees only isolated pieces, can never name.

Each candidate carries numeric ``features`` (what a person reads off the image: gap length, how much signal the
gap holds, whether the ends face each other, a piece's size, shape and brightness, a branch's length, thickness,
brightness and whether it continues another branch straight through its junction: the direction-continuity cue
of NeuroGPS-Tree and G-Cut) and the voxels the edit would change, so the same object is scored by the judge,
labelled from gold for training, executed for the gold-vetted ceilings, and named by the Advisor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from neurorefiner.agents.pieces import direction, elongation, end_features, extent_um, intensity_levels, piece_voxels
from neurorefiner.topology.tree_root import tree_piece

KINDS = ("join", "remove", "prune")


@dataclass(frozen=True)
class CandidateSettings:
    """How far candidates are looked for (physical units, chosen on DIADEM dev only)."""

    reach_um: float = 8.0          # longest join considered (today's heuristic: 10 xy voxels = 3.3 um on DIADEM)
    join_min_size: int = 10        # pieces under this many voxels end no join (specks are removals)
    prune_min_piece: int = 200     # branches are looked for on pieces at least this large
    prune_min_um: float = 3.0      # terminal branches shorter than this are skeleton noise, not structure
    end_radius_um: float = 3.0     # neighbourhood that tells an end (mass behind it) from a tube's side
    max_pieces: int = 20_000       # a guard on pathological masks (noise fields): the largest pieces are kept
    joins_to_tree: bool = True     # joins grow the tree (root's or largest piece) only; a chain of fragments joins
                                   # over the loop's rounds as each one becomes part of the tree

    def __post_init__(self) -> None:
        if self.reach_um <= 0 or self.prune_min_um < 0 or self.end_radius_um <= 0:
            raise ValueError("reach_um and end_radius_um must be > 0, prune_min_um >= 0")


@dataclass(frozen=True)
class Candidate:
    """One possible edit. ``anchors`` are voxel coordinates (ZYX): a join's two facing ends, a removal's most
    central voxel, a prune's tip then its junction. ``voxels`` (N x 3) are what the edit changes: the bridge's
    path for a join (before thickening), the piece or the branch's voxels for a removal or a prune."""

    kind: str
    anchors: tuple[tuple[int, int, int], ...]
    pieces: tuple[int, ...]
    features: dict[str, float]
    voxels: np.ndarray = field(compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.kind}:" + ";".join(",".join(str(v) for v in a) for a in self.anchors)


# ----------------------------------------------------------------------------------------------- helpers
def _rel(values: np.ndarray, bg: float, fg: float) -> np.ndarray:
    return (np.asarray(values, np.float64) - bg) / (fg - bg)


# ----------------------------------------------------------------------------------------------- the set
@dataclass
class CandidateSet:
    """All candidates of one mask state, with what they were computed from."""

    candidates: list[Candidate]
    labels: np.ndarray
    sizes: np.ndarray
    main: int
    spacing: tuple[float, float, float]
    levels: tuple[float, float]
    context: PieceContext | None = field(default=None, repr=False)  # what they were measured with (caches)

    def of_kind(self, kind: str) -> list[Candidate]:
        return [c for c in self.candidates if c.kind == kind]


def find_candidates(image: np.ndarray, mask: np.ndarray, spacing: Sequence[float] = (1.0, 1.0, 1.0),
                    settings: CandidateSettings | None = None, kinds: Sequence[str] = KINDS,
                    root: Sequence[float] | None = None) -> CandidateSet:
    """Every join, removal and prune candidate of ``mask`` (bool ZYX) over ``image`` (float ZYX in [0, 1]).
    The tree is the piece at ``root`` (ZYX voxels: the soma marker, the piece with the voxel nearest to it) when
    one is given, else the largest piece (:func:`tree_piece`)."""
    import cc3d

    from neurorefiner.topology.components import label_components

    s = settings or CandidateSettings()
    mask = np.asarray(mask, dtype=bool)
    image = np.asarray(image, dtype=np.float32)
    if mask.shape != image.shape or mask.ndim != 3:
        raise ValueError(f"expected a 3D image and mask of one shape, got {image.shape} and {mask.shape}")
    bad = set(kinds) - set(KINDS)
    if bad:
        raise ValueError(f"unknown candidate kind(s) {sorted(bad)}; known: {KINDS}")
    sp = tuple(float(v) for v in spacing)
    labels, n = label_components(mask)
    # sizes and boxes from one pass over the labels (a bincount of the region was a second one, with an int64
    # copy of it: 8 bytes a voxel)
    stats = cc3d.statistics(labels, no_slice_conversion=True) if n else {"voxel_counts": np.zeros(1)}
    sizes = np.asarray(stats["voxel_counts"], np.int64)
    sizes[0] = 0
    main = tree_piece(labels, sizes, sp, root)
    levels = intensity_levels(image, mask)
    out: list[Candidate] = []
    if n == 0:
        return CandidateSet(out, labels, sizes, main, sp, levels)
    boxes = stats["bounding_boxes"]
    context = PieceContext(image, mask, labels, sizes, boxes, main, np.asarray(sp), levels, s)
    if "join" in kinds:
        out.extend(_with_clutter(_joins(context), sp))
    if "remove" in kinds:
        out.extend(_removals(context))
    if "prune" in kinds:
        out.extend(_prunes(context))
    return CandidateSet(out, labels, sizes, main, sp, levels, context)


@dataclass
class PieceContext:
    """One mask state's pieces with what candidates are measured from (image, levels, settings) and caches of
    each piece's voxels and KD-tree, so a further search (:mod:`neurorefiner.agents.learned.chains`) measures
    its joins exactly as :func:`find_candidates` does, without labelling the mask again."""

    image: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    sizes: np.ndarray
    boxes: np.ndarray
    main: int
    sp: np.ndarray
    levels: tuple[float, float]
    s: CandidateSettings
    _voxels: dict[int, np.ndarray] = field(default_factory=dict)
    _trees: dict[int, object] = field(default_factory=dict)
    _signals: dict[int, float] = field(default_factory=dict)
    _main_dist: object | None = None   # the tree's KD-tree for distances only (dist_to_main)

    def voxels(self, c: int) -> np.ndarray:
        if c not in self._voxels:
            self._voxels[c] = piece_voxels(self.labels, self.boxes[c], c)
        return self._voxels[c]

    def tree(self, c: int):  # type: ignore[no-untyped-def]
        from scipy.spatial import cKDTree

        if c not in self._trees:
            self._trees[c] = cKDTree(self.voxels(c) * self.sp)
        return self._trees[c]

    def signal(self, c: int) -> float:
        """Piece ``c``'s median intensity on the background-to-foreground scale: what a join's far piece is
        compared with the tree on (:mod:`neurorefiner.agents.learned.attached_piece`); the median, not the mean,
        so a few bright voxels where a dim fibre touches the tree do not lift it."""
        if c not in self._signals:
            vox = self.voxels(c)
            self._signals[c] = float(np.median(_rel(self.image[tuple(vox.T)], *self.levels))) if len(vox) else 0.0
        return self._signals[c]

    def ranked_pieces(self, min_size: int) -> list[int]:
        order = [int(c) for c in np.argsort(-self.sizes, kind="stable") if c > 0 and self.sizes[c] >= min_size]
        return order[: self.s.max_pieces]

    def dist_to_main(self, points: np.ndarray) -> np.ndarray:
        """Physical distance from each point (voxels) to the tree (the piece at the root, else the largest).

        Asked for every voxel of every removal candidate, mostly specks far from a thin tree: a query the
        balanced KD-tree of :meth:`tree` answers slowly (about 8 us a point at 100 um), a sliding-midpoint tree
        with larger leaves about 4x faster. Same points, same distance arithmetic, so the same distances (the
        nearest point's, exact); :meth:`tree` stays as it is for the queries whose answer is a point, which
        ties could change."""
        from scipy.spatial import cKDTree

        if self._main_dist is None:
            self._main_dist = cKDTree(self.voxels(self.main) * self.sp, leafsize=64, balanced_tree=False,
                                      compact_nodes=False)
        d, _ = self._main_dist.query(np.asarray(points, float).reshape(-1, 3) * self.sp)  # type: ignore[attr-defined]
        return d


def _joins(cx: PieceContext) -> list[Candidate]:
    s, sp = cx.s, cx.sp
    pieces = cx.ranked_pieces(s.join_min_size)
    if len([c for c in pieces if c != cx.main]) < (1 if s.joins_to_tree else 2):
        return []
    b = np.asarray(cx.boxes, dtype=float)
    lo_all, hi_all = b[:, [0, 2, 4]] * sp, (b[:, [1, 3, 5]]) * sp
    arr = np.asarray(pieces)
    out: list[Candidate] = []
    # to the tree only: every other piece joins the tree (the tree is the side attached to, whatever its size:
    # the root's piece can be smaller than a fibre beside it); else every pair, the smaller joined to the larger
    sources = ([(cx.main, arr[arr != cx.main])] if s.joins_to_tree
               else [(ci, arr[i + 1:]) for i, ci in enumerate(pieces)])
    for ci, others in sources:
        if not len(others):
            continue
        sep = np.maximum(0.0, np.maximum(lo_all[ci] - hi_all[others], lo_all[others] - hi_all[ci]))
        near = others[np.linalg.norm(sep, axis=1) <= s.reach_um]
        for cj in near.tolist():
            if s.joins_to_tree:
                small, big = cj, ci
            else:
                small, big = (cj, ci) if cx.sizes[cj] <= cx.sizes[ci] else (ci, cj)
            cand = join_between(cx, small, big)
            if cand is not None:
                out.append(cand)
    return out


def join_between(cx: PieceContext, small: int, big: int) -> Candidate | None:
    """The join of piece ``small`` to piece ``big`` (the two closest voxels, bridged by the brightest path), its
    features read with ``small`` as the piece attached and ``big`` as the one it attaches to; None when the
    pieces are farther apart than ``reach_um``."""
    from neurorefiner.baselines.classical import brightest_path

    vs = cx.voxels(small)
    d, idx = cx.tree(big).query(vs * cx.sp, distance_upper_bound=cx.s.reach_um)
    k = int(np.argmin(d))
    if not np.isfinite(d[k]):
        return None
    a, b = vs[k], cx.voxels(big)[int(idx[k])]
    return _join_candidate(cx, small, big, a, b, float(d[k]), brightest_path, *cx.levels)


def _with_clutter(joins: list[Candidate], spacing: Sequence[float], radius_um: float = 10.0) -> list[Candidate]:
    """Add how crowded each join's place is: the number of other join candidates whose tree end lies within
    ``radius_um`` of this one's, and the mask's join count (log). A tree beset by loose pieces is a noisy stack
    or other fibres crossing the neuron, where a join is more often a false merge."""
    if not joins:
        return joins
    from scipy.spatial import cKDTree

    ends = np.array([c.anchors[1] for c in joins], float) * np.asarray(spacing, float)
    tree = cKDTree(ends)
    near = np.array([len(tree.query_ball_point(e, radius_um)) - 1 for e in ends])
    total = float(np.log1p(len(joins)))
    for c, k in zip(joins, near):
        c.features["joins_near"] = float(k)
        c.features["log_joins_in_mask"] = total
    return joins


def _join_candidate(cx: PieceContext, small: int, big: int, a: np.ndarray, b: np.ndarray, gap: float,
                    brightest_path, bg: float, fg: float) -> Candidate:  # type: ignore[no-untyped-def]
    sp, s = cx.sp, cx.s
    a_um, b_um = a * sp, b * sp
    face_s, align_s = end_features(cx.tree(small), cx.voxels(small) * sp, a_um, b_um, s.end_radius_um)
    face_b, align_b = end_features(cx.tree(big), cx.voxels(big) * sp, b_um, a_um, s.end_radius_um)
    path = brightest_path(cx.image, a, b, sp / sp.min())
    inner = path[1:-1] if len(path) > 2 else path
    vals = _rel(cx.image[tuple(inner.T)], bg, fg)
    steps = np.linalg.norm(np.diff(path * sp, axis=0), axis=1).sum() if len(path) > 1 else 0.0
    line = np.rint(a[None] + np.linspace(0, 1, max(int(np.ceil(gap / sp.min())), 2))[:, None] * (b - a)[None])
    straight = _rel(cx.image[tuple(line.astype(int).T)], bg, fg)
    feats = {
        "gap_um": gap,
        "gap_z_um": float(abs(a_um[0] - b_um[0])),
        "log_size_small": float(np.log1p(cx.sizes[small])),
        "log_size_big": float(np.log1p(cx.sizes[big])),
        "big_is_main": float(big == cx.main),
        "small_is_main": float(small == cx.main),
        "facing_small": face_s,
        "facing_big": face_b,
        "align_small": align_s,
        "align_big": align_b,
        "path_q25": float(np.percentile(vals, 25)),
        "path_min": float(vals.min()),
        "path_mean": float(vals.mean()),
        "straight_q25": float(np.percentile(straight, 25)),
        "path_tortuosity": float(steps / max(gap, 1e-6)),
        "small_brightness": float(_rel(cx.image[tuple(cx.voxels(small).T)], bg, fg).mean()),
        "big_brightness": float(_rel(cx.image[tuple(cx.voxels(big).T)], bg, fg).mean()),
        "small_elongation": elongation(cx.voxels(small) * sp),
        "small_dist_main_um": float(cx.dist_to_main(a)[0]) if small != cx.main else 0.0,
        "small_signal_p50": cx.signal(small),
        "big_signal_p50": cx.signal(big),
        "small_extent_um": extent_um(cx.voxels(small) * sp),
        "signal_ratio": cx.signal(small) / max(cx.signal(big), 1e-3),
    }
    anchors = (tuple(int(v) for v in a), tuple(int(v) for v in b))
    return Candidate("join", anchors, (small, big), feats, np.asarray(path, np.int64))  # type: ignore[arg-type]


def _border_share(vox: np.ndarray, shape: Sequence[int], margin: int = 2) -> float:
    sh = np.asarray(shape)
    return float(np.any((vox < margin) | (vox >= sh - margin), axis=1).mean()) if len(vox) else 0.0


def _removals(cx: PieceContext) -> list[Candidate]:
    from scipy.spatial import cKDTree

    sp = cx.sp
    bg, fg = cx.levels
    pieces = [c for c in cx.ranked_pieces(1) if c != cx.main]
    if not pieces:
        return []
    # nearest other sizeable piece, for "a fragment of something" vs "alone in the dark"
    sizeable = [c for c in cx.ranked_pieces(cx.s.join_min_size)][:2000]
    centres = {c: cx.voxels(c).mean(axis=0) * sp for c in sizeable}
    centre_tree = cKDTree(np.array([centres[c] for c in sizeable])) if len(sizeable) > 1 else None
    out = []
    for c in pieces:
        vox = cx.voxels(c)
        um = vox * sp
        centre = um.mean(axis=0)
        anchor = vox[int(np.argmin(((um - centre) ** 2).sum(axis=1)))]
        vals = _rel(cx.image[tuple(vox.T)], bg, fg)
        ext = (um.max(axis=0) - um.min(axis=0)) if len(um) else np.zeros(3)
        near_other = np.inf
        if centre_tree is not None:
            dd, ii = centre_tree.query(centre, k=min(3, len(sizeable)))
            for d_, i_ in zip(np.atleast_1d(dd), np.atleast_1d(ii)):
                if sizeable[int(i_)] not in (c, cx.main):
                    near_other = float(d_)
                    break
        feats = {
            "log_size": float(np.log1p(len(vox))),
            "elongation": elongation(um),
            "extent_um": float(ext.max()),
            "extent_z_um": float(ext[0]),
            "brightness": float(vals.mean()),
            "brightness_max": float(vals.max()),
            "dist_main_um": float(cx.dist_to_main(vox).min()),
            "dist_other_um": float(min(near_other, 1e3)),
            "border_share": _border_share(vox, cx.mask.shape),
            "log_main_size": float(np.log1p(cx.sizes[cx.main])),
        }
        out.append(Candidate("remove", (tuple(int(v) for v in anchor),), (c,), feats, vox))
    return out


def _prunes(cx: PieceContext) -> list[Candidate]:
    """Terminal branches of the skeleton of every piece of at least ``prune_min_piece`` voxels."""
    out: list[Candidate] = []
    for c in cx.ranked_pieces(cx.s.prune_min_piece):
        out.extend(_piece_prunes(cx, c))
    return out


@dataclass
class _PieceSkeleton:
    """The skeleton graph of one piece, read in the piece's box (``lo`` its origin): the image and the depth
    (distance to background, um) there, the piece's voxels, each branch's voxel path and the branch each piece
    voxel belongs to, and per branch its end nodes, type and length (``skan``'s summary), with the branches
    meeting at each node, for the continuity cue."""

    lo: np.ndarray
    img: np.ndarray
    depth: np.ndarray
    piece_vox: np.ndarray
    paths: list[np.ndarray]
    owner_of: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    btype: np.ndarray
    blen: np.ndarray
    degree: np.ndarray
    by_node: dict[int, list[int]]
    coords: np.ndarray


def _piece_prunes(cx: PieceContext, c: int) -> list[Candidate]:
    """A prune candidate for every terminal branch of piece ``c``'s skeleton at least ``prune_min_um`` long."""
    sk = _piece_skeleton(cx, c)
    if sk is None:
        return []
    out = []
    for i in range(len(sk.btype)):
        if sk.btype[i] != 1 or sk.blen[i] < cx.s.prune_min_um:
            continue
        cand = _prune_candidate(cx, c, sk, i)
        if cand is not None:
            out.append(cand)
    return out


def _piece_skeleton(cx: PieceContext, c: int) -> _PieceSkeleton | None:
    """Skeletonise piece ``c`` in its box (one voxel of padding); None when it has no skeleton graph."""
    import edt
    import skan
    from scipy.spatial import cKDTree
    from skimage.morphology import skeletonize

    from neurorefiner.topology.skeleton import skeleton_graph

    sp = cx.sp
    z0, z1, y0, y1, x0, x1 = (int(v) for v in cx.boxes[c])
    pad = 1
    lo = np.array([max(z0 - pad, 0), max(y0 - pad, 0), max(x0 - pad, 0)])
    hi = np.minimum(np.array([z1, y1, x1]) + pad + 1, cx.mask.shape)
    box = tuple(slice(int(a), int(b)) for a, b in zip(lo, hi))
    piece = cx.labels[box] == c
    graph = skeleton_graph(skeletonize(piece), sp)
    if graph is None:
        return None
    summary = skan.summarize(graph, separator="_")
    depth = edt.edt(piece, anisotropy=tuple(float(v) for v in sp))
    img = cx.image[box]
    # which skeleton branch each voxel of the piece belongs to: its nearest skeleton voxel's branch
    paths = [graph.path_coordinates(i).astype(int) for i in range(graph.n_paths)]
    skel_pts = np.concatenate(paths)
    skel_owner = np.concatenate([np.full(len(p), i) for i, p in enumerate(paths)])
    piece_vox = cx.voxels(c) - lo
    _, nearest = cKDTree(skel_pts * sp).query(piece_vox * sp)
    owner_of = skel_owner[nearest]
    # junction -> branches meeting there, for the continuity cue
    src = summary["node_id_src"].to_numpy()
    dst = summary["node_id_dst"].to_numpy()
    btype = summary["branch_type"].to_numpy()
    blen = summary["branch_distance"].to_numpy()
    degree = np.bincount(np.concatenate([src, dst]), minlength=int(max(src.max(), dst.max())) + 1)
    by_node: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(zip(src, dst)):
        by_node.setdefault(int(a), []).append(i)
        by_node.setdefault(int(b), []).append(i)
    coords = graph.coordinates.astype(int)
    return _PieceSkeleton(lo, img, depth, piece_vox, paths, owner_of, src, dst, btype, blen, degree, by_node, coords)


def _continuity(sk: _PieceSkeleton, i: int, junction: int, d_this: np.ndarray, sp: np.ndarray
                ) -> tuple[float, int, float]:
    """The direction-continuity cue of branch ``i`` at its junction: the best cosine between its direction into
    the junction and another branch's direction out of it (a fibre merged into the neuron continues straight
    through; a spur does not), how many other branches meet there and the longest of them (um)."""
    best_cont, n_others, others_len = -1.0, 0, 0.0
    for j in sk.by_node.get(junction, []):
        if j == i:
            continue
        n_others += 1
        q = sk.paths[j]
        q = q if np.array_equal(q[0], sk.coords[junction]) else q[::-1]
        q_um = q * sp
        seg = q_um[: min(len(q), 8)]
        d_other = direction(seg)
        d_other = d_other if np.dot(d_other, seg[-1] - seg[0]) >= 0 else -d_other  # leaving the junction
        best_cont = max(best_cont, float(np.dot(d_this, d_other)))
        others_len = max(others_len, float(sk.blen[j]))
    return best_cont, n_others, others_len


def _prune_candidate(cx: PieceContext, c: int, sk: _PieceSkeleton, i: int) -> Candidate | None:
    """The prune of terminal branch ``i`` of piece ``c``, with its features; None when nothing of the piece is
    left to cut once the junction's own neighbourhood is kept."""
    sp = cx.sp
    bg, fg = cx.levels
    # orient the path tip -> junction
    a, b = int(sk.src[i]), int(sk.dst[i])
    tip_node, junction = (a, b) if sk.degree[a] == 1 else (b, a)
    p = sk.paths[i]
    if not np.array_equal(p[0], sk.coords[tip_node]):
        p = p[::-1]
    p_um = p * sp
    at_j = p_um[-min(len(p), 8):]
    d_this = direction(at_j)
    d_this = d_this if np.dot(d_this, p_um[-1] - at_j[0]) >= 0 else -d_this  # pointing into the junction
    best_cont, n_others, others_len = _continuity(sk, i, junction, d_this, sp)
    thick = sk.depth[tuple(p.T)]
    longest = _longest_other(sk.by_node, junction, i, sk.blen)
    trunk = float(np.median(sk.depth[tuple(sk.paths[longest].T)])) if longest is not None else 1.0
    vals = _rel(sk.img[tuple(p.T)], bg, fg)
    vox = sk.piece_vox[sk.owner_of == i]
    # keep the junction's own neighbourhood: the cut is at the junction, not into the trunk
    if len(vox):
        jr = float(thick[-1]) + float(sp.min())
        keep = np.linalg.norm((vox - p[-1]) * sp, axis=1) <= jr
        vox = vox[~keep]
    if not len(vox):
        return None
    blen = sk.blen
    tip, junc = p[0] + sk.lo, p[-1] + sk.lo
    feats = {
        "length_um": float(blen[i]),
        "euclid_um": float(np.linalg.norm(p_um[0] - p_um[-1])),
        "tortuosity": float(blen[i] / max(np.linalg.norm(p_um[0] - p_um[-1]), 1e-6)),
        "thickness_um": float(np.median(thick)),
        "thickness_ratio": float(np.median(thick) / max(trunk, 1e-6)),
        "brightness": float(vals.mean()),
        "brightness_min": float(vals.min()),
        "continuity": best_cont,
        "n_at_junction": float(n_others),
        "other_len_um": others_len,
        "tip_border_um": float(np.min(np.minimum(tip, np.asarray(cx.mask.shape) - 1 - tip) * sp)),
        "log_piece_size": float(np.log1p(cx.sizes[c])),
        "piece_is_main": float(c == cx.main),
        "log_voxels": float(np.log1p(len(vox))),
        "share_of_piece": float(len(vox) / max(cx.sizes[c], 1)),
    }
    return Candidate("prune", (tuple(int(v) for v in tip), tuple(int(v) for v in junc)), (c,), feats, vox + sk.lo)


def _longest_other(by_node: dict[int, list[int]], junction: int, i: int, blen: np.ndarray) -> int | None:
    others = [j for j in by_node.get(junction, []) if j != i]
    return max(others, key=lambda j: blen[j]) if others else None


# ----------------------------------------------------------------------------------------------- execution
def apply_candidates(mask: np.ndarray, chosen: Sequence[Candidate]) -> np.ndarray:
    """``mask`` with the chosen edits made directly (joins as 6-thickened brightest paths, removals and prunes
    by clearing their voxels): what a perfect editor would do, used for the ceilings."""
    from neurorefiner.baselines.classical import _thicken

    out = np.asarray(mask, dtype=bool).copy()
    for c in chosen:
        if c.kind in ("remove", "prune") and len(c.voxels):
            out[tuple(np.asarray(c.voxels).T)] = False
    for c in chosen:
        if c.kind == "join" and len(c.voxels):
            out[_thicken(c.voxels, out.shape)] = True
    return out


def feature_names(kind: str) -> list[str]:
    """The feature order of a kind: the columns a judge trained now learns from. A judge stores its own columns
    and reads them back (:class:`~neurorefiner.agents.learned.judge.Judge`), so a judge trained before a column
    was added keeps working; every name of :func:`known_features` is computed for every candidate."""
    return list(_FEATURES[kind])


def known_features(kind: str) -> set[str]:
    """Every feature a candidate of ``kind`` carries (what a stored judge's columns may name)."""
    return set(_FEATURES[kind]) | set(_FORMER[kind])


_FEATURES = {
    # what the piece a join attaches adds: its extent (the traced length it brings, roughly) and its signal
    # against the tree's (a bright false piece is brighter than the neurite it is attached to)
    "join": ("gap_um", "gap_z_um", "log_size_small", "log_size_big", "big_is_main", "small_is_main", "facing_small",
             "facing_big", "align_small", "align_big", "path_q25", "path_min", "path_mean", "straight_q25",
             "path_tortuosity", "small_brightness", "big_brightness", "small_elongation", "small_dist_main_um",
             "joins_near", "log_joins_in_mask", "small_extent_um", "signal_ratio", "small_signal_p50"),
    "remove": ("log_size", "elongation", "extent_um", "extent_z_um", "brightness", "brightness_max", "dist_main_um",
               "dist_other_um", "border_share", "log_main_size"),
    "prune": ("length_um", "euclid_um", "tortuosity", "thickness_um", "thickness_ratio", "brightness",
              "brightness_min", "continuity", "n_at_junction", "other_len_um", "tip_border_um", "log_piece_size",
              "piece_is_main", "log_voxels", "share_of_piece"),
}

_FORMER: dict[str, tuple[str, ...]] = {"join": ("big_signal_p50",), "remove": (), "prune": ()}
"""Features candidates carry that no judge trains on now (read by other checks, or by older judges)."""
