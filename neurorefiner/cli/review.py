"""Open a refine.py output folder in napari to settle what the agents escalated (needs the viewer extra)."""

from __future__ import annotations

from pathlib import Path

import typer

from neurorefiner.cli.common import friendly_errors, writes


@friendly_errors
@writes(folder="folder")  # the review's decisions are written into the run's folder
def review(folder: Path = typer.Argument(..., help="the out= folder of a refine.py run (or of make demo)"),
           image: Path | None = typer.Option(None, "--image", help="the run's image, if it moved since the run"),
           mask: Path | None = typer.Option(None, "--mask", help="the run's initial mask, if it moved")) -> None:
    from neurorefiner.errors import InputError
    from neurorefiner.review.folder import open_folder

    open_folder(folder, image, mask)          # a bad folder is one line before a window opens
    try:
        import napari

        from neurorefiner.review.napari_widget import ReviewWidget
    except ImportError as exc:
        raise InputError(f"the review needs napari with a Qt binding ({exc}); install the viewer extra: "
                         "pip install -e '.[viewer]'") from None
    viewer = napari.Viewer(title=f"neurorefiner review: {folder}")
    widget = ReviewWidget(viewer)
    viewer.window.add_dock_widget(widget, name="neurorefiner review", area="right")
    widget.load(folder, image, mask)
    napari.run()
