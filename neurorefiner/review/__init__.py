"""A person's review of a ``refine.py`` output folder: what the agents did, what they escalated, and the
person's own decisions and paint, saved as a new mask plus ``review`` records appended to the trace.

Everything here but :mod:`neurorefiner.review.napari_widget` is free of Qt and napari, so the logic is
tested on any machine; the napari plugin (``viewer`` extra, manifest ``napari.yaml``) is a thin view over
:class:`~neurorefiner.review.session.ReviewSession`. The stage sits above ``agents`` (it reads their trace)
and below ``cli`` (``neurorefiner review DIR`` opens it).
"""
