"""The connect / repair decoding: keep the network's own fill where it joins pieces, then join what it left
apart along least-cost bridges within the limits (:mod:`~neurorefiner.inference.decoding.bridge`), attach the
slivers left in the gap when asked, and say in one sentence what was done or why nothing was."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import ndimage as ndi

from neurorefiner.inference.decoding.bridge import bridge_path, cheapest_bridge, over_limits, paint_tube, step_cost
from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.context import Context
from neurorefiner.inference.decoding.evidence import evidence
from neurorefiner.inference.decoding.geometry import grow, label_components, straight_line, tube
from neurorefiner.inference.decoding.result import EditResult, Join
from neurorefiner.inference.decoding.room import Room, connect_room
from neurorefiner.topology.instructions import Instruction


def _absorb_slivers(out: np.ndarray, before: np.ndarray, box: tuple[slice, ...], search: np.ndarray,
                    joins: Sequence[Join], cfg: DecodingConfig) -> int:
    """Attach (in ``out``) the small pieces a break left in its gap to the bridged structure: pieces of at
    most ``absorb_size`` voxels inside the search room, within ``absorb_gap`` voxels of the component the
    bridges joined and of the voxels they painted, each by a straight tube (the bridges' radius) to the
    nearest voxel of that component. How many were attached."""
    o = out[box]
    painted = o & ~before[box]
    labels, n = label_components(o)
    joined = np.unique(labels[painted])
    joined = joined[joined > 0]
    if n < 2 or not len(joined):
        return 0
    main = np.isin(labels, joined)
    size = np.bincount(labels.ravel(), minlength=n + 1)
    dist, nearest = ndi.distance_transform_edt(~main, return_indices=True)
    near_bridge = ndi.distance_transform_edt(~painted) <= cfg.absorb_gap
    done = [j for j in joins if j.painted]
    radii = tuple(min(j.radii[a] for j in done) + cfg.tube_pad for a in range(3))
    attached = 0
    objects = ndi.find_objects(labels)  # each piece is read in its own box, not by a pass over the room
    for k in range(1, n + 1):
        if k in joined or size[k] > cfg.absorb_size:
            continue
        sl = objects[k - 1]
        piece = labels[sl] == k
        if not search[sl][piece].all() or not near_bridge[sl][piece].any():
            continue
        at = np.argwhere(piece) + np.array([s.start for s in sl])
        d = dist[tuple(at.T)]
        i = int(np.argmin(d))
        if d[i] > cfg.absorb_gap + 1:
            continue
        src = tuple(int(c) for c in at[i])
        dst = tuple(int(nearest[a][src]) for a in range(3))
        line = straight_line(src, dst, o.shape)
        new = line & ~o
        if new.any():
            o[(tube(new, radii) & search) | new] = True
        attached += 1
    return attached


def _connect_reason(result: EditResult, joins: Sequence[Join], absorbed: int, filled: int,
                    cfg: DecodingConfig) -> str:
    """The join's outcome in one sentence: what was kept and painted, or which limit the last bridge broke."""
    done = [j for j in joins if j.painted]
    if done or filled:
        parts = []
        if filled:
            parts.append(f"kept the network's fill where it joins pieces ({filled} voxels)")
        if done:
            parts.append(f"joined {len(done)} gap(s) of " + ", ".join(str(j.length) for j in done)
                         + " voxels")
        return ("; ".join(parts) + f"; painted {result.added_voxels} voxels"
                + (f"; attached {absorbed} piece(s) left in the gap" if absorbed else ""))
    if not joins:
        return "nothing to connect: no pair of components at the two named places"
    j = joins[-1]
    over = []
    if j.length > cfg.max_gap_voxels:
        over.append(f"gap {j.length} voxels > {cfg.max_gap_voxels}")
    if j.darkness > cfg.max_darkness:
        over.append(f"darkness {j.darkness:.2f} > {cfg.max_darkness} over {j.length} voxels")
    return "left unchanged: the best bridge is over the limits (" + ", ".join(over) + ")"


def network_fill(mask: np.ndarray, prob: np.ndarray, room: Room, cfg: DecodingConfig) -> np.ndarray:
    """The network's own fill of the gap: voxels of the room it marks foreground (``prob >= threshold``) that
    are not in the mask, kept per connected piece of fill only where the piece joins mask pieces of different
    groups (a fill that joins nothing is not a repair; pieces joined outside the block are one group) and
    holds no more voxels than the longest bridge the decoding may paint at its widest
    (``max_gap_voxels`` x (2 ``max_radius`` + 1)^2: a network that marks the whole room is no repair either).
    Returns the voxels to add (block shape)."""
    fill = (np.asarray(prob) >= cfg.threshold) & room.search & ~mask
    if not fill.any():
        return fill
    both, n = label_components(mask | fill)
    fg = mask & (room.labels > 0)
    pairs = np.unique(np.stack([both[fg], room.groups[room.labels[fg]]]), axis=1)
    joins = np.bincount(pairs[0], minlength=n + 1) >= 2
    size = np.bincount(both[fill], minlength=n + 1)
    joins &= size <= cfg.max_gap_voxels * (2 * cfg.max_radius + 1) ** 2
    return fill & joins[both]


def decode_connect(mask: np.ndarray, prob: np.ndarray, image: np.ndarray | None, instruction: Instruction,
                   config: DecodingConfig | Mapping[str, Any] | None = None,
                   context: Context = None) -> EditResult:
    """Join the components that meet the named place (module docstring).

    With ``network_fill`` on, the network's own fill of the room is kept first where it joins pieces
    (:func:`network_fill`): the network decides, the decoding only cleans up what joins nothing. The pieces
    left apart are then joined along least-cost paths through the evidence (:func:`step_cost`), cheapest
    first, up to ``max_joins`` times: for ``repair at P`` any two components meeting P (grown by
    ``connect_margin``; when fewer than two meet it, the two nearest pieces facing each other across P within
    ``connect_reach``), for ``connect from A to B`` one component meeting A and the other B. Each bridge
    must stay within ``max_gap_voxels`` and ``max_darkness``.
    """
    cfg = DecodingConfig.build(config)
    mask = np.asarray(mask, dtype=bool)
    room = connect_room(mask, instruction, cfg, context, prob)
    if len(room.cand_groups) < 2:
        what = "one" if room.candidates else "no"
        return EditResult(mask.copy(), False, f"nothing to connect: {what} component at the named place"
                          + (" (the pieces are joined outside the block)" if len(room.candidates) > 1 else ""),
                          op=instruction.op)
    out = mask.copy()
    filled = 0
    if cfg.network_fill:
        fill = network_fill(mask, prob, room, cfg)
        filled = int(fill.sum())
        if filled:
            out |= fill
            room = connect_room(out, instruction, cfg, context, prob)
    box = room.box
    ev = evidence(prob, image, mask, cfg.image_weight)[box]
    search = room.search[box]
    step = step_cost(ev, grow(instruction.region(mask.shape), cfg.margin)[box], search, cfg)
    group_of = room.groups[room.labels[box]]  # group id per voxel of the box (0 = background)
    ob = out[box]
    joins: list[Join] = []
    cand, starts, ends = room.cand_groups, set(room.start_groups), set(room.end_groups)
    for _ in range(cfg.max_joins):
        best = cheapest_bridge(step, group_of, search, starts, ends, cand)
        if best is None:
            break
        _, g, idx, dist, field_ = best
        path, origin = bridge_path(ob, ev, step, group_of, g, idx, dist, field_, cfg)
        new = path & ~ob
        join = Join(int(new.sum()), float(np.mean(1.0 - ev[new])) if new.any() else 0.0)
        joins.append(join)
        if over_limits(join, cfg):
            break
        tg = int(group_of[idx])
        paint_tube(ob, path, new, group_of, g, tg, origin, idx, search, join, cfg)
        group_of[group_of == tg] = g  # the two groups are one now
        for groups in (cand, starts, ends):
            groups.discard(tg)
        if instruction.op == "repair":
            starts.add(g)
            ends.add(g)
    absorbed = 0
    if any(j.painted for j in joins) and cfg.absorb_gap > 0:
        absorbed = _absorb_slivers(out, mask, box, search, joins, cfg)
    result = EditResult.from_masks(mask, out, "", op=instruction.op, joins=joins)
    result.reason = _connect_reason(result, joins, absorbed, filled, cfg)
    result.declined = bool(joins) and not result.changed  # a bridge was found, and it broke a limit
    return result
