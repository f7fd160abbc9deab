"""The editor's settings where no Hydra config is composed (``neurorefiner edit``): ``conf/editor/toporefinenet.yaml``,
the node ``refine.py`` and ``evaluate.py`` compose for the loop's editor.

Why one file: ``neurorefiner edit`` used to decode with :class:`~neurorefiner.inference.decoding.DecodingConfig`'s
built-in defaults (short gap 0 voxels, tube pad 0.5, max radius 3.0) while the loop used this file's (10, 0.0, 1.5),
so the same instruction on the same crop gave two different edits. Both now read their settings here; the
decoder's own defaults stay what the studies that probe the decoder by itself measure.
"""

from __future__ import annotations

from typing import Any

#: the editor the loop composes by default (``conf/refine.yaml``, ``conf/evaluate.yaml``: ``editor: toporefinenet``)
DEFAULT_EDITOR = "toporefinenet"


def editor_config(name: str = DEFAULT_EDITOR) -> dict[str, Any]:
    """The settings of ``conf/editor/<name>.yaml`` as :func:`~neurorefiner.agents.editor.load_topo_refiner` takes
    them (``checkpoint``, ``threshold``, ``confine_margin``, ``device``, ``decoding``), resolved, without Hydra's
    ``_target_`` and ``_partial_``."""
    from omegaconf import OmegaConf

    from neurorefiner.paths import conf_dir

    node = OmegaConf.to_container(OmegaConf.load(conf_dir() / "editor" / f"{name}.yaml"), resolve=True)
    return {str(k): v for k, v in node.items() if not str(k).startswith("_")}  # type: ignore[union-attr]
