"""What ``refine.py`` calls: check the output folder and the two inputs, then refine with the agents' loop on the
chosen executor (``executor=local``, in memory, the default; ``executor=dask``, tile by tile over OME-Zarr).

The voxel size is the given ``spacing=``, else the files' calibration, else the run stops (exit 2) with a
line naming the file and the fix (:mod:`neurorefiner.io.spacing`); ``spacing=assume`` uses 1, 1, 1 um with a
warning. The output folder is checked first, before anything is loaded, so a bad ``out=`` costs no work: like a
bad input it ends the run with one line on stderr and exit code 2 (:func:`exit_on_user_error`).
"""

from __future__ import annotations

from omegaconf import DictConfig

from neurorefiner.errors import InputError, exit_on_user_error, stop
from neurorefiner.io import check_same_shape, read_mask, read_volume


@exit_on_user_error
def run(cfg: DictConfig) -> dict:
    from neurorefiner.refine.output_lock import check_output_dir, printable

    check_refiner(cfg)
    check_output_dir(str(cfg.out))
    for key in ("image", "mask"):
        try:
            str(cfg[key]).encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{key}= is not valid UTF-8 (the trace and the report record it); rename the file",
                             printable(cfg[key])) from None
    check_loop(cfg)
    checkpoint = (cfg.get("editor") or {}).get("checkpoint")
    if checkpoint:  # the editor loads on its first edit: a wrong file would stop the run after its first round
        from neurorefiner.io.checkpoints import check_checkpoint_file

        check_checkpoint_file(str(checkpoint), "TopoRefineNet checkpoint (editor.checkpoint=)")
    engine = cfg.get("executor")
    if engine is not None and engine.get("_target_"):  # executor=dask: tiles over OME-Zarr, nothing read here
        from hydra.utils import instantiate

        return instantiate(engine).refine(cfg)
    image = read_volume(cfg.image)
    mask = read_mask(cfg.mask)
    check_same_shape(image, mask)
    from neurorefiner.agents.roles import RoleError
    from neurorefiner.refine.local import refine_volume

    try:
        return refine_volume(image, mask, cfg)  # no voxel size anywhere: one line, exit 2
    except RoleError as exc:  # a model server down, or a model with nothing readable to say: one line, exit 2
        stop(f"error: {exc}")


def check_refiner(cfg: DictConfig) -> None:
    """``refiner=adapted``'s ``refiner_dir=`` set and a refiner folder, before anything else reads it: unset, it
    used to end in omegaconf's 26-line traceback (exit 1); an empty folder was reported as a missing editor.ckpt."""
    from neurorefiner.io.refiner_plans import check_refiner_config

    check_refiner_config(cfg)


def check_loop(cfg: DictConfig) -> None:
    """``t_max=`` and the ``loop.`` settings within range before anything is read (:class:`LoopSettings`' own checks,
    named as options): ``t_max=0`` used to end in a ``ValueError`` traceback (exit 1), ``loop.block_size=0`` or a
    negative halo only inside the loop."""
    from neurorefiner.refine.run import loop_settings

    loop_settings(cfg.get("t_max", 5), cfg.get("loop"))
