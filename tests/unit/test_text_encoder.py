"""Text encoders: the offline default loads from site-packages, embeddings are cached in memory and on
disk (and reused without loading the model), missing weights give an error naming the config."""

from __future__ import annotations

import pytest
import torch

from neurorefiner.errors import InputError
from neurorefiner.models.text_encoders import (
    HashingEncoder,
    MiniLMEncoder,
    SentenceTransformerEncoder,
    TextEncoder,
    TransformersMeanPoolEncoder,
    minilm_model_path,
)


class CountingEncoder(TextEncoder):
    def __init__(self, **kw):
        super().__init__(name="count", dim=3, **kw)
        self.calls: list[list[str]] = []

    def _embed(self, texts):
        self.calls.append(list(texts))
        return torch.tensor([[len(t), 1.0, 0.0] for t in texts])


def test_cache_in_memory_and_on_disk(tmp_path):
    enc = CountingEncoder(cache_dir=tmp_path)
    e = enc.encode(["ab", "abc", "ab"])
    assert e.shape == (3, 3) and torch.allclose(e.norm(dim=1), torch.ones(3))
    assert torch.equal(e[0], e[2])
    assert enc.calls == [["ab", "abc"]]  # each distinct string once
    enc.encode(["abc"])
    assert len(enc.calls) == 1
    again = CountingEncoder(cache_dir=tmp_path)
    assert torch.equal(again.encode(["abc", "ab"]), e[[1, 0]])
    assert again.calls == []  # served from disk
    assert enc.encode([]).shape == (0, 3)


def test_corrupt_disk_cache_is_rebuilt(tmp_path):
    (tmp_path / "count.pt").write_bytes(b"not a torch file")
    enc = CountingEncoder(cache_dir=tmp_path)
    assert enc.encode("x").shape == (1, 3) and enc.calls == [["x"]]


def test_wrong_dim_is_a_clear_error():
    class Bad(CountingEncoder):
        def _embed(self, texts):
            return torch.zeros(len(texts), 5)

    with pytest.raises(InputError, match="dim"):
        Bad().encode("x")


def test_missing_qwen_weights_name_the_config(tmp_path):
    hint = "text_encoder.model_path (conf/text_encoder/qwen3_embedding_0_6b.yaml)"
    enc = SentenceTransformerEncoder(model_path=tmp_path / "nowhere", name="Qwen3-Embedding-0.6B", dim=1024,
                                     config_hint=hint)
    with pytest.raises(InputError, match="qwen3_embedding_0_6b.yaml") as exc:
        enc.encode("Repair break at top-left-front")
    assert "text_encoder=minilm" in str(exc.value)
    with pytest.raises(InputError, match="text_encoder=minilm"):
        TransformersMeanPoolEncoder(model_path=None, name="Qwen3-4B", dim=2560).encode("x")


def test_hydra_configs_build(project_root, monkeypatch):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    monkeypatch.delenv("QWEN3_EMBEDDING_0_6B_PATH", raising=False)
    monkeypatch.delenv("QWEN3_4B_PATH", raising=False)
    for name, cls, dim in [("minilm", MiniLMEncoder, 384), ("qwen3_embedding_0_6b", SentenceTransformerEncoder, 1024),
                           ("qwen3_4b", TransformersMeanPoolEncoder, 2560)]:
        node = OmegaConf.load(project_root / "conf" / "text_encoder" / f"{name}.yaml")
        node = OmegaConf.merge({"paths": {"cache_dir": "/tmp/unused"}}, {"te": node}).te
        enc = instantiate(node, cache_dir=None)
        assert isinstance(enc, cls) and enc.dim == dim  # building loads nothing
        if name != "minilm":
            with pytest.raises(InputError, match=f"{name}.yaml"):
                enc.encode("x")


def test_hashing_encoder_is_deterministic():
    a, b = HashingEncoder(dim=16), HashingEncoder(dim=16)
    x = a.encode(["Repair break at top-left-front", "Repair break at top-left-rear"])
    assert torch.equal(x, b.encode(["Repair break at top-left-front", "Repair break at top-left-rear"]))
    assert not torch.allclose(x[0], x[1])


@pytest.mark.slow
def test_minilm_offline_embeddings_distinguish_instructions(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert (minilm_model_path() / "model.safetensors").exists()
    enc = MiniLMEncoder(cache_dir=tmp_path)
    texts = ["Repair break at top-right-front", "Repair break at top-right-front",
             "Remove isolated noise at bottom-left-rear", "Connect neuron from top-left-rear to bottom-left-front"]
    e = enc.encode(texts)
    assert e.shape == (4, 384)
    assert torch.allclose(e[0], e[1])
    sims = e @ e.T
    assert sims[0, 2] < 0.999 and sims[0, 3] < 0.999
    assert (tmp_path / "all-MiniLM-L6-v2.pt").exists()
