"""Compiled hot loops of APP2 (numba): grid Dijkstra / fast marching, radius estimation and the sphere
bookkeeping of the hierarchical pruning. Arrays are flat (C order over Z, Y, X); no Python loop per voxel.

Distances are in units of the finest voxel axis (``spacing / min(spacing)``), so isotropic stacks behave
exactly like APP2 (steps of 1, sqrt 2, sqrt 3) and anisotropic ones are measured physically.
"""

from __future__ import annotations

import heapq
import math

import numba
import numpy as np

JIT = numba.njit(cache=True, nogil=True)


def neighbour_offsets(cnn_type: int, spacing_rel: np.ndarray, in_plane: bool = False
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (K, 3) and step lengths (K,) of APP2's neighbourhoods: cnn_type 1 = 6, 2 = 18, 3 = 26."""
    offs = []
    for dz in (-1, 0, 1):
        if in_plane and dz != 0:
            continue
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                n = abs(dz) + abs(dy) + abs(dx)
                if n == 0 or n > cnn_type:
                    continue
                offs.append((dz, dy, dx))
    o = np.asarray(offs, dtype=np.int64).reshape(-1, 3)
    step = np.sqrt(((o * spacing_rel[None, :]) ** 2).sum(axis=1))
    return o, step


@JIT
def dijkstra_grid(shape, offs, step, cost, a_w, b_w, passable, break_accept, phi, parent, state,
                  seeds, seed_phi):
    """Grow shortest paths on the voxel grid from ``seeds``.

    Step cost from i to j = (a_w * cost[i] + b_w * cost[j]) * step. A voxel j is entered when
    ``passable[j]``, or (``break_accept``) when the voxel it comes from is passable (one dark voxel may be
    crossed, as APP2's ``is_break_accept``). ``state``: 0 far, 1 trial, 2 alive. Returns voxels made alive.
    """
    nz, ny, nx = shape[0], shape[1], shape[2]
    sxy = ny * nx
    heap = [(0.0, np.int64(0))]
    heap.pop()
    for s in range(seeds.shape[0]):
        i = seeds[s]
        if state[i] == 2:
            continue
        if seed_phi[s] < phi[i]:
            phi[i] = seed_phi[s]
        state[i] = 1
        heapq.heappush(heap, (phi[i], np.int64(i)))
    n_alive = 0
    k_n = offs.shape[0]
    while len(heap) > 0:
        d, i = heapq.heappop(heap)
        if state[i] == 2 or d > phi[i]:
            continue
        state[i] = 2
        n_alive += 1
        z = i // sxy
        rem = i - z * sxy
        y = rem // nx
        x = rem - y * nx
        for k in range(k_n):
            zz = z + offs[k, 0]
            yy = y + offs[k, 1]
            xx = x + offs[k, 2]
            if zz < 0 or zz >= nz or yy < 0 or yy >= ny or xx < 0 or xx >= nx:
                continue
            j = zz * sxy + yy * nx + xx
            if state[j] == 2:
                continue
            if not passable[j]:
                if not break_accept or not passable[i]:
                    continue
            nd = d + (a_w * cost[i] + b_w * cost[j]) * step[k]
            if nd < phi[j]:
                phi[j] = nd
                parent[j] = i
                state[j] = 1
                heapq.heappush(heap, (nd, np.int64(j)))
    return n_alive


@JIT
def boundary_seeds(shape, offs, step, fg_idx, passable, cost):
    """Foreground voxels touching background, with their initial grey-weighted distance (GSDT seeds)."""
    nz, ny, nx = shape[0], shape[1], shape[2]
    sxy = ny * nx
    out_i = np.empty(fg_idx.shape[0], np.int64)
    out_d = np.empty(fg_idx.shape[0], np.float64)
    n = 0
    for t in range(fg_idx.shape[0]):
        i = fg_idx[t]
        z = i // sxy
        rem = i - z * sxy
        y = rem // nx
        x = rem - y * nx
        best = math.inf
        for k in range(offs.shape[0]):
            zz = z + offs[k, 0]
            yy = y + offs[k, 1]
            xx = x + offs[k, 2]
            if zz < 0 or zz >= nz or yy < 0 or yy >= ny or xx < 0 or xx >= nx:
                continue
            j = zz * sxy + yy * nx + xx
            if not passable[j] and step[k] < best:
                best = step[k]
        if best < math.inf:
            out_i[n] = i
            out_d[n] = cost[i] * best
            n += 1
    return out_i[:n], out_d[:n]


@JIT
def topo_lengths(par, contrib):
    """APP2 ``swc2topo_segs``: for every node the largest intensity-weighted length to a leaf below it and
    that leaf. Nodes are ordered parents first (index of parent < index of child)."""
    n = par.shape[0]
    td = np.zeros(n, np.float64)
    best = np.full(n, -1.0)
    best_leaf = np.full(n, -1, np.int64)
    leaf = np.empty(n, np.int64)
    for m in range(n - 1, -1, -1):
        if best_leaf[m] >= 0:
            td[m] = contrib[m] + best[m]
            leaf[m] = best_leaf[m]
        else:
            td[m] = contrib[m]
            leaf[m] = m
        p = par[m]
        if p >= 0 and td[m] > best[p]:
            best[p] = td[m]
            best_leaf[p] = leaf[m]
    return td, leaf


@JIT
def ring_radius_xy(pos, img, shape, thresh, ry_rel):
    """APP2 ``markerRadius_hanchuan_XY``: the first ring (in x-voxel units, in the node's XY plane) that
    holds a voxel <= ``thresh`` or leaves the image. ``ry_rel`` = y spacing / x spacing."""
    ny, nx = shape[1], shape[2]
    sxy = ny * nx
    out = np.empty(pos.shape[0], np.float64)
    max_r = min(nx, ny) // 2
    for t in range(pos.shape[0]):
        z = pos[t, 0]
        y = pos[t, 1]
        x = pos[t, 2]
        r_found = max_r
        for ir in range(1, max_r + 1):
            hit = False
            ylim = int(math.ceil(ir / ry_rel))
            for dy in range(-ylim, ylim + 1):
                for dx in range(-ir, ir + 1):
                    r = math.sqrt((dy * ry_rel) ** 2 + dx * dx)
                    if r > ir - 1 and r <= ir:
                        yy = y + dy
                        xx = x + dx
                        if yy < 0 or yy >= ny or xx < 0 or xx >= nx:
                            hit = True
                            break
                        if img[z * sxy + yy * nx + xx] <= thresh:
                            hit = True
                            break
                if hit:
                    break
            if hit:
                r_found = ir
                break
        out[t] = r_found
    return out


@JIT
def _sphere_extent(r, rel):
    return int(math.floor(r / rel + 1e-9))


@JIT
def sphere_voxels(f, r, shape, rel):
    """Flat indices of the in-image voxels of the sphere of radius ``r`` (in units of the finest axis;
    ``rel`` = spacing / finest spacing per axis) around flat index ``f``: the one neighbourhood every
    pruning step below walks."""
    nz, ny, nx = shape[0], shape[1], shape[2]
    sxy = ny * nx
    if r <= 0:
        return np.empty(0, np.int64)
    z1 = f // sxy
    y1 = (f - z1 * sxy) // nx
    x1 = f - z1 * sxy - y1 * nx
    ez = _sphere_extent(r, rel[0])
    ey = _sphere_extent(r, rel[1])
    ex = _sphere_extent(r, rel[2])
    out = np.empty((2 * ez + 1) * (2 * ey + 1) * (2 * ex + 1), np.int64)
    n = 0
    for kk in range(-ez, ez + 1):
        z2 = z1 + kk
        if z2 < 0 or z2 >= nz:
            continue
        for jj in range(-ey, ey + 1):
            y2 = y1 + jj
            if y2 < 0 or y2 >= ny:
                continue
            for ii in range(-ex, ex + 1):
                x2 = x1 + ii
                if x2 < 0 or x2 >= nx:
                    continue
                if (kk * rel[0]) ** 2 + (jj * rel[1]) ** 2 + (ii * rel[2]) ** 2 > r * r:
                    continue
                out[n] = z2 * sxy + y2 * nx + x2
                n += 1
    return out[:n]


@JIT
def coverage_prune(order, seg_leaf, seg_root, seg_parent, par, node_flat, node_int, radius, img, tmp,
                   shape, rel, sr_ratio, t_max):
    """APP2 hierarchical coverage pruning. Segments are visited longest first (``order``); a segment is
    kept when its parent is kept and the signal it adds outside the spheres of kept segments is at least
    ``sr_ratio`` of the signal it re-covers. ``tmp`` (a copy of the image) is zeroed under kept spheres."""
    nseg = order.shape[0]
    kept = np.zeros(seg_leaf.shape[0], np.bool_)
    for oi in range(nseg):
        s = order[oi]
        if seg_parent[s] >= 0 and not kept[seg_parent[s]]:
            continue
        sum_sig = 0.0
        sum_rdc = 0.0
        p = seg_leaf[s]
        while True:
            f = node_flat[p]
            if tmp[f] == 0:
                sum_rdc += node_int[p]
            else:
                tot = 0.0
                dele = 0.0
                for ind in sphere_voxels(f, radius[p], shape, rel):
                    tot += 1.0
                    if tmp[ind] != img[ind]:
                        dele += 1.0
                if tot > 0 and dele / tot > 0.1:
                    sum_rdc += node_int[p]
                else:
                    sum_sig += node_int[p]
            if p == seg_root[s]:
                break
            p = par[p]
        if seg_parent[s] < 0 or sum_rdc == 0.0 or (sum_sig / sum_rdc >= sr_ratio and sum_sig >= t_max):
            kept[s] = True
            # collect first (coverage decided on the state before this segment is painted)
            p = seg_leaf[s]
            npts = 0
            while True:
                npts += 1
                if p == seg_root[s]:
                    break
                p = par[p]
            pts = np.empty(npts, np.int64)
            p = seg_leaf[s]
            c = 0
            while True:
                if tmp[node_flat[p]] != 0:
                    pts[c] = p
                    c += 1
                if p == seg_root[s]:
                    break
                p = par[p]
            for q in range(c):
                paint_sphere(tmp, node_flat[pts[q]], radius[pts[q]], shape, rel, 0)
    return kept


@JIT
def paint_sphere(arr, f, r, shape, rel, value):
    for ind in sphere_voxels(f, r, shape, rel):
        arr[ind] = value


@JIT
def add_sphere(arr, f, r, shape, rel, delta, floor):
    """arr[sphere] += delta (never below ``floor`` when decrementing: APP2's ``if mask > 1: mask--``)."""
    for ind in sphere_voxels(f, r, shape, rel):
        if delta < 0:
            if arr[ind] > floor:
                arr[ind] += delta
        else:
            arr[ind] += delta


@JIT
def sphere_sums(arr_img, f, r, shape, rel, other_f, other_r, count, count_min):
    """Sum of image over the sphere (f, r); of it, the part inside sphere (other_f, other_r) (when
    other_f >= 0) or where ``count > count_min`` (when other_f < 0)."""
    ny, nx = shape[1], shape[2]
    sxy = ny * nx
    z0 = y0 = x0 = 0
    if other_f >= 0:
        z0 = other_f // sxy
        y0 = (other_f - z0 * sxy) // nx
        x0 = other_f - z0 * sxy - y0 * nx
    tot = 0.0
    part = 0.0
    for ind in sphere_voxels(f, r, shape, rel):
        v = float(arr_img[ind])
        tot += v
        if other_f >= 0:
            z2 = ind // sxy
            y2 = (ind - z2 * sxy) // nx
            x2 = ind - z2 * sxy - y2 * nx
            if ((z2 - z0) * rel[0]) ** 2 + ((y2 - y0) * rel[1]) ** 2 + ((x2 - x0) * rel[2]) ** 2 \
                    <= other_r * other_r:
                part += v
        elif count[ind] > count_min:
            part += v
    return tot, part


@JIT
def leaf_prune(seg_leaf, seg_root, seg_alive, par, node_flat, radius, childcnt, img, shape, rel):
    """APP2 leaf-node pruning: drop a tip while 90 % of its sphere's signal lies in its parent's sphere."""
    dummy = np.zeros(1, np.uint16)
    nseg = seg_leaf.shape[0]
    pruneable = np.zeros(nseg, np.bool_)
    iteration = 1
    changed = 1
    while changed > 0:
        changed = 0
        for s in range(nseg):
            if not seg_alive[s]:
                continue
            if iteration > 1 and not pruneable[s]:
                continue
            leaf = seg_leaf[s]
            if childcnt[leaf] >= 1:
                continue
            p = par[leaf]
            if p < 0:
                pruneable[s] = False
                continue
            r1 = float(int(radius[leaf]))
            r2 = float(int(radius[p]))
            tot, over = sphere_sums(img, node_flat[leaf], r1, shape, rel, node_flat[p], r2, dummy, 0)
            if tot > 0 and over / tot >= 0.9:
                changed += 1
                childcnt[p] -= 1
                if leaf != seg_root[s]:
                    seg_leaf[s] = p
                    pruneable[s] = True
                else:
                    seg_alive[s] = False
                    pruneable[s] = False
            else:
                pruneable[s] = False
        iteration += 1


@JIT
def joint_leaf_prune(seg_leaf, seg_root, seg_alive, par, node_flat, radius, childcnt, img, count, shape,
                     rel):
    """APP2 joint leaf pruning: drop a tip while 90 % of its sphere's signal is covered twice or more."""
    nseg = seg_leaf.shape[0]
    pruneable = np.zeros(nseg, np.bool_)
    iteration = 1
    changed = 1
    while changed > 0:
        changed = 0
        for s in range(nseg):
            if not seg_alive[s]:
                continue
            if iteration > 1 and not pruneable[s]:
                continue
            leaf = seg_leaf[s]
            r = float(int(radius[leaf]))
            if r <= 0:
                pruneable[s] = False
                continue
            tot, cov = sphere_sums(img, node_flat[leaf], r, shape, rel, -1, 0.0, count, 1)
            if tot > 0 and cov / tot >= 0.9:
                if childcnt[leaf] == 0:
                    changed += 1
                    p = par[leaf]
                    if p >= 0:
                        childcnt[p] -= 1
                    if leaf != seg_root[s]:
                        seg_leaf[s] = p
                        pruneable[s] = True
                    else:
                        seg_alive[s] = False
                        pruneable[s] = False
                    add_sphere(count, node_flat[leaf], r, shape, rel, -1, 1)
                else:
                    pruneable[s] = True
            else:
                pruneable[s] = False
        iteration += 1


@JIT
def smooth_segments(seg_leaf, seg_root, seg_alive, par, xyz, radius, halfwin):
    """APP2 ``smooth_curve_and_radius`` (window 5): triangular moving average along each segment, end
    points fixed, updated in place from the tip towards the root as APP2 does."""
    for s in range(seg_leaf.shape[0]):
        if not seg_alive[s]:
            continue
        n = 1
        p = seg_leaf[s]
        while p != seg_root[s]:
            p = par[p]
            n += 1
        if n < 3:
            continue
        idx = np.empty(n, np.int64)
        p = seg_leaf[s]
        for m in range(n):
            idx[m] = p
            if m < n - 1:
                p = par[p]
        for m in range(1, n - 1):
            w = 1.0 + halfwin
            acc = w * xyz[idx[m]]
            accr = w * radius[idx[m]]
            sw = w
            for j in range(1, halfwin + 1):
                k1 = min(max(m + j, 0), n - 1)
                k2 = min(max(m - j, 0), n - 1)
                w = 1.0 + halfwin - j
                acc = acc + w * xyz[idx[k1]] + w * xyz[idx[k2]]
                accr += w * radius[idx[k1]] + w * radius[idx[k2]]
                sw += 2 * w
            xyz[idx[m]] = acc / sw
            radius[idx[m]] = accr / sw


@JIT
def dark_prune(seg_leaf, seg_root, alive_seg, par, inten, bkg):
    """APP2 dark-node pruning (cut dark tips back) then dark-segment removal (single node left, mean
    intensity <= bkg, or >= 20 % dark nodes)."""
    for s in range(seg_leaf.shape[0]):
        if not alive_seg[s]:
            continue
        while seg_leaf[s] != seg_root[s] and inten[seg_leaf[s]] <= bkg:
            seg_leaf[s] = par[seg_leaf[s]]
        if seg_leaf[s] == seg_root[s]:
            alive_seg[s] = False
            continue
        tot = 0.0
        num = 0.0
        dark = 0.0
        p = seg_leaf[s]
        while True:
            tot += inten[p]
            num += 1.0
            if inten[p] <= bkg:
                dark += 1.0
            if p == seg_root[s]:
                break
            p = par[p]
        if tot / num <= bkg or dark / num >= 0.2:
            alive_seg[s] = False


@JIT
def mark_nodes(seg_leaf, seg_root, seg_alive, par, n):
    """Nodes of the live segments, and each node's number of live children."""
    keep = np.zeros(n, np.bool_)
    for s in range(seg_leaf.shape[0]):
        if not seg_alive[s]:
            continue
        p = seg_leaf[s]
        while True:
            keep[p] = True
            if p == seg_root[s]:
                break
            p = par[p]
    cnt = np.zeros(n, np.int64)
    for m in range(n):
        if keep[m] and par[m] >= 0:
            cnt[par[m]] += 1
    return keep, cnt


@JIT
def paint_counts(count, keep, node_flat, radius, shape, rel):
    for m in range(keep.shape[0]):
        if keep[m]:
            add_sphere(count, node_flat[m], float(int(radius[m])), shape, rel, 1, 0)


@JIT
def segment_depth(seg_parent):
    """Depth of every segment in the segment tree (0 for segments that start at a root)."""
    n = seg_parent.shape[0]
    depth = np.full(n, -1, np.int64)
    chain = np.empty(n, np.int64)
    for s in range(n):
        top = 0
        t = s
        while t >= 0 and depth[t] < 0:
            chain[top] = t
            top += 1
            t = seg_parent[t]
        d = depth[t] if t >= 0 else -1
        for c in range(top - 1, -1, -1):
            d += 1
            depth[chain[c]] = d
    return depth
