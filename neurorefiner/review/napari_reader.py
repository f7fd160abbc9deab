"""npe2 reader: a refine.py output folder dropped on napari opens as the review's layers (view only; the
dock widget, Plugins > neurorefiner > Review, holds the decisions). A whole-volume run's folder
(``executor=dask``) opens lazily, view only (:mod:`.whole_volume_layers`). No Qt here: napari calls it with a
path."""

from __future__ import annotations

from pathlib import Path

from neurorefiner.refine.local import TRACE


def get_reader(path: str | list[str]):  # type: ignore[no-untyped-def]
    """The reader for ``path`` if it is a folder with a refine trace, else None (napari tries others)."""
    if isinstance(path, list):
        if len(path) != 1:
            return None
        path = path[0]
    p = Path(path)
    if not (p.is_dir() and (p / TRACE).is_file()):
        return None
    return read_refine_folder


def read_refine_folder(path: str | list[str]) -> list[tuple]:
    from neurorefiner.review.folder import open_folder
    from neurorefiner.review.layers import layer_data
    from neurorefiner.review.session import ReviewSession
    from neurorefiner.review.whole_volume_layers import is_whole_volume_folder, whole_volume_layers

    folder = path[0] if isinstance(path, list) else path
    if is_whole_volume_folder(folder):
        return whole_volume_layers(folder)
    return layer_data(ReviewSession(open_folder(folder)))
