"""The napari side of the review: a dock widget over a :class:`~neurorefiner.review.session.ReviewSession`.

Needs the ``viewer`` extra (napari with a Qt binding); nothing else in the package imports this module.
The widget opens a refine folder into layers (:mod:`.layers`), lists the escalated defects (a click centres
the view on one, zoomed to its block, and shows the agents' tries), lists every edit with the agents' verdict and
the person's (accept / reject / back to the agents'), and saves the reviewed mask with the ``correction`` layer's paint.
All the decisions live in the session; the widget only shows them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from qtpy.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from neurorefiner.errors import InputError
from neurorefiner.review.folder import open_folder
from neurorefiner.review.history import describe_try
from neurorefiner.review.layers import CORRECTION, DROPPED, EDITS, layer_data
from neurorefiner.review.session import ReviewSession

ZOOM_CONTEXT = 2.0   # a clicked block (or edit window) spans 1/ZOOM_CONTEXT of the view: the defect and its context


class ReviewWidget(QWidget):
    """Dock widget: ``load(folder)``, then the escalation list, the edit list, the buttons and the save."""

    def __init__(self, napari_viewer) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.viewer = napari_viewer
        self.session: ReviewSession | None = None
        self.status = QLabel("open the out= folder of a refine.py run")
        self.status.setWordWrap(True)
        open_button = QPushButton("Open refine folder...")
        open_button.clicked.connect(self._choose_folder)
        self.escalation_list = QListWidget()
        self.escalation_list.currentRowChanged.connect(self.focus_escalation)
        self.tries_text = QTextBrowser()
        self.edit_list = QListWidget()
        self.edit_list.currentRowChanged.connect(self.focus_edit)
        buttons = QHBoxLayout()
        self.accept_button, self.reject_button, self.reset_button = (
            QPushButton("Accept edit"), QPushButton("Reject edit"), QPushButton("Agents' verdict"))
        self.accept_button.clicked.connect(lambda: self.decide("accept"))
        self.reject_button.clicked.connect(lambda: self.decide("reject"))
        self.reset_button.clicked.connect(lambda: self.decide(None))
        for b in (self.accept_button, self.reject_button, self.reset_button):
            buttons.addWidget(b)
        self.save_button = QPushButton("Save reviewed mask")
        self.save_button.clicked.connect(self.save)
        layout = QVBoxLayout()
        for w in (open_button, self.status, QLabel("Escalated defects (click to go there)"), self.escalation_list,
                  QLabel("The agents' tries"), self.tries_text, QLabel("Edits (agents' verdict -> yours)"),
                  self.edit_list):
            layout.addWidget(w)
        layout.addLayout(buttons)
        layout.addWidget(QLabel(f"Paint in '{CORRECTION}': 1 adds voxels, 2 removes them."))
        layout.addWidget(self.save_button)
        self.setLayout(layout)

    # ------------------------------------------------------------------ loading
    def _choose_folder(self) -> None:  # pragma: no cover - a file dialog needs a person
        path = QFileDialog.getExistingDirectory(self, "refine.py output folder")
        if path:
            self.load(path)

    def load(self, folder: str | Path, image: str | Path | None = None, mask: str | Path | None = None) -> bool:
        """Open ``folder``; a bad folder is shown in the status line (and returned False), never raised."""
        try:
            self.session = ReviewSession(open_folder(folder, image, mask))
        except InputError as exc:
            self.status.setText(f"error: {exc}")
            return False
        for data, kwargs, kind in layer_data(self.session):
            if kwargs["name"] in self.viewer.layers:
                self.viewer.layers.remove(kwargs["name"])
            getattr(self.viewer, f"add_{kind}")(data, **kwargs)
        self.viewer.layers.selection.active = self.viewer.layers[CORRECTION]
        s = self.session
        self.status.setText(f"{s.folder.path}: {len(s.tries)} edit tries, "
                            f"{sum(t.accepted for t in s.tries)} accepted by the agents, "
                            f"{len(s.escalations)} escalated defect(s)")
        self.escalation_list.clear()
        self.escalation_list.addItems([e.label() for e in s.escalations])
        self._fill_edits()
        return True

    def _fill_edits(self) -> None:
        s = self.session
        assert s is not None
        row = self.edit_list.currentRow()
        self.edit_list.clear()
        for t in s.tries:
            mine = s.decisions.get(t.id)
            self.edit_list.addItem(f"{t.id}: {t.instruction} (+{t.added}/-{t.removed}) agents: "
                                   f"{'accept' if t.accepted else 'reject'}" + (f" -> you: {mine}" if mine else ""))
        if 0 <= row < len(s.tries):
            self.edit_list.setCurrentRow(row)

    # ------------------------------------------------------------------ navigation
    def centre_on(self, zyx: tuple[float, float, float], span_yx: tuple[int, int] | None = None) -> None:
        """Put voxel ``zyx`` in the middle of the view, on its z slice, and zoom so that ``span_yx`` voxels (the
        block or the editor's window) fill about half the view: the defect and its surroundings at a glance."""
        assert self.session is not None
        spacing = self.session.folder.spacing
        world = [float(c) * s for c, s in zip(zyx, spacing)]
        self.viewer.dims.set_point(0, world[0])
        if span_yx is not None:
            span = np.maximum(np.asarray(span_yx, float) * np.asarray(spacing[1:], float), 1e-6)  # um, y and x
            self.viewer.camera.zoom = float(np.min(canvas_size(self.viewer) / (ZOOM_CONTEXT * span)))
        self.viewer.camera.center = tuple(world)

    def focus_escalation(self, row: int) -> None:
        if self.session is None or not 0 <= row < len(self.session.escalations):
            return
        e = self.session.escalations[row]
        block = next((b for b in self.session.folder.blocks if b.id == e.block), None)
        self.centre_on(e.centre, block.shape[1:] if block is not None else None)
        lines = [f"<b>{e.label()}</b>", f"located by {e.located_by}; defect key {e.key}; escalated in round "
                 f"{e.round + 1}"]
        lines += [describe_try(t, self.session.folder.blocks) for t in e.tries] + e.notes
        self.tries_text.setHtml("<br>".join(lines))

    def focus_edit(self, row: int) -> None:
        if self.session is None or not 0 <= row < len(self.session.tries):
            return
        t = self.session.tries[row]
        self.centre_on(t.centre, tuple(sl.stop - sl.start for sl in t.window[1:]))
        self.tries_text.setHtml(describe_try(t, self.session.folder.blocks) +
                                (f"<br>advisor: {t.advice}" if t.advice else ""))

    # ------------------------------------------------------------------ decisions
    def decide(self, decision: str | None) -> None:
        row = self.edit_list.currentRow()
        if self.session is None or not 0 <= row < len(self.session.tries):
            self.status.setText("select an edit first")
            return
        self.session.decide(self.session.tries[row].id, decision)
        self.viewer.layers[EDITS].data = self.session.edits_layer(kept=True)
        self.viewer.layers[DROPPED].data = self.session.edits_layer(kept=False)
        self._fill_edits()

    def save(self) -> Path | None:
        if self.session is None:
            self.status.setText("open a refine folder first")
            return None
        self.session.paint(np.asarray(self.viewer.layers[CORRECTION].data))
        try:
            path = self.session.save()
        except InputError as exc:
            self.status.setText(f"error: {exc}")
            return None
        self.status.setText(f"saved {path} and a review record in trace.jsonl; refine on with: python refine.py "
                            f"image={self.session.folder.sources['image']} mask={path} out=NEW_FOLDER")
        return path


def canvas_size(viewer) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The canvas's (height, width) in screen pixels: ``viewer.canvas.size`` (napari >= 0.6), else the private
    field older napari keeps it in."""
    canvas = getattr(viewer, "canvas", None)
    return np.asarray(canvas.size if canvas is not None else viewer._canvas_size, float)


def review_widget(napari_viewer) -> ReviewWidget:  # type: ignore[no-untyped-def]
    """npe2 widget command: the dock widget for the viewer napari passes in."""
    return ReviewWidget(napari_viewer)
