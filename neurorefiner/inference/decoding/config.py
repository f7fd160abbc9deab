"""The settings of the topology-aware decoding, in one dataclass: every limit the remove and join decodings
read, with why it has the value it has (chosen on development data only; see ``experiments/editor/``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neurorefiner.settings import build_settings


@dataclass
class DecodingConfig:
    """Settings of the topology-aware decoding (limits chosen on development data only).

    Args:
        threshold: foreground-probability threshold: below it the network calls a voxel background.
        margin: voxels the named place is grown by (where an edit may change the mask).
        connect_margin: voxels the named place is grown by for the search of a join path (the gap of a
            break may reach a few voxels beyond the cell that holds most of it).
        connect_reach: for ``repair at P`` when fewer than two pieces meet P grown by ``connect_margin``: the
            search room is grown one voxel at a time up to this many voxels until two pieces meet it, and the
            two nearest whose ends face each other across P are joined (a person names a break by pointing at
            its gap, and a gap that fills the cell leaves the ends beyond it). 10 = the heuristic Validator's
            ``connect_margin``, the room it accepts a bridge in; at most ``connect_margin`` = no such search.
        background_share: share of a piece's voxels the network must mark background to remove it.
        min_protrusion: an attached piece is trimmed only if some of its voxels lie this far (voxels)
            from the rest of its component: a blob stuck to a neurite, not the neurite's own flank.
        keep_skin: voxels of a trimmed piece within this distance of the rest of its component are kept:
            next to a neurite, the network's rejection and a dark image are also what the neurite's own
            faint flank looks like (0 = trim the whole piece).
        dark_level: an attached piece is trimmed only where the image's brightness (0 = the block's
            background median, 1 = its foreground median) is below this.
        max_brightness: an isolated piece is removed only if its mean brightness is below this: a true
            fragment the image shows is kept even when the network rejects it (1 = the network alone).
        min_piece: components smaller than this (voxels) are not join targets (specks).
        image_weight: weight of the image's brightness in the evidence (the network's probability has
            weight 1): evidence = max(probability, image_weight * brightness).
        cost_scale: cost of a fully dark voxel on top of the unit step cost (prefers bright paths).
        max_gap_voxels: longest bridge (new voxels along the path's centre line) a join may paint.
        max_darkness: highest mean darkness (1 - evidence, in [0, 1]) along the bridge.
        short_gap_voxels: bridges of at most this many new voxels are painted at any darkness: a gap of a
            few voxels between two pieces is where the segmenter's threshold cut a dim stretch of the
            neurite (the non-learned refiner bridges such gaps by the brightest path whatever their
            brightness), and neither the network nor the image has to vouch for it. 0 = every bridge is
            held to ``max_darkness``.
        max_joins: joins per instruction (a cut through a branch point leaves three pieces).
        line_slack: the straight line between a bridge's ends replaces the least-cost path when its mean
            darkness is at most this much above the path's.
        outside_cost: factor on the step cost beyond the named place grown by ``margin``.
        min_anchor: a component is a join target only if it continues beyond the search room (in the
            block or out of it), has at least this many voxels or is elongated (``min_elongation``): a
            blob of noise next to a neurite is not a piece of a broken neurite.
        tube_pad: voxels added to the estimated radius of the painted tube on every axis (the bridge
            runs about a voxel off the mask's centre line where the image is offset from it).
        max_radius: cap of the painted tube's radius (voxels): next to a soma the mask's thickness says
            nothing about the neurite that leaves it.
        max_sliver: pieces up to this many voxels are join targets too when the network keeps most of their
            voxels (the slivers a cut leaves in its gap; a piece the network removes is a speck). 30 = on the
            probe's 50 development breaks, with ``network_fill``, 0.72 -> 0.84 reconnected at the same false
            merges (0.10), the segmenter's 7 real breaks of OP_1-OP_2 unchanged (``experiments/editor/``). 0 =
            none.
        min_elongation: length along the main direction over the cube root of the volume from which a
            piece counts as a stretch of neurite.
        absorb_gap: after a bridge is painted, small pieces left in the gap (the slivers a break leaves:
            not join targets themselves, too small or not anchored) within this many voxels of the
            joined structure *and* of the voxels the bridge painted are attached to it by a short tube:
            they are waypoints of the bridge, and a break is only repaired when they are part of it. 0 = never
            (the default: on 20 seed-0 probe breaks, 3 voxels reconnected one more break and made one
            more false merge).
        absorb_size: largest piece (voxels) that is absorbed this way.
        cut_margin: voxels the start (tip) and end (junction) cells of ``Remove noise from A to B`` are grown by
            when a removal finds only structure continuing beyond the named place and falls through to
            cutting an attached branch (:mod:`neurorefiner.inference.branch_cut`).
        cut_max_probability: such a cut is refused when the network's mean probability on the branch is above
            this (1 = topology alone executes the cut the agents decided: the shipped network was not trained
            on attached structure).
        network_fill: a join keeps the network's own fill of the gap first (voxels of the room it marks
            foreground, where they join pieces; :func:`network_fill`), and bridges only what the network left
            apart: the network decides where the join goes, the least-cost path cleans up after it.
    """

    threshold: float = 0.5
    margin: int = 4
    connect_margin: int = 6
    connect_reach: int = 10
    background_share: float = 0.5
    min_protrusion: float = 2.0
    keep_skin: float = 2.0
    dark_level: float = 0.5
    max_brightness: float = 0.3
    min_piece: int = 4
    image_weight: float = 1.0
    cost_scale: float = 10.0
    max_gap_voxels: int = 24
    max_darkness: float = 0.6
    short_gap_voxels: int = 0
    max_joins: int = 3
    min_anchor: int = 200
    line_slack: float = 0.35
    min_elongation: float = 2.0
    tube_pad: float = 0.5
    max_radius: float = 3.0
    max_sliver: int = 30
    outside_cost: float = 1.0
    absorb_gap: int = 0
    absorb_size: int = 30
    cut_margin: int = 4
    cut_max_probability: float = 1.0
    network_fill: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.margin < 0 or self.connect_margin < 0 or self.connect_reach < 0:
            raise ValueError("margin, connect_margin and connect_reach must be >= 0")
        if not 0.0 < self.background_share <= 1.0:
            raise ValueError(f"background_share must be in (0, 1], got {self.background_share}")
        if not 0.0 <= self.image_weight <= 1.0:
            raise ValueError(f"image_weight must be in [0, 1], got {self.image_weight}")
        if self.max_gap_voxels < 1 or self.max_joins < 1 or self.min_piece < 1 or self.cost_scale < 0:
            raise ValueError("max_gap_voxels, max_joins and min_piece must be >= 1, cost_scale >= 0")
        if not 0.0 <= self.max_darkness <= 1.0:
            raise ValueError(f"max_darkness must be in [0, 1], got {self.max_darkness}")
        if self.short_gap_voxels < 0:
            raise ValueError(f"short_gap_voxels must be >= 0, got {self.short_gap_voxels}")

    @classmethod
    def build(cls, value: DecodingConfig | Mapping[str, Any] | None) -> DecodingConfig:
        return build_settings(cls, value, "decoding")
