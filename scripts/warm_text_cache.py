"""Fill the text-embedding cache with every instruction of the grammar (``python
scripts/warm_text_cache.py [text-encoder-config-name]``), so training and the agents never load the
language model again, and a machine without it (a GPU box) can train from the cache alone.

An entry point, like ``train.py``: it joins the grammar (:mod:`neurorefiner.agents.instructions`) and the
encoders (:mod:`neurorefiner.models.text_encoders`), which may not import each other that way round.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    import os
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from neurorefiner.agents.instructions import all_instructions
    from neurorefiner.paths import project_root

    argv = sys.argv[1:] if argv is None else argv
    name = argv[0] if argv else "minilm"
    os.environ.setdefault("PROJECT_ROOT", str(project_root()))
    with initialize_config_dir(config_dir=str(Path(project_root()) / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=[f"text_encoder={name}"])
    enc = instantiate(cfg.text_encoder)
    texts = [i.format() for i in all_instructions(include_same_cell=True)]
    enc.warm(texts)
    print(f"{enc.name}: {len(texts)} instructions cached in {enc.cache_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
