"""What ``evaluate.py`` calls."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from neurorefiner.errors import InputError, exit_on_user_error, stop


@exit_on_user_error
def run(cfg: DictConfig) -> list[dict]:
    """Evaluate; returns the rows (a multirun's job hands them to the sweep table, conf/evaluate.yaml).

    A model server that stops answering mid-run (the run checks it before it starts, e.g. Table 4) ends the
    run with one line and exit code 2, like a bad input: every finished volume's rows are kept, so the same
    command continues where it stopped."""
    from hydra.utils import instantiate

    from neurorefiner.agents.roles import RoleError
    from neurorefiner.evaluation.plan import check_protocols
    from neurorefiner.io.refiner_plans import check_refiner_config

    check_refiner_config(cfg)   # refiner=adapted without a folder, or a folder without its plans.json: one line
    check_limit(cfg.get("limit"))
    check_not_empty(cfg)
    check_protocols(cfg)
    check_method_settings(cfg)
    dataset = instantiate(cfg.dataset)
    cases = dataset.cases(cfg.split)  # fails clearly when a published dataset is absent
    check_segmenter(cfg)
    from neurorefiner.evaluation.runner import evaluate

    try:
        return evaluate(cfg, dataset, cases)
    except FileNotFoundError as exc:  # a case without its gold SWC or image: the file named, not a traceback
        stop(f"error: {exc}")
    except RoleError as exc:
        stop(f"error: {exc} (finished volumes' rows are kept: the same command continues)")


def check_limit(limit: object) -> None:
    """``limit=`` is null (every case) or a whole number >= 1, before any work: ``limit=-1`` used to drop the last
    case without a word (``cases[:-1]``) and ``limit=0`` to run them all."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"limit={limit}: evaluate the first N cases with a whole number N >= 1, or every case "
                         "with limit=null")


def check_not_empty(cfg: DictConfig) -> None:
    """``methods=[]`` evaluates nothing, and ``cases=[]`` ran every case (an empty selection read as none): neither
    is what was asked."""
    if not list(cfg.get("methods") or []):
        raise InputError("methods=[] names no method to evaluate; e.g. methods=[initial,classical,neurorefiner]")
    cases = cfg.get("cases")
    if cases is not None and not isinstance(cases, str) and not list(cases):
        raise InputError("cases=[] names no case; name some (cases=[OP_7]) or run them all with cases=null")


def check_method_settings(cfg: DictConfig) -> None:
    """Each method's own settings before any work, where its class can check them (``check_settings``):
    ``method_registry.neurorefiner.t_max=0`` used to end in Hydra's traceback when the method was built, after the
    initial masks were made."""
    from neurorefiner.evaluation.methods import method_class, method_node

    for name in map(str, cfg.methods):
        node = method_node(cfg, name)
        check = getattr(method_class(node), "check_settings", None)
        if check is not None:
            check(node, f"method_registry.{name}.")


def check_segmenter(cfg: DictConfig) -> None:
    """Before any work: the shipped checkpoint of ``cfg.segmenter`` on the dataset must exist when a method starts
    from the initial mask, else one line saying which one line trains and ships it (a user with the real
    ZBFWB, BigNeuron or CWMBS data has no shipped segmenter for it: the shipped ones are the stand-ins')."""
    from neurorefiner.evaluation.methods import method_class, method_node
    from neurorefiner.inference.init_masks import NAIVE, shipped_checkpoint

    segmenter, name = str(cfg.segmenter), str(cfg.dataset.name)
    needs = [m for m in cfg.methods if getattr(method_class(method_node(cfg, str(m))), "needs_initial", True)]
    if segmenter == NAIVE or not needs:
        return
    path = shipped_checkpoint(segmenter, name, cfg.dataset.get("subset"))
    if not path.is_file():
        raise InputError(f"no shipped {segmenter} segmenter for {name} (methods {', '.join(map(str, needs))} start "
                         f"from its masks); train and ship one with: {training_line(cfg, path)}; or give "
                         "segmenter=<checkpoint.pt>", path)


def training_line(cfg: DictConfig, shipped: Path) -> str:
    """The ``train.py`` line that trains ``cfg.segmenter`` on ``cfg.dataset`` and ships it to ``shipped``
    (``ship=true`` copies the export from under ``paths.checkpoint_dir`` to the same place in checkpoints/)."""
    subset = cfg.dataset.get("subset")
    return (f"python train.py task=segment model={cfg.segmenter} dataset={cfg.dataset.name}"
            + (f" dataset.subset={subset}" if subset else "")
            + f" 'segmentation.export_path=${{paths.checkpoint_dir}}/{shipped.parent.name}/{shipped.name}' ship=true")
