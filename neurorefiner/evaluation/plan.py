"""What one evaluation run does, settled from the config before any work: which methods (under which row
keys), on which cases, scored under which protocols, written where.

Why apart from the protocol (:mod:`neurorefiner.evaluation.runner`): every mistake a config can hold (an
unknown method, protocol or case, a segmenter name that leads outside the output folders, a model server that
does not answer) must fail here, in seconds, not after the first volume has been refined. The config itself is
never changed: the plan is a separate value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from neurorefiner.data.cases import Case
from neurorefiner.errors import InputError
from neurorefiner.evaluation.cache_keys import case_data_key, row_key, settings_key
from neurorefiner.evaluation.methods import method_node, needs_server
from neurorefiner.evaluation.paper_tables import table_folder
from neurorefiner.inference.init_masks import preset_name
from neurorefiner.paths import segmenter_dirname

PROTOCOLS = ("full_volume", "root_seeded")


@dataclass
class Plan:
    """What one run does, settled from the config before any work (the config itself is never changed):
    which methods under which keys, on which cases, scored how, written where."""

    dataset: str
    synthetic: bool
    split: str
    segmenter: str
    methods: list[str]
    nodes: dict[str, DictConfig]
    keys: dict[str, str]
    protocols: list[str]
    cases: list[Case]
    out_dir: Path
    settings: str
    dataset_kwargs: dict[str, Any]
    figures: bool = True
    save_masks: bool = True
    progress: bool = True
    not_run_reason: str | None = None
    data_keys: dict[str, str] = field(default_factory=dict)
    table_out: Path | None = None   # the table this run rewrites: its own changes do not make the rows' commit dirty

    def data_key(self, case: Case) -> str:
        """The digest of ``case``'s data (:func:`case_data_key`); a row is read back only under the same one."""
        if case.name not in self.data_keys:
            self.data_keys[case.name] = case_data_key(case)
        return self.data_keys[case.name]

    @property
    def rows_dir(self) -> Path:
        return self.out_dir / "rows" / self.settings / self.split / segmenter_dirname(self.segmenter)

    @property
    def masks_dir(self) -> Path:
        return self.out_dir / "masks" / self.split / segmenter_dirname(self.segmenter)

    def mask_dir(self, name: str) -> Path:
        """Where method ``name``'s masks of this run's settings are saved (one TIFF per case)."""
        return self.masks_dir / f"{name}-{self.keys[name]}"

    def row_files(self, name: str, case: str) -> dict[str, Path]:
        """Protocol -> the file one finished row is kept in (its existence means: do not recompute)."""
        return {p: self.rows_dir / f"{name}-{self.keys[name]}__{p}__{case}.json" for p in self.protocols}


def check_protocols(cfg: DictConfig) -> list[str]:
    """The configured protocols (full_volume where the config has no ``protocols`` key); an unknown one, or none
    (``protocols=[]`` or ``null``, which used to score under full_volume without a word), is a clear error before
    any work."""
    given = cfg.get("protocols") if "protocols" in cfg else ["full_volume"]
    protocols = [str(given)] if isinstance(given, str) else list(dict.fromkeys(map(str, given or [])))
    if not protocols:
        raise InputError(f"protocols={'[]' if given is not None else 'null'} names no protocol; name one or both "
                         f"of {', '.join(PROTOCOLS)} (e.g. protocols=[{PROTOCOLS[1]}])")
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown:
        raise InputError(f"unknown protocol(s) {unknown}; use {', '.join(PROTOCOLS)}")
    return protocols


def select_cases(cfg: DictConfig, cases: list[Case]) -> list[Case]:
    """The cases ``cfg.cases`` names (all by default; an unknown name is an error), the first ``cfg.limit``."""
    wanted = cfg.get("cases")
    if wanted:
        wanted = [str(w) for w in ([wanted] if isinstance(wanted, str) else wanted)]
        known = {c.name for c in cases}
        missing = [w for w in wanted if w not in known]
        if missing:
            raise InputError(f"case(s) {missing} not in split {cfg.split}; it holds {', '.join(sorted(known))}")
        cases = [c for c in cases if c.name in wanted]
    if cfg.get("limit"):
        cases = cases[: int(cfg.limit)]
    return cases


def runnable_methods(cfg: DictConfig, methods: list[str]) -> tuple[list[str], str | None]:
    """The methods that can run here, and why the others cannot: a table that needs a model server whose
    server does not answer still runs the rows that need none (the table says why the rest are missing)."""
    table = cfg.get("table")
    if table is None or not table.get("requires_server"):
        return methods, None
    why = server_answers(str(cfg.agent.get("base_url", "")))
    if why is None:
        return methods, None
    why += "; start one (make serve-vlm prints the command) and rerun"
    return [m for m in methods if not needs_server(method_node(cfg, m))], why


def server_answers(base_url: str, timeout: float = 3.0) -> str | None:
    """None when an OpenAI-compatible server answers ``GET <base_url>/models``, else why not."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=timeout) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status} from {base_url}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"no VLM server answered at {base_url} ({getattr(exc, 'reason', exc)})"


def is_synthetic_dataset(cfg: DictConfig, dataset: Any) -> bool:
    """Whether outputs must say SYNTHETIC: the dataset config's ``synthetic`` key (conf/dataset/), else the
    dataset object's own flag; never guessed from the name."""
    flag = cfg.dataset.get("synthetic") if cfg.get("dataset") is not None else None
    return bool(getattr(dataset, "synthetic", False) if flag is None else flag)


def make_plan(cfg: DictConfig, dataset: Any, cases: list[Case], methods: list[str],
              not_run_reason: str | None) -> Plan:
    """Everything the run needs to know, resolved once; unknown method names fail here, before any work."""
    nodes = {m: method_node(cfg, m) for m in methods}
    ds_kwargs = {k: v for k, v in OmegaConf.to_container(cfg.dataset, resolve=True).items()  # type: ignore[union-attr]
                 if k not in ("_target_", "name")}
    segmenter = str(cfg.segmenter)
    segmenter_dirname(segmenter)  # a name leading outside the output folders fails before any work
    full_name = preset_name(dataset.name, getattr(dataset, "subset", None))
    return Plan(dataset=dataset.name, synthetic=is_synthetic_dataset(cfg, dataset), split=str(cfg.split),
                segmenter=segmenter, methods=methods, nodes=nodes,
                keys={m: row_key(nodes[m], segmenter, full_name) for m in methods},
                protocols=check_protocols(cfg), cases=select_cases(cfg, cases), out_dir=Path(cfg.out_dir),
                settings=settings_key(cfg), dataset_kwargs=ds_kwargs, figures=bool(cfg.get("figures", True)),
                save_masks=bool(cfg.get("save_masks", True)), progress=bool(cfg.get("progress", True)),
                not_run_reason=not_run_reason, data_keys={c.name: case_data_key(c) for c in cases},
                table_out=table_folder(cfg) if cfg.get("table") else None)
