"""The candidate-recall table is stamped with the commit read before it writes its own CSV: rewriting a tracked
table must not mark its own run as computed on a dirty tree."""

from __future__ import annotations

from pathlib import Path

from neurorefiner.studies import candidate_recall as study


def test_the_commit_is_read_before_the_csv_is_written(tmp_path: Path, monkeypatch) -> None:
    written: list[str] = []
    monkeypatch.setattr("neurorefiner.paths.git_commit", lambda *a, **k: "abc1234+dirty" if written else "abc1234")
    import neurorefiner.evaluation.tables as tables  # the writer every table goes through

    original = tables.write_text_atomic

    def recording(path, text):  # type: ignore[no-untyped-def]
        written.append(str(path))
        return original(path, text)

    monkeypatch.setattr(tables, "write_text_atomic", recording)
    md = study.candidate_recall("tiny", "val", ["gold"], tmp_path, limit=1, augment=1)
    assert "at commit `abc1234`" in Path(md).read_text()
    assert len(written) == 2
