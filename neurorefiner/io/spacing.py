"""Which voxel size a run uses, and why: an explicit spacing, else the files' calibration, else stop.

Why never a silent default: the learned Inspector looks for joins within a reach in um; a DIADEM stack
(1.0 x 0.33 x 0.33 um) read as 1 x 1 x 1 um shrinks that reach about threefold and the run proposes almost
nothing, with no sign of why. So a user's stack without a voxel size in its metadata, and no spacing given,
ends the command with one line that names the file and the fix; ``spacing=assume`` says "1 um is right" out
loud (a warning) instead. The choice and where it came from go into the run's trace header, summary and
report, so a run with another spacing never resumes the old run's decisions.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neurorefiner.errors import InputError
from neurorefiner.io.volume import DEFAULT_SPACING, Spacing, check_spacing

ASSUME = "assume"


@dataclass(frozen=True)
class SpacingChoice:
    """The voxel size (z, y, x) in um a run uses and where it came from (said in the trace, summary, report)."""

    values: Spacing
    source: str

    def as_dict(self) -> dict:
        return {"spacing": [float(v) for v in self.values], "spacing_from": self.source}


@dataclass(frozen=True)
class Spelling:
    """How the fix is typed where the user is: ``refine.py`` (Hydra) or a ``neurorefiner`` command (typer)."""

    example: str = "spacing=[1.0,0.33,0.33]"
    assume: str = "spacing=assume"


HYDRA = Spelling()
CLI = Spelling("--spacing 1.0,0.33,0.33", "--spacing assume")


def parse_given(given: Any) -> Spacing | str | None:
    """A spacing as the user typed it: None, ``"assume"``, three numbers (a list, or ``"z,y,x"`` / ``"zxyxx"`` text)."""
    if given is None:
        return None
    if isinstance(given, str):
        text = given.strip().strip("[]()")
        if text.lower() == ASSUME:
            return ASSUME
        if not text:
            return None
        given = [p for p in text.replace("x", ",").replace(" ", ",").split(",") if p]
    return check_spacing(list(given), "spacing")


def _calibrated(volumes: Sequence[Any]) -> list[tuple[Any, Spacing, str]]:
    """(volume, its spacing, its calibration) of each volume whose file gives a voxel size."""
    return [(v, tuple(float(s) for s in v.spacing), str(v.calibration)) for v in volumes
            if v is not None and getattr(v, "calibration", None)]


def _same(a: Sequence[float], b: Sequence[float]) -> bool:
    return bool(np.allclose(a, b, rtol=1e-3, atol=0.0))


def _fmt(values: Sequence[float]) -> str:
    return "(" + ", ".join(f"{float(v):g}" for v in values) + ") um"


def warn(message: str) -> None:
    """One line on stderr: the run goes on, the user sees what was chosen for them."""
    print(f"warning: {message}", file=sys.stderr, flush=True)


def resolve_spacing(given: Any, image: Any, mask: Any = None, spelling: Spelling = HYDRA) -> SpacingChoice:
    """The run's voxel size: ``given`` (``spacing=`` / ``--spacing``; ``"assume"`` for 1, 1, 1 um with a warning)
    over the files' calibration (``image``, then ``mask``: :class:`~neurorefiner.io.volume.Volume` or
    :class:`~neurorefiner.io.ome_zarr.ZarrSource`, anything with ``spacing``/``calibration``/``source`` or
    ``path``) over nothing: no spacing anywhere is an :class:`InputError` naming the image file and the fix.
    Image and mask files calibrated differently are an error too (which one is right is the user's call),
    unless a spacing is given; a given spacing that differs from a file's calibration is said in a warning."""
    choice = parse_given(given)
    volumes = [v for v in (image, mask) if v is not None]
    found = _calibrated(volumes)
    if choice == ASSUME:
        ignored = "; it ignores the calibration " + ", ".join(f"{_fmt(sp)} of {_name(v)}" for v, sp, _ in found) \
            if found else ""
        warn(f"{spelling.assume}: using an assumed voxel size of 1, 1, 1 um (z, y, x) for {_name(image)}{ignored}; "
             "distances in um (the Inspector's reach, APP2, the metrics) are only right if that is true")
        return SpacingChoice(DEFAULT_SPACING, f"assumed 1, 1, 1 um ({spelling.assume})")
    if choice is not None:
        values: Spacing = choice  # type: ignore[assignment]
        for v, sp, how in found:
            if not _same(sp, values):
                warn(f"the given spacing {_fmt(values)} overrides the calibration of {_name(v)} ({_fmt(sp)}, {how})")
        return SpacingChoice(values, "argument")
    if len(found) == 2 and not _same(found[0][1], found[1][1]):
        (a, sa, ha), (b, sb, hb) = found
        raise InputError(f"its voxel size {_fmt(sa)} ({ha}) differs from that of the mask {_name(b)}, "
                         f"{_fmt(sb)} ({hb}); give the right one, e.g. {spelling.example}", _name(a))
    if found:
        v, sp, how = found[0]
        return SpacingChoice(sp, f"{how} of {_name(v)}")
    note = next((v.metadata.get("calibration_note") for v in volumes
                 if isinstance(getattr(v, "metadata", None), dict) and v.metadata.get("calibration_note")), None)
    what = "holds no voxel size" + (f" ({note})" if note else " in its metadata (no ImageJ or OME calibration)")
    raise InputError(f"{what}; give the voxel size z,y,x in um, e.g. {spelling.example}, or {spelling.assume} "
                     "to use 1, 1, 1 um", _name(image))


def _name(volume: Any) -> str:
    return str(getattr(volume, "source", None) or getattr(volume, "path", None) or "the image")
