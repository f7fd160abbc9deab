#!/usr/bin/env bash
# The agents' loop (heuristic roles, shipped TopoRefineNet editor) on DIADEM test OP_7-OP_9, from the shipped
# 3D U-Net's threshold-only masks (threshold 0.8, every component), and its speed on a 256^3 volume.
#   STEP=masks|refine|score|speed|all (default all); OUT=outputs/agents_diadem
#   REFINE_ARGS: extra refine.py overrides; the DIADEM rows were made with loop.max_defects_per_round=8, a CPU
#   budget on the shared 2-core machine (at most 8 x 5 rounds of the ~180 flagged pieces per stack are tried).
# Protocol (every DIADEM number of the project): APP2 seeded at the mask voxel nearest the gold root, the same
# tracing and metric configs as evaluate.py (conf/tracing/app2.yaml, conf/metrics/default.yaml).
# Nothing here was tuned on OP_7-OP_9: the heuristic thresholds are conf/agent/heuristic.yaml as committed.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
OUT=${OUT:-outputs/agents_diadem}
MASKS=${MASKS:-data/cache/init_masks/diadem/unet3d}   # the cache layout evaluate.py shares
STEP=${STEP:-all}
HERE=experiments/agents
export WANDB_MODE=offline PROJECT_ROOT=$PWD

if [[ $STEP == masks || $STEP == all ]]; then
  .venv/bin/neurorefiner init-masks --dataset diadem --segmenter unet3d --split test \
    --threshold 0.8 --dust 0 --keep-largest 0 --bridge-um 0 --threads 1
fi

if [[ $STEP == refine || $STEP == all ]]; then
  for k in 7 8 9; do
    $PY refine.py image=data/diadem_op/OP_$k.tif mask="$MASKS/OP_$k.tif" out="$OUT/refined/OP_$k" \
      spacing=[1.0,0.33,0.33] hydra.run.dir="$OUT/hydra/OP_$k" progress=false ${REFINE_ARGS:-}
  done
fi

if [[ $STEP == score || $STEP == all ]]; then
  $PY - "$OUT" "$MASKS" "$HERE/diadem_test.md" <<'EOF'
import json, subprocess, sys
from pathlib import Path
import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from neurorefiner.io import read_mask, read_swc
from neurorefiner.io.atomic import write_text_atomic
from neurorefiner.tracing.seeding import marker_nearest_root

out, masks, table = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with initialize_config_dir(version_base="1.3", config_dir=str(Path("conf").resolve())):
    cfg = compose(config_name="evaluate", overrides=["paths.output_dir=/tmp/nr-agents"])
tracer, scorer = instantiate(cfg.tracing), instantiate(cfg.metrics)
rows, shares = [], []
for k in (7, 8, 9):
    gold = read_swc(f"data/diadem_op/OP_{k}.swc")
    for name, path in (("U-Net (threshold 0.8, every component)", masks / f"OP_{k}.tif"),
                       ("+ agents (heuristic) + TopoRefineNet", out / "refined" / f"OP_{k}" / "refined_mask.tif")):
        vol = read_mask(path)
        m = np.asarray(vol.load()) > 0
        for proto in ("root_seeded", "full_volume"):
            kw = {"marker": marker_nearest_root(m, gold, vol.spacing)} if proto == "root_seeded" else {}
            s = scorer(gold, tracer(m, vol.spacing, **kw), vol.spacing)
            rows.append({"case": f"OP_{k}", "method": name, "protocol": proto, **{m_: float(v) for m_, v in s.items()}})
    done = [json.loads(l) for l in (out / "refined" / f"OP_{k}" / "trace.jsonl").read_text().splitlines()]
    c = [r for r in done if r["type"] == "done"][-1]
    shares.append((f"OP_{k}", c["counts"], c["seconds"]))
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
date = subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
keys = ["F1", "PRE", "REC", "SD", "SSD", "MES"]
lines = [f"# Agents' loop on DIADEM test (OP_7-OP_9), {date}, commit {commit}", "",
         "Made by `experiments/agents/run.sh`. Initial masks: the shipped 3D U-Net, threshold 0.8, every component.",
         "Metrics: conf/metrics/default.yaml on APP2 traces (conf/tracing/app2.yaml).", ""]
for proto in ("root_seeded", "full_volume"):
    lines += [f"## {proto}", "", "| case | method | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    for r in rows:
        if r["protocol"] == proto:
            lines.append(f"| {r['case']} | {r['method']} | " + " | ".join(f"{r.get(k, float('nan')):.3f}" for k in keys) + " |")
    for name in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["protocol"] == proto and r["method"] == name]
        lines.append(f"| mean | {name} | " + " | ".join(f"{np.mean([r.get(k, np.nan) for r in sel]):.3f}" for k in keys) + " |")
    lines.append("")
lines += ["## Edits", "", "| case | accepted | rejected | escalated | seconds |", "|---|---|---|---|---|"]
lines += [f"| {c} | {n['accepted']} | {n['rejected']} | {n['escalated']} | {s:.0f} |" for c, n, s in shares]
write_text_atomic(table, "\n".join(lines) + "\n")
print("\n".join(lines))
EOF
fi

if [[ $STEP == speed || $STEP == all ]]; then
  # 256^3 synthetic volume (SYNTHETIC data): one U-Net sliding-window pass, then a full refine of its mask
  S="$OUT/speed"
  mkdir -p "$S"
  .venv/bin/neurorefiner synth synthetic_cwmbs_weak --out "$S/synth" --n 1 --shape 256,256,256
  IMG=$(ls "$S"/synth/*_image.tif | head -1)
  /usr/bin/time -f "unet_pass_s %e" -o "$S/unet.time" .venv/bin/neurorefiner segment "$IMG" \
    --model checkpoints/segmenters/unet3d_diadem_cpu.pt --out "$S/unet_mask.tif" --threshold 0.8 --dust 0 \
    --keep-largest 0 --bridge-um 0
  rm -rf "$S/refined"
  /usr/bin/time -f "refine_s %e" -o "$S/refine.time" $PY refine.py image="$IMG" mask="$S/unet_mask.tif" \
    out="$S/refined" hydra.run.dir="$S/hydra" progress=false
  $PY - "$S" "$HERE/speed_256.md" <<'EOF'
import json, subprocess, sys
from pathlib import Path
from neurorefiner.io.atomic import write_text_atomic
s, table = Path(sys.argv[1]), Path(sys.argv[2])
unet = float((s / "unet.time").read_text().split()[-1])
refine = float((s / "refine.time").read_text().split()[-1])
recs = [json.loads(l) for l in (s / "refined" / "trace.jsonl").read_text().splitlines()]
done = [r for r in recs if r["type"] == "done"][-1]
roles = {}
for r in recs:
    if r["type"] == "decision":
        roles[r["role"]] = roles.get(r["role"], 0.0) + float(r.get("seconds") or 0.0)
loop = done["seconds"]
agents = roles.get("inspector", 0) + roles.get("advisor", 0) + roles.get("validator", 0)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
lines = [f"# Refine speed on a 256^3 SYNTHETIC volume (synthetic_cwmbs_weak), commit {commit}", "",
         "Made by `experiments/agents/run.sh` (STEP=speed) on the shared 2-core CPU.", "",
         f"- one U-Net sliding-window pass (`neurorefiner segment`, process wall time): {unet:.1f} s",
         f"- full `refine.py` (process wall time, incl. start-up, editor load, APP2, report): {refine:.1f} s "
         f"= {refine / unet:.2f}x the U-Net pass",
         f"- the loop alone: {loop:.1f} s; edits: {done['counts']}",
         "- seconds per role: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(roles.items())),
         f"- heuristic agents (inspector + advisor + validator): {agents:.2f} s = {100 * agents / max(refine, 1e-9):.1f} % "
         "of the run"]
write_text_atomic(table, "\n".join(lines) + "\n")
print("\n".join(lines))
EOF
fi
