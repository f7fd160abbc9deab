"""Keep the test rows of the shipped U-Net under a round tag before a new one replaces it.

The shipped network's rows in diadem_test_cases.csv are named "unet3d (...)"; the next cv_final.sh run
overwrites them. This copies them, renamed "unet3d:<tag> (...)", to <out>/diadem_test_cases.csv (round3.sh
STEP=table merges that folder into diadem_test_all.md) and copies the checkpoint and its card to
checkpoints/segmenters/unet3d_diadem_cpu_<tag>.{pt,md}.

    .venv/bin/python experiments/segmenters/archive_shipped.py --tag r4 --out experiments/segmenters/round4
"""

from __future__ import annotations

import argparse
import csv
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIPPED = HERE.parents[1] / "checkpoints" / "segmenters" / "unet3d_diadem_cpu"


def renamed_rows(rows: list[dict], tag: str) -> list[dict]:
    """The shipped U-Net's rows ("unet3d (...)"), method renamed "unet3d:<tag> (...)"; other rows dropped."""
    return [{**r, "method": f"unet3d:{tag} " + r["method"][len("unet3d "):]}
            for r in rows if r["method"].startswith("unet3d (")]


def main() -> None:
    from neurorefiner.io.atomic import atomic_path

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tag", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--cases", type=Path, default=HERE / "diadem_test_cases.csv")
    a = p.parse_args()
    with open(a.cases, newline="") as fh:
        rows = list(csv.DictReader(fh))
    kept = renamed_rows(rows, a.tag)
    if not kept:
        raise SystemExit(f"{a.cases}: no 'unet3d (...)' rows to archive")
    a.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(a.out / "diadem_test_cases.csv") as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, list(kept[0]))
        w.writeheader()
        w.writerows(kept)
    for ext in (".pt", ".md"):
        target = SHIPPED.with_name(f"{SHIPPED.name}_{a.tag}{ext}")
        if not target.exists():
            shutil.copyfile(SHIPPED.with_suffix(ext), target)
    print(f"{len(kept)} rows -> {a.out / 'diadem_test_cases.csv'}; checkpoint and card -> {SHIPPED.name}_{a.tag}.*")


if __name__ == "__main__":
    main()
