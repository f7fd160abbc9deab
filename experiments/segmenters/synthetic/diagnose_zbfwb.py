"""Why the CPU 3D U-Net scores ~0 on the SYNTHETIC ``synthetic_zbfwb`` preset (and 0.34 F1 on
``synthetic_cwmbs_weak``): prints the figures quoted in experiments/segmenters/README.md
("Why the U-Net fails on synthetic_zbfwb"). All data are SYNTHETIC (generated stand-ins, never ZBFWB/CWMBS).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/segmenters/synthetic/diagnose_zbfwb.py

What it looks at, on one thread (~3 min; the test probability maps come from the cache rows.py wrote,
``--cases``/``--sections`` trim it):
1. the set-up: volume shape, spacing and anisotropy vs the network's first stride, training patch and the
   inference window, the validation Dice recorded in each checkpoint;
2. per test volume: foreground fraction, normalised intensity inside/outside the label, the probability
   map inside/outside the label (quantiles and maximum), Dice/precision/recall and mask fraction at several
   thresholds (the recorded post-processing cuts at 0.6), components of the thresholded mask;
3. the unlabelled distractor fibres: one test volume of each preset is re-rendered with the painting of
   every tree recorded (the image is checked to be bit-identical to the cached one), so the probability on
   target voxels can be compared with the probability on distractor-fibre voxels;
4. one TRAINING volume (centre crop on its label, as validation crops) through the network;
5. the metric side: the gold SWC rasterised == the label file, APP2 on the gold label scored against the
   gold SWC (expect F1 ~1), and the extents behind rows.py's "extents differ by more than 10x" warning.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
CKPT = {p: ROOT / f"checkpoints/runs/segment/unet3d/{p}_r3/segmenter.pt"
        for p in ("synthetic_zbfwb", "synthetic_cwmbs_weak")}
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.8)


def cached_probs(preset: str, case, segmenter) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The probability map rows.py cached (same checkpoint hash, wide windows, overlap 0.25), else computed
    with segment_array (the same call)."""
    import hashlib

    from neurorefiner.inference.init_masks import probs_cache_dir
    from neurorefiner.inference.segmenter import segment_array

    digest = hashlib.sha256(CKPT[preset].read_bytes()).hexdigest()
    path = probs_cache_dir(preset, "unet3d", digest, "default", 0.25) / f"{case.name}.npy"
    if path.exists():
        return np.asarray(np.load(path))
    print(f"  (no cached map at {path}; running the network, a few minutes)")
    return segment_array(segmenter, case.image().load(), source=str(case.image_path))[1]


def scores(pred: np.ndarray, label: np.ndarray) -> tuple[float, float, float]:
    inter = float(np.count_nonzero(pred & label))
    n_p, n_l = float(np.count_nonzero(pred)), float(np.count_nonzero(label))
    return 2 * inter / max(n_p + n_l, 1), inter / max(n_p, 1), inter / max(n_l, 1)


def q(a: np.ndarray, ps=(50, 90, 99)) -> str:
    return "/".join(f"{v:.3f}" for v in np.percentile(a, ps))


def setup_section(presets: list[str]) -> dict:
    from neurorefiner.inference.segmenter import DEFAULT_WINDOW, default_window, load_segmenter
    from neurorefiner.synth.presets import preset_params

    segs = {}
    print("== 1. set-up (SYNTHETIC presets)")
    for p in presets:
        seg = load_segmenter(CKPT[p])
        segs[p] = seg
        prm = preset_params(p)
        sz, sy, sx = prm.spacing
        meta = seg.meta
        val = {k: round(float(v), 4) for k, v in (meta.get("metrics") or {}).items()}
        print(f"{p}: shape {prm.shape}, spacing {prm.spacing} um (z/xy {sz / sx:.1f}), first_stride "
              f"{seg.net_config.get('first_stride')}, train patch {seg.patch_size}, inference window "
              f"{default_window(seg.patch_size, prm.shape, DEFAULT_WINDOW)}, normalisation {seg.normalization}, "
              f"recorded post-processing {meta.get('postprocess')}")
        print(f"  distractor fibres n={prm.n_fibres} at {prm.fibre_signal} x target signal; target signal "
              f"{prm.signal}, background {prm.background}, distractor somata {prm.n_somata}; checkpoint "
              f"metrics {val or '(see card)'}")
    return segs


def volume_section(preset: str, cases, seg) -> None:  # type: ignore[no-untyped-def]
    import cc3d

    from neurorefiner.data.transforms import normalize_image

    print(f"\n== 2. {preset} test volumes: what the network sees and predicts")
    for c in cases:
        img = c.image().load()
        lab = np.asarray(c.label(img.shape)).astype(bool)
        norm = normalize_image(img, str(c.image_path), seg.normalization)
        pr = cached_probs(preset, c, seg)
        print(f"{c.name} ({c.info.get('morphology')}): shape {img.shape} {img.dtype}, label fraction "
              f"{lab.mean():.2e} ({int(lab.sum())} voxels, "
              f"{int(cc3d.connected_components(lab, connectivity=26).max())} component)")
        print(f"  normalised intensity p50/p90/p99 in label {q(norm[lab])}, outside {q(norm[~lab])}")
        print(f"  probability p50/p90/p99 in label {q(pr[lab])}, outside {q(pr[~lab], (50, 99.9, 99.99))} "
              f"(p50/p99.9/p99.99); max {pr.max():.3f}")
        for t in THRESHOLDS:
            m = pr > t
            d, pre, rec = scores(m, lab)
            ncomp = int(cc3d.connected_components(m, connectivity=26).max()) if m.any() else 0
            print(f"  threshold {t:.1f}: mask fraction {m.mean():.2e}, {ncomp} components, Dice {d:.3f} "
                  f"precision {pre:.3f} recall {rec:.3f}")
        del img, lab, norm, pr


def render_with_trees(preset: str, split: str, index: int):  # type: ignore[no-untyped-def]
    """Re-render one cached volume, recording every painted tree (call 0: the target; then the distractor
    fibres), and check the image is bit-identical to the cached file."""
    import importlib

    from neurorefiner.data import get_dataset

    R = importlib.import_module("neurorefiner.synth.render")

    ds = get_dataset(preset)
    case = ds.cases(split)[index]
    params = ds.split_params(split)
    calls, spheres = [], []
    original, original_spheres = R.paint_tree, R.paint_spheres

    def recording(vol, zyx, parent, radius, intensity, spacing):  # type: ignore[no-untyped-def]
        if vol.shape == tuple(params.shape):  # not peak_factor's small probe volumes
            calls.append((np.array(zyx), np.array(parent), np.array(radius), np.array(intensity)))
        original(vol, zyx, parent, radius, intensity, spacing)

    def recording_spheres(vol, zyx, radius, intensity, spacing):  # type: ignore[no-untyped-def]
        if vol.shape == tuple(params.shape):
            spheres.append((np.array(zyx), np.array(radius)))
        original_spheres(vol, zyx, radius, intensity, spacing)

    R.paint_tree, R.paint_spheres = recording, recording_spheres
    try:
        r = R.render(params, int(case.info["seed"]))
    finally:
        R.paint_tree, R.paint_spheres = original, original_spheres
    same = bool(np.array_equal(r.image, case.image().load()))
    fibres = np.zeros(r.image.shape, np.float32)
    for zyx, parent, radius, _ in calls[1:]:
        original(fibres, zyx, parent, radius, np.ones(len(parent), np.float32), r.spacing)
    if len(calls) - 1 != r.info["n_fibres"]:
        raise RuntimeError(f"recorded {len(calls) - 1} distractor trees, the rendering drew {r.info['n_fibres']}")
    somata = np.zeros(r.image.shape, np.float32)
    if r.info["n_somata"]:  # painted before the blobs
        zyx, radius = spheres[0]
        if len(zyx) != r.info["n_somata"]:
            raise RuntimeError("the first sphere call is not the distractor somata")
        original_spheres(somata, zyx, radius, np.ones(len(zyx), np.float32), r.spacing)
    r.info["somata_mask"] = somata > 0.5
    return case, r, fibres > 0.5, same, len(calls) - 1


def distractor_section(preset: str, split: str, index: int, seg) -> None:  # type: ignore[no-untyped-def]
    from neurorefiner.data.transforms import normalize_image

    t0 = time.perf_counter()
    case, r, fib, same, n = render_with_trees(preset, split, index)
    lab = r.label.astype(bool)
    fib &= ~lab
    norm = normalize_image(r.image, None, seg.normalization)
    pr = cached_probs(preset, case, seg)
    print(f"\n== 3. {preset} {case.name}: distractor fibres (re-rendered in {time.perf_counter() - t0:.0f} s, "
          f"image identical to the cached one: {same})")
    print(f"  {n} distractor fibres: {int(fib.sum())} fibre voxels vs {int(lab.sum())} target voxels "
          f"({fib.sum() / lab.sum():.1f}x)")
    print(f"  normalised intensity p50/p90 on target {q(norm[lab], (50, 90))}, on fibres {q(norm[fib], (50, 90))}")
    print(f"  probability p50/p90/p99 on target {q(pr[lab])}, on fibres {q(pr[fib])}, elsewhere "
          f"{q(pr[~lab & ~fib])}")
    from scipy import ndimage as ndi

    near_lab = ndi.binary_dilation(lab, iterations=2)  # the label is the thin gold tube; blur widens the image
    near_fib = ndi.binary_dilation(fib, iterations=2) & ~near_lab
    for t in (0.3, 0.5):
        m = pr > t
        n = max(int(m.sum()), 1)
        print(f"  of the voxels above {t}: {np.count_nonzero(m & lab) / n:.2f} on the target "
              f"({np.count_nonzero(m & near_lab) / n:.2f} within 2 voxels), {np.count_nonzero(m & fib) / n:.2f} "
              f"on distractor fibres ({np.count_nonzero(m & near_fib) / n:.2f} within 2 voxels)")


def ambiguity_section(preset: str, split: str, percentiles) -> None:  # type: ignore[no-untyped-def]
    """Every volume of a split re-rendered: how much of the bright tubular structure is the (labelled)
    target and how much unlabelled distractor fibre, and how bright each is after normalisation. Where the
    fibres look like the target, a calibrated network cannot give a tube more than about
    target / (target + fibre) probability."""
    from neurorefiner.data import get_dataset
    from neurorefiner.data.transforms import normalize_image

    n_t = n_f = 0
    med_t, med_f = [], []
    cases = get_dataset(preset).cases(split)
    for i in range(len(cases)):
        _, r, fib, same, _ = render_with_trees(preset, split, i)
        if not same:
            raise RuntimeError(f"re-rendering {cases[i].name} did not reproduce its cached image")
        lab = r.label.astype(bool)
        fib &= ~lab
        norm = normalize_image(r.image, None, percentiles)
        n_t, n_f = n_t + int(lab.sum()), n_f + int(fib.sum())
        med_t.append(float(np.median(norm[lab])))
        med_f.append(float(np.median(norm[fib])) if fib.any() else float("nan"))
    print(f"  {preset} {split} ({len(cases)} volumes): target {n_t} voxels, distractor fibres {n_f} voxels "
          f"-> target share of the tubes {n_t / (n_t + n_f):.2f}; median normalised intensity per volume, target "
          f"{np.round(med_t, 2).tolist()}, fibres {np.round(med_f, 2).tolist()}")


def threshold_section(preset: str, cases, seg) -> None:  # type: ignore[no-untyped-def]
    """DIAGNOSTIC ONLY (test split, not a selection): what the recorded 0.6 cut costs against lower cuts,
    keep-largest -> APP2 -> F1, as rows.py scores it."""
    from neurorefiner.metrics import score_mask
    from neurorefiner.postprocessing.masks import PostProcess, postprocess_mask

    print(f"\n== 6. {preset} test split, F1 (APP2, tau 4) by threshold, DIAGNOSTIC ONLY (not a choice made on test)")
    import cc3d
    from scipy import ndimage as ndi

    for i, c in enumerate(cases):
        pr = cached_probs(preset, c, seg)
        gold = c.gold()
        _, r, fib, _, _ = render_with_trees(preset, "test", i)
        near_lab = ndi.binary_dilation(r.label.astype(bool), iterations=2)
        near_fib = ndi.binary_dilation(fib, iterations=2) & ~near_lab
        near_som = ndi.binary_dilation(r.info["somata_mask"], iterations=2) & ~near_lab & ~near_fib
        row, where = [], []
        for t in (0.3, 0.4, 0.5, 0.6):
            m = postprocess_mask(pr, PostProcess(t, 0, 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f1 = score_mask(gold, m, c.spacing)["F1"]
            row.append(f"{t}: {f1:.3f}")
            # the largest component, and the largest piece of the target at this cut
            n = max(int(m.sum()), 1)
            on_target = cc3d.largest_k((pr > t) & near_lab, k=1, connectivity=26) > 0
            where.append(f"{t}: {int(m.sum())} vox, {np.count_nonzero(m & near_lab) / n:.2f} target "
                         f"{np.count_nonzero(m & near_fib) / n:.2f} fibres {np.count_nonzero(m & near_som) / n:.2f} "
                         f"distractor somata (largest target piece "
                         f"{int(on_target.sum())} vox)")
        print(f"  {c.name} ({r.info['n_fibres']} fibres, {r.info['n_somata']} distractor somata): keep largest, "
              "F1 at threshold " + ", ".join(row))
        print("    largest component: " + "; ".join(where))
        m = postprocess_mask(pr, PostProcess(0.5, 0, 1))
        if m.any() and not (m & (near_lab | near_fib | near_som)).any():
            zz, yy, xx = np.nonzero(m)
            print(f"    at 0.5 it touches no painted tree or soma: z {zz.min()}-{zz.max()}, y {yy.min()}-{yy.max()}, "
                  f"x {xx.min()}-{xx.max()}, raw intensity mean {r.image[m].mean():.0f} (volume mean "
                  f"{r.image.mean():.0f}, p99.99 {np.percentile(r.image, 99.99):.0f})")


def train_section(preset: str, seg) -> None:  # type: ignore[no-untyped-def]
    """One training volume, centre-cropped on its label like validation (64x256x256), through the network."""
    from neurorefiner.data import get_dataset
    from neurorefiner.data.datamodules.segmentation import centre_crop_on_label, load_case
    from neurorefiner.models.sliding_window import sliding_window_probs

    case = get_dataset(preset).cases("train")[0]
    lc = centre_crop_on_label(load_case(case, seg.normalization), (64, 256, 256))
    t0 = time.perf_counter()
    pr = sliding_window_probs(seg.net, lc.image, seg.patch_size, 0.25)
    lab = lc.label.astype(bool)
    print(f"\n== 4. {preset} TRAINING volume {case.name}, centre crop {lc.image.shape} "
          f"({time.perf_counter() - t0:.0f} s): label fraction {lab.mean():.2e}")
    print(f"  probability p50/p90/p99 in label {q(pr[lab])}, outside {q(pr[~lab], (50, 99.9, 99.99))}; "
          f"max {pr.max():.3f}")
    for t in THRESHOLDS:
        d, pre, rec = scores(pr > t, lab)
        print(f"  threshold {t:.1f}: Dice {d:.3f} precision {pre:.3f} recall {rec:.3f}")


def metric_section(preset: str, case) -> None:  # type: ignore[no-untyped-def]
    from neurorefiner.inference.init_masks import mask_dir
    from neurorefiner.io import read_mask
    from neurorefiner.metrics import score_mask

    img_shape = case.image().shape
    gold = case.gold()
    lab = np.asarray(case.label(img_shape)).astype(bool)
    raster = gold.rasterize(img_shape, case.spacing)
    ext = gold.xyz.max(0) - gold.xyz.min(0)
    print(f"\n== 5. {preset} {case.name}: metric sanity")
    print(f"  gold SWC x,y,z range {gold.xyz.min(0).round(1)}..{gold.xyz.max(0).round(1)} (volume z,y,x "
          f"{img_shape}); rasterised SWC == label file: {bool(np.array_equal(raster, lab))}")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = score_mask(gold, lab, case.spacing)
    print(f"  APP2 on the gold label vs gold SWC ({time.perf_counter() - t0:.0f} s): F1 {s['F1']:.3f} PRE "
          f"{s['PRE']:.3f} REC {s['REC']:.3f} SSD {s['SSD']:.2f}; warnings: {[str(x.message)[:60] for x in w]}")
    for folder, what in (("unet3d_postprocessed", "keep-largest"), ("unet3d", "threshold-only")):
        mpath = mask_dir(preset, folder) / f"{case.name}.tif"
        if not mpath.exists():
            continue
        m = read_mask(mpath).load() > 0
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s = score_mask(gold, m, case.spacing, return_tree=True)
        tr = s["tree"]
        pext = (tr.xyz.max(0) - tr.xyz.min(0)) if len(tr) else np.zeros(3)
        print(f"  the U-Net's {what} mask (rows.py cache): {int(m.sum())} voxels, APP2 trace {len(tr)} nodes, "
              f"extent {pext.round(1)} vs gold extent {ext.round(1)} (x,y,z voxels); F1 {s['F1']:.3f}; "
              f"warnings: {[str(x.message)[:70] for x in w]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=4, help="zbfwb test volumes in section 2 (cwmbs: 2)")
    p.add_argument("--sections", default="123456", help="which sections to run (default all: 123456)")
    a = p.parse_args()
    import torch

    from neurorefiner.data import get_dataset
    from neurorefiner.inference.segmenter import load_segmenter

    torch.set_num_threads(1)
    print("All data below are SYNTHETIC (neurorefiner.synth presets), not ZBFWB or CWMBS.")
    segs = setup_section(list(CKPT)) if "1" in a.sections else {
        p: load_segmenter(c) for p, c in CKPT.items()}
    zb = get_dataset("synthetic_zbfwb").cases("test")
    cw = get_dataset("synthetic_cwmbs_weak").cases("test")
    if "2" in a.sections:
        volume_section("synthetic_zbfwb", zb[: a.cases], segs["synthetic_zbfwb"])
        volume_section("synthetic_cwmbs_weak", cw[:2], segs["synthetic_cwmbs_weak"])
    if "3" in a.sections:
        distractor_section("synthetic_zbfwb", "test", 1, segs["synthetic_zbfwb"])
        distractor_section("synthetic_cwmbs_weak", "test", 0, segs["synthetic_cwmbs_weak"])
    if "3" in a.sections:
        print("\n== 3b. target vs distractor fibres over whole training splits (re-rendered)")
        ambiguity_section("synthetic_zbfwb", "train", segs["synthetic_zbfwb"].normalization)
        ambiguity_section("synthetic_cwmbs_weak", "train", segs["synthetic_cwmbs_weak"].normalization)
    if "4" in a.sections:
        train_section("synthetic_zbfwb", segs["synthetic_zbfwb"])
    if "5" in a.sections:
        metric_section("synthetic_zbfwb", zb[1])
    if "6" in a.sections:
        threshold_section("synthetic_zbfwb", zb[: a.cases], segs["synthetic_zbfwb"])


if __name__ == "__main__":
    main()
