"""Topology-aware decoding: turn TopoRefineNet's foreground probability into the edit that was asked for.

Thresholding the network's output and confining it to the named place (the raw decoding, :mod:`.raw`) lets
the network cut a true neurite that crosses the named cell and leaves most of a break's gap open: a voxel-wise
threshold knows nothing of components. This package decides the edit per *component* instead, with the
network's probability and the image as evidence:

* **remove** (:func:`decode_remove`, :mod:`.remove`): delete only pieces that are isolated. A connected piece
  of the mask is removed when it lies inside the named place (grown by ``margin``), does not continue out of
  it, does not touch foreground outside the block (``context``), and the network marks most of it background.
  A piece attached to a longer structure is trimmed only where the network marks it background *and* the
  image is dark, the trimmed part sticks out of the rest (a protrusion, not the flank of a neurite) and
  the rest stays one piece, so a neurite crossing the cell is never cut.
* **connect / repair** (:func:`decode_connect`, :mod:`.connect`): components that meet the named place
  (:mod:`.room`) are joined along the least-cost path (``dijkstra3d``, :mod:`.bridge`) through a cost made of
  the network's probability and the image's brightness (:mod:`.evidence`), and a tube of the neighbouring
  radius is painted along it, only when the bridge stays within a length and darkness limit; otherwise the
  mask is returned unchanged with the reason. Pieces already joined outside the block (``context``,
  :mod:`.context`) are never joined again, and nothing is joined that the named place does not touch, except
  the two ends of a break whose gap fills the named cell (found within ``connect_reach``, facing each other
  across it).

Everything is numpy / scipy / cc3d / dijkstra3d on one block; no torch. The limits in
:class:`DecodingConfig` (:mod:`.config`) were chosen on development data only (DIADEM OP_1-OP_6 and the
synthetic preset; see ``experiments/editor/``). :func:`decode` (:mod:`.dispatch`) picks the decoding for an
instruction.

The package's names below are its interface: the rest of the code base imports them from here, not from the
modules that hold them, so the modules can be rearranged without touching the callers.
"""

from neurorefiner.inference.decoding.config import DecodingConfig
from neurorefiner.inference.decoding.connect import decode_connect, network_fill
from neurorefiner.inference.decoding.context import FACES, NO_OUTSIDE, Context, context_groups, outside_contact
from neurorefiner.inference.decoding.dispatch import decode, remove_decided_without_network
from neurorefiner.inference.decoding.evidence import brightness, evidence
from neurorefiner.inference.decoding.geometry import grow
from neurorefiner.inference.decoding.raw import cut_change, raw_decode
from neurorefiner.inference.decoding.remove import decode_remove
from neurorefiner.inference.decoding.result import EditResult, Join

__all__ = ["FACES", "NO_OUTSIDE", "Context", "DecodingConfig", "EditResult", "Join", "brightness", "context_groups",
           "cut_change", "decode", "decode_connect", "decode_remove", "evidence", "grow", "network_fill",
           "outside_contact", "raw_decode", "remove_decided_without_network"]
