"""The initial masks M_init that refinement starts from: one segmenter's masks for every case of a split,
cached as ``data/cache/init_masks/<dataset>/<segmenter>/<case>.tif`` with a ``manifest.json``.

``neurorefiner init-masks --dataset diadem --segmenter unet3d``
uses the shipped checkpoint ``checkpoints/segmenters/<segmenter>_<dataset>[_<subset>]_cpu.pt`` when ``--model``
is not given (``otsu`` needs none: the naive floor; a lab's own stacks: :func:`default_checkpoint`). Finished
cases are skipped, so an interrupted run resumes; a different checkpoint (by hash) or post-processing recomputes
everything. Learned segmenters' masks go through ``neurorefiner.postprocessing.masks.postprocess_mask`` (default:
the setting chosen on the DIADEM validation case and recorded in the checkpoint), windows are wide by default
(``default_window``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neurorefiner.errors import InputError
from neurorefiner.io.atomic import atomic_path
from neurorefiner.paths import cache_dir, init_mask_dir, is_segmenter_file, project_root, segmenter_dirname

NAIVE = "otsu"


def preset_name(dataset: str, subset: str | None = None) -> str:
    """A dataset's full name, the one its shipped segmenter is filed under: the dataset with its subset
    (``cwmbs_noise``). CWMBS's weak and noise subsets are one dataset name with two kinds of stacks; filed by
    the name alone they would share one checkpoint, the noisy stacks segmented by a net trained on the weak ones."""
    return f"{dataset}_{subset}" if subset else str(dataset)


def shipped_checkpoint(segmenter: str, dataset: str, subset: str | None = None) -> Path:
    """Where the repository ships a segmenter trained on a dataset's dev/train split (``subset``: the dataset's
    subset, part of its name, :func:`preset_name`); ``segmenter`` may instead be an explicit, existing
    checkpoint file. A name that would lead outside ``checkpoints/segmenters/`` is refused
    (:func:`neurorefiner.paths.segmenter_dirname`)."""
    segmenter_dirname(segmenter)  # refuses '..' and paths to nowhere
    if is_segmenter_file(segmenter):
        return Path(segmenter).expanduser()
    folder = (project_root() / "checkpoints" / "segmenters").resolve()
    path = folder / f"{segmenter}_{segmenter_dirname(preset_name(dataset, subset))}_cpu.pt"
    if folder not in path.resolve().parents:
        raise InputError(f"segmenter {segmenter!r} on {dataset!r} leads outside {folder}")
    return path


#: datasets with no shipped segmenter of their own -> the preset whose shipped segmenters make their masks: a lab's own
#: stacks (``data/own``, data/README.md) get the DIADEM U-Net's, the one shipped segmenter trained on real stacks
SEGMENTERS_FROM = {"own": "diadem"}


def default_checkpoint(segmenter: str, dataset: str, subset: str | None = None,
                       out: str | Path | None = None) -> Path:
    """The checkpoint a segmenter's masks of ``dataset`` come from when no ``--model`` is given: the one shipped for
    the dataset; else the one its masks already in ``out`` (the cache by default) were made with (``init-masks
    --model``), so they are reused, not made again with another; else, for a dataset of :data:`SEGMENTERS_FROM`,
    the one shipped for that preset. The dataset's own shipped path (missing) when none of them exists, for the
    caller's error. Why: ``neurorefiner adapt --dataset own`` has no ``--model``, and the judge and the stage-2
    shards read the masks by the segmenter's name."""
    shipped = shipped_checkpoint(segmenter, dataset, subset)
    if shipped.exists() or is_segmenter_file(segmenter):
        return shipped
    manifest = mask_dir(dataset, segmenter, out) / "manifest.json"
    try:
        recorded = json.loads(manifest.read_text()).get("checkpoint") if manifest.exists() else None
    except ValueError:
        recorded = None
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    if dataset in SEGMENTERS_FROM and shipped_checkpoint(segmenter, SEGMENTERS_FROM[dataset]).exists():
        return shipped_checkpoint(segmenter, SEGMENTERS_FROM[dataset])
    return shipped


def mask_dir(dataset: str, segmenter: str, out: str | Path | None = None) -> Path:
    """Where the masks go: ``out`` when given, else the cache layout of :func:`neurorefiner.paths.init_mask_dir`."""
    return Path(out) if out else init_mask_dir(dataset, segmenter, cache_dir() / "init_masks")


def probs_cache_dir(dataset: str, segmenter: str, digest: str, window: Any, overlap: float) -> Path:
    """Where :func:`write_init_masks` keeps probability maps when asked to (one per checkpoint, window and
    overlap), so masks under several post-processings cost one sliding-window pass per case."""
    w = "default" if window == "default" else "x".join(str(int(v)) for v in window)
    return cache_dir() / "probs" / dataset / segmenter / f"{digest[:16]}_w{w}_o{overlap:g}"


def _cached_probs(path: Path | None, compute: Any) -> Any:
    """``compute()``'s float32 array, read from / written to ``path`` (.npy, atomic) when one is given."""
    import numpy as np

    if path is not None and path.exists():
        return np.load(path)
    probs = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, np.asarray(probs, dtype=np.float32))
    return probs


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks (checkpoints are tens of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a file, computed once per (path, size, mtime) in a process. Why one cache for all callers: an
    evaluation keys its rows by the images' digests and the mask writer checks the same images, so a stack is read
    for hashing once a run, not once per caller."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = file_sha256(path)
    return _DIGESTS[key]


def write_init_masks(dataset: str, segmenter: str = "unet3d", model: str | Path | None = None,
                     split: str = "test", out_dir: str | Path | None = None, overwrite: bool = False,
                     dataset_kwargs: dict[str, Any] | None = None, overlap: float = 0.25,
                     device: str = "cpu", progress: bool = True,
                     only: Sequence[str] | None = None, post: Any = None,
                     window: Sequence[int] | None = None, cache_probs: bool = False,
                     overrides: dict[str, Any] | None = None) -> list[Path]:
    """Write (or reuse) M_init for every case of ``dataset``/``split`` (or the cases named in ``only``);
    returns the mask paths in case order. ``post`` (a ``PostProcess``; None: the one recorded in the
    checkpoint but keeping every component; ``overrides``, PostProcess fields such as
    ``{"threshold": 0.7, "keep_largest": 1}``, replace its fields) and ``window``
    (None: wide windows) apply to learned segmenters. ``cache_probs``: keep each probability map under
    :func:`probs_cache_dir` (float32 .npy) and reuse it, e.g. for a second post-processing of the same cases.

    Why every component by default: M_init is what refinement starts from, and the pieces a break
    leaves behind and the noise blobs are exactly what the Inspector must find and TopoRefineNet fix. The
    checkpoint's largest-component filter (chosen on dev for the segmenter's own APP2 row) would drop the
    far side of every break, leaving nothing to reconnect. Pass a ``post`` to get the filtered masks."""
    from tqdm import tqdm

    from neurorefiner.data import get_dataset
    from neurorefiner.io import write_volume

    ds = get_dataset(dataset, **(dataset_kwargs or {}))
    cases = [c for c in ds.cases(split) if not only or c.name in only]
    out = mask_dir(dataset, segmenter, out_dir)
    post_d: dict[str, Any] | None = None
    if segmenter == NAIVE:
        ckpt, digest, seg = None, "none", None
    elif model is None and not default_checkpoint(segmenter, dataset, (dataset_kwargs or {}).get("subset"),
                                                  out).exists() and _all_present(out, cases):
        return [out / f"{c.name}.tif" for c in cases]  # a lab's own segmenter's masks, put here (data/README.md)
    else:  # a segmenter without a checkpoint stops here, before its folder is made
        ckpt, digest, seg, post = _learned_segmenter(dataset, segmenter, model, dataset_kwargs, post, overrides,
                                                     out)
        post_d = post.as_dict()
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    window_l = [int(w) for w in window] if window else "default"
    header = {"dataset": dataset, "segmenter": segmenter,
              "checkpoint": None if ckpt is None else str(ckpt), "checkpoint_sha256": digest,
              "postprocess": post_d, "window": window_l, "overlap": overlap,
              "synthetic": bool(cases and cases[0].info.get("synthetic"))}
    done = {} if overwrite else _recorded_cases(manifest_path, header)
    paths = []
    for case in tqdm(cases, desc=f"M_init {dataset}/{segmenter}", unit="vol", disable=not progress):
        path = out / f"{case.name}.tif"
        paths.append(path)
        image_sha = file_digest(Path(case.image_path)) if case.image_path and Path(case.image_path).exists() else None
        # the same case name may hold another image (a regenerated synthetic preset, another dataset seed): a mask
        # is reused only for the image it was made from (entries from before this check carry no hash)
        if case.name in done and path.exists() and done[case.name].get("image_sha256", image_sha) == image_sha:
            continue
        vol = case.image()
        start = time.perf_counter()
        probs_path = (probs_cache_dir(dataset, segmenter, digest, window_l, overlap) / f"{case.name}.npy"
                      if cache_probs and seg is not None else None)
        mask = _case_mask(case, vol, seg, post, window, overlap, device, probs_path)
        write_volume(path, mask, spacing=vol.spacing)
        done[case.name] = {"file": path.name, "split": case.split, "seconds": round(time.perf_counter() - start, 2),
                           "foreground": int(mask.sum()), "shape": list(mask.shape), "image_sha256": image_sha}
        _record_cases(manifest_path, header, {case.name: done[case.name]})
    if not manifest_path.exists():
        _record_cases(manifest_path, header, {})
    return paths


def _all_present(out: Path, cases: Sequence[Any]) -> bool:
    """Whether every case's mask is in ``out`` (masks put there by hand carry no manifest)."""
    return bool(cases) and all((out / f"{c.name}.tif").is_file() for c in cases)


def _learned_segmenter(dataset: str, segmenter: str, model: str | Path | None,
                       dataset_kwargs: dict[str, Any] | None, post: Any, overrides: dict[str, Any] | None,
                       out: str | Path | None = None) -> tuple[Path, str, Any, Any]:
    """The checkpoint (``model``, else :func:`default_checkpoint`), its sha256, the loaded segmenter and the
    post-processing
    its masks get (``post``, else the checkpoint's recorded one with every component kept and no gap bridging;
    ``overrides`` replace fields of either). A missing checkpoint says how to train one."""
    import dataclasses

    from neurorefiner.inference.segmenter import load_segmenter, recorded_postprocess

    ckpt = Path(model) if model else default_checkpoint(segmenter, dataset, (dataset_kwargs or {}).get("subset"), out)
    if not ckpt.exists():
        raise InputError(f"no checkpoint for {segmenter!r} on {dataset!r}; train one with "
                         f"`python train.py task=segment model={segmenter} dataset={dataset}` and pass "
                         "--model <ckpt_dir>/segmenter.pt", ckpt)
    digest = file_digest(ckpt)
    seg = load_segmenter(ckpt, expected_arch=None if is_segmenter_file(segmenter) else segmenter)
    # refinement starts from the breaks and fragments: no component filter, no gap bridging
    post = post or dataclasses.replace(recorded_postprocess(seg), keep_largest=0, bridge_um=0.0)
    post = dataclasses.replace(post, **(overrides or {}))
    return ckpt, digest, seg, post


def _case_mask(case: Any, vol: Any, seg: Any, post: Any, window: Sequence[int] | None, overlap: float,
               device: str, probs_path: Path | None) -> Any:
    """One case's M_init: Otsu's threshold without a segmenter (the naive floor), else the segmenter's
    probability map (read from / kept at ``probs_path`` when given) through the post-processing."""
    if seg is None:
        from neurorefiner.baselines.naive import otsu_mask

        return otsu_mask(vol.load())
    from neurorefiner.inference.segmenter import segment_array
    from neurorefiner.postprocessing.masks import postprocess_mask

    voxel = case.spacing or vol.spacing
    probs = _cached_probs(probs_path, lambda vol=vol, src=str(case.image_path), voxel=voxel: segment_array(
        seg, vol.load(), overlap=overlap, device=device, patch_size=window, source=src, post=post,
        spacing=voxel)[1])
    return postprocess_mask(probs, post, voxel)


def _same_settings(manifest: dict, header: dict) -> bool:
    """Whether masks recorded under ``manifest`` are the ones ``header`` would make: the checkpoint, the
    post-processing and the sliding window with its overlap (a learned segmenter's masks change with the overlap;
    a manifest from before it was compared was written at the default)."""
    missing = {"window": "default", "overlap": 0.25}
    return all(manifest.get(k, missing.get(k)) == header[k]
               for k in ("checkpoint_sha256", "postprocess", "window", "overlap"))


def _recorded_cases(manifest_path: Path, header: dict) -> dict:
    """The cases the manifest records under the same checkpoint and settings (any split); none otherwise."""
    if not manifest_path.exists():
        return {}
    manifest = json.loads(manifest_path.read_text())
    return dict(manifest.get("cases", {})) if _same_settings(manifest, header) else {}


def _record_cases(manifest_path: Path, header: dict, new: dict) -> None:
    """Add ``new`` case entries to the manifest under a file lock, re-reading it first: two runs on the same
    folder (e.g. the dev and the test split at once) each keep the other's entries instead of the last writer
    dropping them. A manifest of other settings is replaced."""
    import fcntl

    with open(manifest_path.with_name(".manifest.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cases = {**_recorded_cases(manifest_path, header), **new}
        splits = sorted({str(c.get("split")) for c in cases.values()})
        with atomic_path(manifest_path) as tmp:
            tmp.write_text(json.dumps(dict(header, splits=splits, cases=cases), indent=1))

