"""Shared test setup: offline everything, project paths independent of the working directory."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("PROJECT_ROOT", str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def project_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def diadem_dir() -> Path:
    return ROOT / "data" / "diadem_op"


@pytest.fixture(autouse=True)
def one_torch_thread():
    """One torch intra-op thread per test: the tensors in tests are tiny, and on the shared 2-core machine
    two spin-waiting OpenMP threads made the network tests ~10x slower. Restored after each test."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
