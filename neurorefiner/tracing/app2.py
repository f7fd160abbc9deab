"""APP2 neuron reconstruction (Xiao & Peng, Bioinformatics 2013; Vaa3D plugin ``neurontracing_vn2``).

Every number the paper reports is measured on an APP2 reconstruction of a mask, so this follows the
published plugin step by step, with its defaults (``conf/tracing/app2.yaml`` cites each):

1. 8-bit image (masks scaled to 0/255; other types min-max scaled, as ``scale_img_and_convert28bit``);
   background threshold ``bkg_thresh`` (``"auto"`` = mean intensity); optional 256-cube downsampling.
2. Root = the marker, or the maximum of the grey-weighted distance transform computed in XY planes
   (``fastmarching_dt_XY``).
3. Initial tree = shortest-path tree (APP2's "fast marching", a Dijkstra on the voxel grid) from the root
   over foreground voxels, step cost (GI(p) + GI(q)) / 2 * |step|, GI(i) = exp(10 (1 - (I_i - I_min) /
   (I_max - I_min))^2). Only what is connected to the root is reached (``is_break_accept`` lets a step
   enter one background voxel); ``all_components`` also traces every other component as its own tree.
   With ``is_gsdt`` the march runs on the grey-weighted distance transform instead of the image.
4. Hierarchical pruning (``happ``): segments by longest intensity-weighted path to a leaf, length filter
   (``length_thresh``), dark-node and dark-segment removal, XY radius estimation, coverage pruning
   longest-first with ``sr_ratio``, leaf and joint-leaf pruning, smoothing (window 5).
5. Resampling (``resample_swc`` with step 10, APP2's ``b_resample``) and sorting.

Deviations, each for a reason: distances are measured in units of the finest voxel axis, so anisotropic
stacks are traced with physical step lengths (APP2 ignores spacing; on isotropic data nothing changes);
segment lengths weigh each node by the largest axis extent of its step (1 on isotropic data, as APP2's
node count; the physical stride for z steps of anisotropic data); spheres in the pruning are ellipsoids
in voxels (spheres in physical units); segments removed as dark are removed with their sub-branches
(APP2 computes the removal then iterates over a stale list, so it has no effect there; we apply what its
comment says it does); radii are kept from the XY estimate of the pruning step (APP2 re-estimates them
on the full-resolution image at the end, which only matters with downsampling). Coordinates of the
output are voxel x (column), y (row), z (slice), like the gold SWCs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neurorefiner.io.swc import Tree
from neurorefiner.tracing import _kernels as K

Spacing = tuple[float, float, float]

_MARGIN = 8  # voxels kept around the foreground's bounding box
# exp(10 (1 - i/255)^2), APP2's GI lookup (fastmarching_tree.h, li = 10)
_GI = np.exp(10.0 * (1.0 - np.arange(256) / 255.0) ** 2)


def _as_array(volume_or_array: Any) -> tuple[np.ndarray, Spacing | None]:
    if hasattr(volume_or_array, "load") and hasattr(volume_or_array, "spacing"):
        return np.asarray(volume_or_array.load()), tuple(volume_or_array.spacing)  # type: ignore[return-value]
    arr = np.asarray(volume_or_array)
    return arr, None


def to_uint8(arr: np.ndarray, is_mask: bool | None = None) -> np.ndarray:
    """APP2's 8-bit input: masks -> 0/255 (else all of a 0/1 mask is background); uint8 as is; anything
    else min-max scaled to 0..255."""
    if arr.ndim != 3:
        raise ValueError(f"APP2 needs a 3D (Z, Y, X) array, got shape {arr.shape}")
    if is_mask is None:
        is_mask = arr.dtype == bool or (np.issubdtype(arr.dtype, np.integer) and arr.size > 0
                                        and int(arr.max()) <= 1 and int(arr.min()) >= 0)
    if is_mask:
        return np.where(arr > 0, np.uint8(255), np.uint8(0))
    if arr.dtype == np.uint8:
        return arr
    a = arr.astype(np.float64)
    if not np.isfinite(a).all():
        raise ValueError("APP2 input has NaN/inf values")
    lo, hi = float(a.min()), float(a.max()) if a.size else 0.0
    if hi <= lo:
        return np.zeros(arr.shape, np.uint8)
    return np.round((a - lo) / (hi - lo) * 255.0).astype(np.uint8)


def _downsample_factors(shape: Sequence[int]) -> tuple[float, float]:
    """APP2's b_256cube rule: (xy factor, z factor) bringing the largest dimension to 256."""
    nz, ny, nx = shape
    if nx <= 256 and ny <= 256 and nz <= 256:
        return 1.0, 1.0
    if (nx >= 2 * nz or ny >= 2 * nz) and nz <= 256:
        return max(nx, ny) / 256.0, 1.0
    m = max(nx, ny, nz) / 256.0
    return m, m


def app2(volume_or_array: Any, spacing: Spacing | None = None, *, is_mask: bool | None = None,
         bkg_thresh: float | str = 10, cnn_type: int = 2, marker: Sequence[float] | None = None,
         length_thresh: float = 5.0, sr_ratio: float = 1.0 / 3.0, is_gsdt: bool = False,
         is_break_accept: bool = False, all_components: bool = False, downsample: bool = False,
         resample_step: float | None = 10.0, smooth: bool = True, leaf_prune: bool = True,
         radius_thresh: float = 40.0) -> Tree:
    """Reconstruct a neuron from a ZYX image or mask; returns a :class:`Tree` in voxel coordinates.

    ``spacing`` (z, y, x) defaults to the Volume's spacing, else isotropic. ``marker`` is (x, y, z) in
    voxels. ``bkg_thresh`` is on the 8-bit scale (``"auto"``: mean intensity). ``resample_step`` (finest
    voxel units; None keeps every traced voxel) is APP2's final ``resample_swc`` step. An input with no
    foreground gives an empty tree.
    """
    arr, vol_spacing = _as_array(volume_or_array)
    sp = _checked_spacing(spacing, vol_spacing)
    if cnn_type not in (1, 2, 3):
        raise ValueError(f"cnn_type must be 1 (6-), 2 (18-) or 3 (26-neighbour), got {cnn_type}")
    if length_thresh < 0 or sr_ratio < 0:
        raise ValueError("length_thresh and sr_ratio must be >= 0")
    img = to_uint8(arr, is_mask)
    if img.size == 0:
        return Tree.empty()
    if isinstance(bkg_thresh, str) and bkg_thresh.lower() != "auto":
        raise ValueError(f"bkg_thresh must be a number or 'auto', got {bkg_thresh!r}")

    fxy = fz = 1.0
    if downsample:
        img, sp, marker, fxy, fz = _downsampled(img, sp, marker)
    if marker is not None:
        _check_marker(marker, img.shape)
    # 'auto' = mean of the (downsampled) 8-bit image, as the plugin computes it after preprocessing
    bkg = float(img.mean()) if isinstance(bkg_thresh, str) else float(bkg_thresh)
    int_range = (float(img.min()), float(img.max()))  # GI normalisation over the whole image, as APP2

    fg_any = img > bkg
    if not fg_any.any():
        tree = Tree.empty()
    else:
        tree = _trace_in_box(img, fg_any, sp, bkg, cnn_type, marker, length_thresh, sr_ratio, is_gsdt,
                             is_break_accept, all_components, smooth, leaf_prune, radius_thresh, int_range)
    if len(tree) and (fxy > 1 or fz > 1):
        sp = _upsample_tree(tree, sp, fxy, fz)
    if len(tree) and resample_step:
        tree = tree.resampled(resample_step * float(sp.min()), tuple(sp))
    tree = tree.reindexed()
    tree.comments = [f"APP2 (neurorefiner): bkg_thresh={bkg:g} cnn_type={cnn_type} length_thresh={length_thresh:g} "
                     f"sr_ratio={sr_ratio:.4g} is_gsdt={int(is_gsdt)} is_break_accept={int(is_break_accept)} "
                     f"all_components={int(all_components)} downsample={int(downsample)} "
                     f"resample_step={resample_step} spacing_zyx={tuple(float(v) for v in sp)}"]
    return tree


def _checked_spacing(spacing: Spacing | None, vol_spacing: Spacing | None) -> np.ndarray:
    """The (z, y, x) spacing to trace with: the given one, else the Volume's, else isotropic; a bad one is
    refused here, before any work, since every step length of the march depends on it."""
    sp = np.asarray(spacing if spacing is not None else (vol_spacing or (1.0, 1.0, 1.0)), np.float64)
    if sp.shape != (3,) or not np.all(np.isfinite(sp)) or np.any(sp <= 0):
        raise ValueError(f"spacing must be three positive numbers (z, y, x), got {spacing}")
    return sp


def _downsampled(img: np.ndarray, sp: np.ndarray, marker: Sequence[float] | None
                 ) -> tuple[np.ndarray, np.ndarray, Sequence[float] | None, float, float]:
    """APP2's 256-cube downsampling (``b_256cube``): the image, spacing and marker at the coarser grid, and
    the (xy, z) factors that :func:`_upsample_tree` undoes on the traced tree."""
    fxy, fz = _downsample_factors(img.shape)
    if fxy > 1 or fz > 1:
        from scipy.ndimage import zoom

        img = np.clip(zoom(img.astype(np.float32), (1 / fz, 1 / fxy, 1 / fxy), order=1), 0, 255)
        img = np.round(img).astype(np.uint8)
        sp = sp * np.array([fz, fxy, fxy])
        if marker is not None:
            marker = (marker[0] / fxy, marker[1] / fxy, marker[2] / fz)
    return img, sp, marker, fxy, fz


def _check_marker(marker: Sequence[float], shape: Sequence[int]) -> None:
    """Refuse a marker (x, y, z) that is not finite or lies outside the (downsampled) image."""
    m = np.asarray(marker, dtype=np.float64)
    if m.shape != (3,) or not np.all(np.isfinite(m)) or \
            not all(0 <= round(float(v)) < n for v, n in zip(m, shape[::-1], strict=True)):
        raise ValueError(f"marker (x, y, z) = {tuple(marker)} lies outside the image (x, y, z) "
                         f"{shape[::-1]}")


def _trace_in_box(img: np.ndarray, fg_any: np.ndarray, sp: np.ndarray, bkg: float, cnn_type: int,
                  marker: Sequence[float] | None, length_thresh: float, sr_ratio: float, is_gsdt: bool,
                  break_accept: bool, all_components: bool, smooth: bool, leaf_prune: bool,
                  radius_thresh: float, int_range: tuple[float, float]) -> Tree:
    """:func:`_trace` inside the foreground's bounding box (+ a margin for gaps and pruning spheres, and
    the marker kept inside): same result, far less memory traffic on sparse stacks. The tree comes back in
    the coordinates of the whole image."""
    lo = [max(int(np.flatnonzero(fg_any.any(axis=tuple(j for j in range(3) if j != ax))).min()) - _MARGIN, 0)
          for ax in range(3)]
    hi = [int(np.flatnonzero(fg_any.any(axis=tuple(j for j in range(3) if j != ax))).max()) + _MARGIN + 1
          for ax in range(3)]
    if marker is not None:  # keep the marker inside the crop
        mz, my, mx = (int(round(float(marker[2]))), int(round(float(marker[1]))), int(round(float(marker[0]))))
        for ax, v in enumerate((mz, my, mx)):
            lo[ax] = max(min(lo[ax], v), 0)
            hi[ax] = max(hi[ax], v + 1)
    crop = np.ascontiguousarray(img[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]])
    mk = None if marker is None else (marker[0] - lo[2], marker[1] - lo[1], marker[2] - lo[0])
    if mk is not None and not all(0 <= round(float(v)) < n for v, n in zip(mk, crop.shape[::-1], strict=True)):
        raise ValueError(f"marker (x, y, z) = {tuple(marker)} lies outside the image {img.shape[::-1]}")
    tree = _trace(crop, sp, bkg, cnn_type, mk, length_thresh, sr_ratio, is_gsdt, break_accept,
                  all_components, smooth, leaf_prune, radius_thresh, int_range)
    if len(tree):
        tree.xyz = tree.xyz + np.array([lo[2], lo[1], lo[0]], np.float64)
    return tree


def _upsample_tree(tree: Tree, sp: np.ndarray, fxy: float, fz: float) -> np.ndarray:
    """Bring a tree traced on the downsampled grid back to the input's voxels (in place: coordinates at the
    centres of the coarse voxels, radii scaled in xy); returns the input's spacing."""
    s = np.array([fxy, fxy, fz])
    tree.xyz = tree.xyz * s + np.where(s > 1, s / 2, 0)
    tree.radius = tree.radius * fxy
    return sp / np.array([fz, fxy, fxy])


def trace_mask(mask_bool: np.ndarray, spacing: Spacing = (1.0, 1.0, 1.0), **kwargs: Any) -> Tree:
    """APP2 on a binary mask (scaled to 0/255 first), with the APP2 defaults otherwise."""
    return app2(np.asarray(mask_bool) > 0, spacing, is_mask=True, **kwargs)


# ---------------------------------------------------------------------------------------------------
def _index_dtype(size: int) -> type:
    """int32 voxel indices where they fit: half the memory traffic of the full-volume arrays."""
    return np.int32 if size < 2**31 - 1 else np.int64


def _gsdt(img: np.ndarray, fg: np.ndarray, rel: np.ndarray, cnn_type: int, in_plane: bool) -> np.ndarray:
    """Grey-weighted distance transform: least sum of intensity x step length from the background."""
    shape = np.asarray(img.shape, np.int64)
    offs, step = K.neighbour_offsets(cnn_type, rel, in_plane)
    flat_fg = fg.ravel()
    cost = img.ravel()  # uint8: the kernel reads it as a number, no full-volume float copy
    fg_idx = np.flatnonzero(flat_fg)
    seeds, seed_d = K.boundary_seeds(shape, offs, step, fg_idx, flat_fg, cost)
    phi = np.full(img.size, np.inf)
    phi[~flat_fg] = 0.0
    parent = np.full(img.size, -1, _index_dtype(img.size))
    state = np.zeros(img.size, np.int8)
    if len(seeds):
        K.dijkstra_grid(shape, offs, step, cost, 0.0, 1.0, flat_fg, False, phi, parent, state, seeds, seed_d)
    phi[~np.isfinite(phi)] = 0.0  # enclosed without background contact: never reached
    if len(seeds) == 0 and len(fg_idx):  # all foreground: distance is meaningless, use intensity
        phi = cost.copy()
    return phi.reshape(img.shape)


@dataclass
class _Nodes:
    """The initial tree's nodes in march order (parents before children): voxel index (flat, into the
    cropped image), parent node (-1 for a root), ZYX position and 8-bit intensity."""

    flat: np.ndarray
    par: np.ndarray
    zyx: np.ndarray
    inten: np.ndarray


@dataclass
class _Segments:
    """APP2's hierarchical segments (``swc2topo_segs``): per segment its leaf and root node, parent segment
    (-1 at the top), intensity-weighted length and depth in the segment tree."""

    leaf: np.ndarray
    root: np.ndarray
    parent: np.ndarray
    length: np.ndarray
    depth: np.ndarray


def _trace(img: np.ndarray, sp: np.ndarray, bkg: float, cnn_type: int, marker: Sequence[float] | None,
           length_thresh: float, sr_ratio: float, is_gsdt: bool, break_accept: bool, all_components: bool,
           smooth: bool, leaf_prune: bool, radius_thresh: float,
           int_range: tuple[float, float] | None = None) -> Tree:
    """APP2's steps 2-4 on the 8-bit image (module docstring), one function per step: root, initial tree,
    hierarchical segments, length / dark / coverage pruning, leaf pruning, smoothing."""
    rel = sp / sp.min()
    fg = img > bkg
    if not fg.any():
        return Tree.empty()
    root, gsdt_xy = _root(img, fg, rel, cnn_type, marker)
    nodes = _initial_tree(img, fg, rel, cnn_type, root, gsdt_xy, is_gsdt, break_accept, all_components, int_range)
    segs = _segments(nodes, rel)
    radius, seg_alive = _prune_segments(img, nodes, segs, rel, bkg, length_thresh, sr_ratio, radius_thresh)
    if not seg_alive.any():
        return Tree.empty()
    if leaf_prune:
        _prune_leaves(img, nodes, segs, seg_alive, radius, rel)
    return _kept_tree(nodes, segs, seg_alive, radius, smooth)


def _root(img: np.ndarray, fg: np.ndarray, rel: np.ndarray, cnn_type: int, marker: Sequence[float] | None
          ) -> tuple[int, np.ndarray | None]:
    """The root voxel (flat index): the marker, else the maximum of the GSDT in XY planes
    (``fastmarching_dt_XY``); that GSDT too, when computed, since ``all_components`` seeds from it again."""
    if marker is not None:
        x, y, z = (int(round(float(v))) for v in marker)
        if not (0 <= z < img.shape[0] and 0 <= y < img.shape[1] and 0 <= x < img.shape[2]):
            raise ValueError(f"marker (x, y, z) = {tuple(marker)} lies outside the image {img.shape[::-1]}")
        return int(np.ravel_multi_index((z, y, x), img.shape)), None
    gsdt_xy = _gsdt(img, fg, rel, cnn_type, in_plane=True)
    return int(np.argmax(gsdt_xy)), gsdt_xy


def _march_cost(img: np.ndarray, fg: np.ndarray, rel: np.ndarray, cnn_type: int, is_gsdt: bool,
                int_range: tuple[float, float] | None) -> np.ndarray:
    """APP2's GI per voxel (flat): of the image through a 256-entry table (its ``givals`` lookup), or of the
    grey-weighted distance transform with ``is_gsdt``."""
    if is_gsdt:
        field = _gsdt(img, fg, rel, cnn_type, in_plane=False)
        lo, hi = float(field.min()), float(field.max())
        span = hi - lo if hi > lo else 1.0
        return _GI[np.clip(((field.ravel() - lo) / span * 255).astype(np.int64), 0, 255)]
    lo, hi = int_range or (float(img.min()), float(img.max()))
    span = hi - lo if hi > lo else 1.0
    lut = _GI[np.clip(((np.arange(256) - lo) / span * 255).astype(np.int64), 0, 255)].astype(np.float32)
    return lut[img.ravel()]


def _initial_tree(img: np.ndarray, fg: np.ndarray, rel: np.ndarray, cnn_type: int, root: int,
                  gsdt_xy: np.ndarray | None, is_gsdt: bool, break_accept: bool, all_components: bool,
                  int_range: tuple[float, float] | None) -> _Nodes:
    """The shortest-path tree from the root over the foreground (APP2's "fast marching"), and with
    ``all_components`` one more tree per component the first march did not reach."""
    shape = np.asarray(img.shape, np.int64)
    flat_fg = fg.ravel()
    cost = _march_cost(img, fg, rel, cnn_type, is_gsdt, int_range)
    offs, step = K.neighbour_offsets(cnn_type, rel)
    phi = np.full(img.size, np.inf)
    parent = np.full(img.size, -1, _index_dtype(img.size))
    state = np.zeros(img.size, np.int8)
    K.dijkstra_grid(shape, offs, step, cost, 0.5, 0.5, flat_fg, break_accept, phi, parent, state,
                    np.array([root], np.int64), np.zeros(1))
    if all_components:
        _trace_other_components(img, fg, rel, cnn_type, gsdt_xy, shape, offs, step, cost, flat_fg,
                                break_accept, phi, parent, state)
    alive = np.flatnonzero(state == 2)
    alive = alive[np.argsort(phi[alive], kind="stable")]  # parents before children
    node_of = np.full(img.size, -1, _index_dtype(img.size))
    node_of[alive] = np.arange(len(alive))
    pflat = parent[alive]
    par = np.where(pflat >= 0, node_of[np.maximum(pflat, 0)], -1).astype(np.int64)
    del node_of
    zyx = np.stack(np.unravel_index(alive, img.shape), axis=1).astype(np.int64)
    inten = img.ravel()[alive].astype(np.float64)
    return _Nodes(alive.astype(np.int64), par, zyx, inten)


def _segments(nodes: _Nodes, rel: np.ndarray) -> _Segments:
    """Hierarchical segments (``swc2topo_segs``) by the longest intensity-weighted path to a leaf."""
    par, zyx = nodes.par, nodes.zyx
    n = len(par)
    w = np.ones(n)
    has_p = par >= 0
    # APP2 counts nodes; a node weighs the largest axis extent of its step in finest-voxel units, which is
    # exactly 1 for every step on isotropic data and the physical stride for z steps of anisotropic data
    w[has_p] = (np.abs(zyx[has_p] - zyx[par[has_p]]) * rel).max(axis=1)
    td, leaf_of = K.topo_lengths(par, nodes.inten / 255.0 * w)
    leaves = np.flatnonzero(np.bincount(par[has_p], minlength=n) == 0)
    seg_id = np.full(n, -1, np.int64)
    seg_id[leaves] = np.arange(len(leaves))
    node_seg = seg_id[leaf_of]
    is_seg_root = ~has_p.copy()
    is_seg_root[has_p] = node_seg[par[has_p]] != node_seg[has_p]
    roots_nodes = np.flatnonzero(is_seg_root)
    seg_root = np.empty(len(leaves), np.int64)
    seg_root[node_seg[roots_nodes]] = roots_nodes
    seg_leaf = leaves.astype(np.int64).copy()
    seg_len = td[seg_root]
    rp = par[seg_root]
    seg_parent = np.where(rp >= 0, node_seg[np.maximum(rp, 0)], -1).astype(np.int64)
    return _Segments(seg_leaf, seg_root, seg_parent, seg_len, K.segment_depth(seg_parent))


def _prune_segments(img: np.ndarray, nodes: _Nodes, segs: _Segments, rel: np.ndarray, bkg: float,
                    length_thresh: float, sr_ratio: float, radius_thresh: float) -> tuple[np.ndarray, np.ndarray]:
    """Length filter, dark node pruning then dark segment removal, XY radius estimation, and coverage pruning
    longest first, parents before children. Returns the node radii and which segments are kept."""
    shape = np.asarray(img.shape, np.int64)
    alive_seg = segs.length >= length_thresh
    K.dark_prune(segs.leaf, segs.root, alive_seg, nodes.par, nodes.inten, bkg)
    rthr = max(radius_thresh, bkg)
    radius = K.ring_radius_xy(nodes.zyx, img.ravel(), shape, rthr, float(rel[1] / rel[2]))
    order = np.lexsort((segs.depth, -segs.length))
    order = order[alive_seg[order]]
    tmp = img.ravel().copy()
    kept = K.coverage_prune(order, segs.leaf, segs.root, segs.parent, nodes.par, nodes.flat, nodes.inten,
                            np.floor(radius), img.ravel(), tmp, shape, rel / rel[2], float(sr_ratio), 2.0)
    return radius, kept & alive_seg


def _prune_leaves(img: np.ndarray, nodes: _Nodes, segs: _Segments, seg_alive: np.ndarray, radius: np.ndarray,
                  rel: np.ndarray) -> None:
    """APP2's leaf pruning, then joint-leaf pruning (``seg_alive`` and the radii change in place)."""
    shape = np.asarray(img.shape, np.int64)
    n = len(nodes.par)
    _, childcnt = K.mark_nodes(segs.leaf, segs.root, seg_alive, nodes.par, n)
    K.leaf_prune(segs.leaf, segs.root, seg_alive, nodes.par, nodes.flat, radius, childcnt, img.ravel(), shape,
                 rel / rel[2])
    count = np.zeros(img.size, np.uint16)
    keep, childcnt = K.mark_nodes(segs.leaf, segs.root, seg_alive, nodes.par, n)
    K.paint_counts(count, keep, nodes.flat, radius, shape, rel / rel[2])
    K.joint_leaf_prune(segs.leaf, segs.root, seg_alive, nodes.par, nodes.flat, radius, childcnt, img.ravel(),
                       count, shape, rel / rel[2])


def _kept_tree(nodes: _Nodes, segs: _Segments, seg_alive: np.ndarray, radius: np.ndarray, smooth: bool) -> Tree:
    """The nodes of the kept segments as a :class:`Tree` (smoothed over a window of 5 with ``smooth``)."""
    par = nodes.par
    n = len(par)
    pos = nodes.zyx.astype(np.float64)
    rad = radius.astype(np.float64)
    if smooth:
        K.smooth_segments(segs.leaf, segs.root, seg_alive, par, pos, rad, 2)
    keep, _ = K.mark_nodes(segs.leaf, segs.root, seg_alive, par, n)
    idx = np.flatnonzero(keep)
    new = np.full(n, -1, np.int64)
    new[idx] = np.arange(len(idx))
    kp = par[idx]
    new_par = np.where(kp >= 0, new[np.maximum(kp, 0)], -1)
    return Tree.from_points(pos[idx], new_par, rad[idx] * 1.0, types=3)


def _trace_other_components(img, fg, rel, cnn_type, gsdt_xy, shape, offs, step, cost, flat_fg,
                            break_accept, phi, parent, state) -> None:
    """Trace each foreground component the first march did not reach, from its own GSDT maximum."""
    import cc3d
    from scipy import ndimage

    conn = {1: 6, 2: 18, 3: 26}[cnn_type]
    labels, nlab = cc3d.connected_components(fg, connectivity=conn, return_N=True)
    if nlab <= 1:
        return
    if gsdt_xy is None:
        gsdt_xy = _gsdt(img, fg, rel, cnn_type, in_plane=True)
    sizes = np.bincount(labels.ravel(), minlength=nlab + 1)
    index = np.argsort(-sizes[1:], kind="stable") + 1
    peaks = ndimage.maximum_position(gsdt_xy + 1.0, labels, index)
    for lab, pk in zip(index.tolist(), peaks, strict=True):
        f = int(np.ravel_multi_index(pk, img.shape))
        if state[f] == 2 or labels.flat[f] != lab:
            continue
        K.dijkstra_grid(shape, offs, step, cost, 0.5, 0.5, flat_fg, break_accept, phi, parent, state,
                        np.array([f], np.int64), np.zeros(1))


__all__ = ["app2", "trace_mask", "to_uint8"]
