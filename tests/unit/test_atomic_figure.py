"""save_figure_atomic: a plot lands whole or not at all, and its figure is closed either way (scripts that draw
many plots must not pile figures up)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from neurorefiner.io.atomic import save_figure_atomic  # noqa: E402


def test_writes_a_png_and_closes_the_figure(tmp_path: Path) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    out = save_figure_atomic(fig, tmp_path / "sub" / "plot.png", dpi=20)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
    assert [p.name for p in out.parent.iterdir()] == ["plot.png"]  # no temporary left beside it


def test_failed_render_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    fig, ax = plt.subplots()
    ax.set_title("$\\badcommand$")  # mathtext raises while the figure is drawn
    with pytest.raises(ValueError):
        save_figure_atomic(fig, target, dpi=20)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]
    assert not plt.fignum_exists(fig.number)


def test_atomic_writes_get_the_permissions_a_plain_write_would(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """mkstemp's private 0600 used to end up on every output (a refined mask others in the lab cannot open)."""
    import os

    from neurorefiner.io.atomic import write_text_atomic

    umask = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "table.md", "x")
        assert path.stat().st_mode & 0o777 == 0o644
        os.chmod(path, 0o640)
        write_text_atomic(path, "y")                       # a replaced file keeps its own mode
        assert path.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(umask)
