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
