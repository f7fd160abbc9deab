"""The decision trace: one JSON line per decision, written as it happens.

Each line is flushed and synced before the loop moves on, so after a crash (even ``kill -9``) the file
holds every decision taken so far, at worst with a torn last line, which :func:`read_trace` drops and
cuts off. Edits carry their window masks (bit-packed, zlib, base64), so a trace alone is enough to
rebuild the result (resume), to re-run the decisions (replay) and to draw the report.

Nothing secret is ever written: :func:`redact` removes any config key that names a key, token,
secret or password before the run's header is written.

What a model was asked travels with its decision (``requests``: the rendered prompt, the pictures and the
answer verbatim). Prompts and pictures are large and repeat (the same overview every try), so the writer
stores each once, named by its content hash, in a ``requests/`` folder beside the trace, and the line keeps
the file names (relative to the trace's folder); :func:`load_requests` reads them back, e.g. to ask the same
questions of another model (:mod:`neurorefiner.agents.vlm.audit`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

TRACE_VERSION = 1
_SECRET_WORDS = ("key", "token", "secret", "password")


def array_hash(*arrays: np.ndarray) -> str:
    """A short content hash of arrays (shape, dtype and bytes), for input hashes in the trace."""
    h = hashlib.sha1()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.packbits(a).tobytes() if a.dtype == bool else a.tobytes())
    return h.hexdigest()[:16]


def encode_mask(mask: np.ndarray) -> dict:
    m = np.asarray(mask, dtype=bool)
    data = zlib.compress(np.packbits(m.ravel()).tobytes(), 6)
    return {"shape": list(m.shape), "bits": base64.b64encode(data).decode("ascii")}


def decode_mask(d: Mapping[str, Any]) -> np.ndarray:
    shape = tuple(int(s) for s in d["shape"])
    bits = np.frombuffer(zlib.decompress(base64.b64decode(d["bits"])), dtype=np.uint8)
    return np.unpackbits(bits, count=int(np.prod(shape))).astype(bool).reshape(shape)


def redact(obj: Any) -> Any:
    """A copy of a config-like mapping without secret-looking keys (at any depth)."""
    if isinstance(obj, Mapping):
        return {str(k): ("<redacted>" if any(w in str(k).lower() for w in _SECRET_WORDS) else redact(v))
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    return obj


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray)):  # a picture that reached a writer without a requests folder
        return "sha256:" + hashlib.sha256(bytes(obj)).hexdigest()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


REQUESTS_DIR = "requests"


UNSYNCED = ("decision", "failed_call")
"""Records written to the OS but not forced to disk one by one: a run makes thousands of them and the fsync of each
was 15 % of the learned loop on a whole-volume tile (docs/whole_volume.md). A killed process loses none of them
(flushed); a machine that loses power may lose the decisions since the last block, round or run record, each
of which is still synced, and a resume then redoes that block."""


class TraceWriter:
    """Appends records to a JSONL file; safe to share between the threads of one run. Prompts and pictures
    of ``requests`` go to ``requests_dir`` (default ``requests/`` beside the trace), once per content."""

    def __init__(self, path: str | Path, secrets: Iterable[str] = (), requests_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.requests_dir = Path(requests_dir) if requests_dir is not None else self.path.parent / REQUESTS_DIR
        self._lock = threading.Lock()
        self._secrets = [s for s in secrets if s]
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def _redacted(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "<redacted>")
        return text

    def store(self, data: bytes, suffix: str) -> str:
        """Keep ``data`` once under its content hash; its path relative to the trace's folder."""
        name = hashlib.sha256(data).hexdigest()[:32] + suffix
        target = self.requests_dir / name
        if not target.exists():
            self.requests_dir.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return os.path.relpath(target, self.path.parent)

    def _externalise(self, request: Mapping[str, Any]) -> dict:
        out = dict(request)
        if isinstance(out.get("prompt"), str):
            out["prompt"] = self.store(self._redacted(out["prompt"]).encode("utf-8"), ".txt")
        out["images"] = [self.store(bytes(im), ".png") if isinstance(im, (bytes, bytearray)) else im
                         for im in out.get("images", [])]
        return out

    def write(self, record: Mapping[str, Any]) -> None:
        if record.get("requests"):
            record = {**record, "requests": [self._externalise(r) for r in record["requests"]]}
        line = self._redacted(json.dumps(record, default=_jsonable, separators=(",", ":")))
        # (belt and braces: a key echoed back by a server never reaches the file)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()   # a killed run leaves every record written so far (the OS holds them)
            if record.get("type") not in UNSYNCED:
                os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: str | Path, repair: bool = True) -> list[dict]:
    """Every complete record of a trace; a torn last line (a crash mid-write) is dropped and, with
    ``repair``, cut from the file so that appending continues on a clean line."""
    p = Path(path)
    if not p.exists():
        return []
    raw = p.read_bytes()
    records: list[dict] = []
    good_end = 0
    pos = 0
    for line in raw.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith(b"\n"):
            break
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
        good_end = pos
    if repair and good_end < len(raw):
        with open(p, "r+b") as fh:
            fh.truncate(good_end)
    return records


def load_requests(trace_path: str | Path, record: Mapping[str, Any]) -> list[dict]:
    """The requests of one trace record as they were sent: ``{"prompt": str, "images": [PNG bytes], ...}``
    (the files named in the line, read from beside the trace). A missing file is an error naming it."""
    base = Path(trace_path).parent
    out = []
    for r in record.get("requests") or []:
        r = dict(r)
        try:
            r["prompt"] = (base / r["prompt"]).read_text(encoding="utf-8")
            r["images"] = [(base / name).read_bytes() for name in r.get("images", [])]
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{trace_path}: a request file named in the trace is missing: {exc.filename}"
                                    ) from None
        out.append(r)
    return out
