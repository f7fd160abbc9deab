"""The review as napari layer data, without importing napari: ``(data, kwargs, layer_type)`` tuples, the
form npe2 readers return and ``viewer._add_layer_from_data`` takes. Kept free of Qt so it is tested
anywhere and the widget only hands the tuples over.

Layers, bottom to top: the image, the initial and refined masks, the agents' edits that are kept (green =
added, magenta = removed) and those that are not (hidden), the SWC as line segments, the escalated
defects as points labelled with their block, and an empty ``correction`` layer to paint in (1 = add,
2 = remove). Everything is in voxels scaled by the run's spacing, so the view is in um.
"""

from __future__ import annotations

import numpy as np

from neurorefiner.refine.report_marks import ADDED, ESCALATED, REMOVED
from neurorefiner.review.records import ADD, REMOVE
from neurorefiner.review.session import ReviewSession

LayerData = tuple[object, dict, str]
CORRECTION = "correction (1 add, 2 remove)"
EDITS = "edits kept (green added, magenta removed)"
DROPPED = "edits not kept"
ESCALATIONS = "escalated defects"


def labels_colours(colours: dict[int, str]) -> dict:
    return {"colormap": {None: "transparent", 0: "transparent", **colours}}


def swc_segments(session: ReviewSession) -> np.ndarray:
    """The SWC's parent-child edges as (N, 2, 3) ZYX voxel segments (start, end)."""
    tree = session.folder.tree
    if tree is None or len(tree) == 0:
        return np.zeros((0, 2, 3))
    pi = tree.parent_index
    child = np.nonzero(pi >= 0)[0]
    return np.stack([tree.zyx[pi[child]], tree.zyx[child]], axis=1)


def layer_data(session: ReviewSession) -> list[LayerData]:
    f = session.folder
    scale = tuple(f.spacing)
    layers: list[LayerData] = [
        (f.image, {"name": "image", "scale": scale, "colormap": "gray", "blending": "additive"}, "image"),
        (f.initial.astype(np.uint8), {"name": "initial mask", "scale": scale, "opacity": 0.35, "visible": False,
                                      **labels_colours({1: "#ffd000"})}, "labels"),
        (f.refined.astype(np.uint8), {"name": "refined mask", "scale": scale, "opacity": 0.35,
                                      **labels_colours({1: "#3c8cff"})}, "labels"),
        (session.edits_layer(kept=True), {"name": EDITS, "scale": scale, "opacity": 0.9,
                                          **labels_colours({ADD: ADDED, REMOVE: REMOVED})}, "labels"),
        (session.edits_layer(kept=False), {"name": DROPPED, "scale": scale, "opacity": 0.6, "visible": False,
                                           **labels_colours({ADD: ADDED, REMOVE: REMOVED})}, "labels"),
    ]
    segments = swc_segments(session)
    if len(segments):
        vectors = np.stack([segments[:, 0], segments[:, 1] - segments[:, 0]], axis=1)
        layers.append((vectors, {"name": "SWC (refined)", "scale": scale, "edge_color": "orange", "edge_width": 0.6,
                                 "vector_style": "line"}, "vectors"))
    centres = np.array([e.centre for e in session.escalations], float).reshape(-1, 3)
    labels = [f"b{e.block} {e.kind}" for e in session.escalations]
    layers.append((centres, {"name": ESCALATIONS, "scale": scale, "size": 8, "symbol": "x",
                             "face_color": ESCALATED, "border_color": ESCALATED, "features": {"label": labels},
                             "text": {"string": "{label}", "color": ESCALATED, "size": 9}},
                   "points"))
    layers.append((session.correction.copy(), {"name": CORRECTION, "scale": scale, "opacity": 0.8,
                                               **labels_colours({ADD: "#00ff66", REMOVE: "#ff2020"})}, "labels"))
    return layers
