"""Topology of masks: position words on a block's 3 x 3 x 3 grid (and, from other modules, blocks,
projections, Betti numbers). Light imports only: numpy."""

from neurorefiner.topology.positions import Position, PositionError, all_positions, locate, parse_position, region_mask

__all__ = ["Position", "PositionError", "all_positions", "locate", "parse_position", "region_mask"]
