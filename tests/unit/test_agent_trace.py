"""The trace: masks survive the round trip, secrets are redacted, a torn last line is cut off."""

from __future__ import annotations

import numpy as np

from neurorefiner.agents.trace import TraceWriter, array_hash, decode_mask, encode_mask, read_trace, redact


def test_mask_round_trip_and_hash() -> None:
    m = np.random.default_rng(0).random((5, 7, 9)) > 0.7
    assert (decode_mask(encode_mask(m)) == m).all()
    assert array_hash(m) == array_hash(m.copy()) != array_hash(~m)


def test_redact_at_any_depth() -> None:
    cfg = {"agent": {"api_key": "abc", "api_key_env": "X", "model": "m", "client": {"token": "t"}}, "n": [1]}
    out = redact(cfg)
    assert out["agent"]["api_key"] == "<redacted>" and out["agent"]["client"]["token"] == "<redacted>"
    assert out["agent"]["model"] == "m" and out["n"] == [1]


def test_writer_redacts_secrets_and_reader_cuts_a_torn_line(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, secrets=["s3cr3t"]) as w:
        w.write({"type": "decision", "raw": "the key is s3cr3t"})
        w.write({"type": "round_done", "round": 0})
    with open(path, "a") as fh:
        fh.write('{"type": "deci')
    records = read_trace(path)
    assert [r["type"] for r in records] == ["decision", "round_done"]
    assert "s3cr3t" not in path.read_text() and path.read_text().endswith("}\n")


def test_decisions_are_flushed_but_only_block_round_and_run_records_are_synced(tmp_path, monkeypatch) -> None:
    """The fsync of every decision was 15 % of the learned loop on a whole-volume tile: decisions are flushed (a
    killed process loses none), the records a resume starts from are still synced."""
    import json
    import os

    from neurorefiner.agents import trace as trace_module

    synced = []
    monkeypatch.setattr(trace_module.os, "fsync", lambda fd: synced.append(fd))
    writer = trace_module.TraceWriter(tmp_path / "t.jsonl")
    for rec in ({"type": "run"}, {"type": "decision"}, {"type": "decision"}, {"type": "block_done"},
                {"type": "round_done"}):
        writer.write(rec)
    lines = (tmp_path / "t.jsonl").read_text().splitlines()   # read before close: flushed
    assert [json.loads(x)["type"] for x in lines] == ["run", "decision", "decision", "block_done", "round_done"]
    assert len(synced) == 3
    writer.close()
    assert os.path.getsize(tmp_path / "t.jsonl") > 0
