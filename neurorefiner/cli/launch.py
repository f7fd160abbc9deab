"""What the Hydra entry points (``train.py``, ``evaluate.py``) share at the command line, before any work.

* :class:`OutputPaths`, a Hydra callback: the run's folder (``hydra.run.dir``, or ``hydra.sweep.dir`` of a
  multirun) and the config's own output keys are checked (:func:`neurorefiner.io.atomic.check_output_path`)
  before Hydra makes the run folder. A folder under a file used to end in a ``NotADirectoryError`` from inside
  Hydra; now it is one line naming the path and exit code 2, as a bad ``--out`` of the ``neurorefiner`` commands.
* :func:`show_config_argv`: ``-m ... --cfg job`` prints the configuration of the sweep's first job. Hydra
  refuses ``-m`` together with ``--cfg``, yet that is how a user checks a Slurm line before submitting it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from neurorefiner.errors import InputError, note_run_folder

MULTIRUN_FLAGS = ("-m", "--multirun")
SHOW_FLAGS = ("-c", "--cfg")


class OutputPaths(Callback):
    """Hydra callback (``hydra.callbacks``) that checks where a run will write before it starts.

    ``keys``: dotted config keys that hold an output folder (``out_dir``, ``paths.checkpoint_dir``), ``files``:
    keys that hold an output file (``segmentation.export_path``). A key that is unset is skipped; one that cannot
    be resolved yet (it points at Hydra's run folder, set only when the job starts) is left to the run-folder
    check."""

    def __init__(self, keys: Sequence[str] = (), files: Sequence[str] = ()) -> None:
        self.keys, self.files = tuple(keys), tuple(files)

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.run.dir")
        run_dir = _resolved(config, "hydra.run.dir")
        if run_dir is not None:  # a run stopped by a bad input removes the folder Hydra is about to make
            note_run_folder(run_dir)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config, "hydra.sweep.dir")

    def _check(self, config: DictConfig, run_dir: str) -> None:
        from neurorefiner.io.atomic import check_output_path

        try:
            for key in (run_dir, *self.keys, *self.files):
                value = _resolved(config, key)
                if value is not None:
                    check_output_path(value, folder=key not in self.files, option=f"{key}=")
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)


def _resolved(config: DictConfig, key: str) -> str | None:
    """``config``'s value at ``key`` as text, or None when it is unset or not resolvable before the job runs."""
    try:
        value = OmegaConf.select(config, key, throw_on_missing=True)
    except Exception:  # noqa: BLE001 - an interpolation of the job's runtime: checked as the run folder
        return None
    return None if value is None or value == "" else str(value)


def show_config_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``-m``/``--multirun`` dropped and every sweep (``a=1,2``, ``range(...)``) narrowed to its
    first value when it also asks for ``--cfg``/``-c``: the first job's configuration, launcher included,
    exactly as the multirun composes it. Any other command line is returned unchanged."""
    args = list(argv)
    if not (any(a in MULTIRUN_FLAGS for a in args) and any(a in SHOW_FLAGS or a.startswith("--cfg=") for a in args)):
        return args
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg in MULTIRUN_FLAGS:
            continue
        if "=" in arg and not arg.startswith("-") and not (i > 0 and args[i - 1] in SHOW_FLAGS + ("-p", "--package")):
            override = parser.parse_override(arg)
            if override.is_sweep_override():
                first = next(iter(override.sweep_string_iterator()))
                arg = f"{override.get_key_element()}={first}"
        out.append(arg)
    print("note: -m with --cfg shows the configuration of the sweep's first job (Hydra refuses the two together)",
          file=sys.stderr)
    return out
