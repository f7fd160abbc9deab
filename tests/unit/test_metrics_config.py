"""conf/tracing/app2.yaml and conf/metrics/default.yaml build the real functions with the code's defaults."""

from __future__ import annotations

import inspect

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate


def _compose(project_root):
    with initialize_config_dir(config_dir=str(project_root / "conf"), version_base=None):
        return compose("evaluate")


def test_configs_instantiate_and_agree_with_function_defaults(project_root) -> None:
    from neurorefiner.metrics.reconstruction import score_trees
    from neurorefiner.tracing.app2 import app2

    cfg = _compose(project_root)
    for node, fn in ((cfg.tracing, app2), (cfg.metrics, score_trees)):
        defaults = {k: p.default for k, p in inspect.signature(fn).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        for key, value in node.items():
            if key.startswith("_"):
                continue
            assert key in defaults, key
            assert defaults[key] == value or abs(float(defaults[key]) - float(value)) < 1e-12, key
    trace, score = instantiate(cfg.tracing), instantiate(cfg.metrics)
    m = np.zeros((5, 30, 40), bool)
    m[2, 15, 2:38] = True
    tree = trace(m, (1.0, 1.0, 1.0))
    assert len(tree) > 1 and score(tree, tree)["F1"] == 1.0
