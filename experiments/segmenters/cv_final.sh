#!/usr/bin/env bash
# Ship the CPU 3D U-Net with the recipe cross-validated on DIADEM dev (cv_dev.py; its choice in CHOICE,
# default experiments/segmenters/cv_dev/choice.json), then score DIADEM test once.
#
#   bash experiments/segmenters/cv_final.sh             # all of it (fourth round: one network)
#   CHOICE=experiments/segmenters/cv_dev/round5/choice.json ROUND=fifth bash experiments/segmenters/cv_final.sh
#   CHOICE=experiments/segmenters/cv_dev/round6/choice.json ROUND=sixth bash experiments/segmenters/cv_final.sh
#   STEP=card bash experiments/segmenters/cv_final.sh   # only rewrite the shipped checkpoint's card
#
# 1) train on all six dev cases OP_1-OP_6 with the chosen step budget (no case is left for validation: the
#    cross-validated budget replaces the checkpoint pick), export the last checkpoint; when the choice is an
#    average of N seeds, train seeds 0..N-1 and pack them into one checkpoint (models.segmenters.ensemble);
# 2) record the cross-validated post-processing in it, copy it to checkpoints/segmenters/unet3d_diadem_cpu.pt
#    and write its card (earlier shipped files are kept as unet3d_diadem_cpu_r2.*, _r4.*, _r5.*);
# 3) score DIADEM test (OP_7-OP_9, reporting only) with the naive floor -> diadem_test.md, and remerge the
#    every-network table (round3.sh STEP=table).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export WANDB_MODE=offline
CHOICE=${CHOICE:-experiments/segmenters/cv_dev/choice.json}
ROUND=${ROUND:-fourth}
read -r steps thr dust keep members budget bridge < <($PY -c "import json; c = json.load(open('$CHOICE')); \
print(c['steps'], c['threshold'], c['dust_voxels'], c['keep_largest'], c.get('members', 1), \
c.get('speed_budget_s', 'none'), c.get('bridge_um', 0.0))")
echo "cross-validated choice: $steps steps, $members network(s), threshold $thr, gap bridging $bridge um, dust $dust, \
keep_largest $keep"
run_dir() {  # seed 0 is the fourth round's run; later seeds have their own folders
  if [ "$1" = 0 ]; then echo "checkpoints/runs/segment/unet3d/diadem_r4_$steps"
  else echo "checkpoints/runs/segment/unet3d/diadem_r5_${steps}_seed$1"; fi
}
ship=checkpoints/segmenters/unet3d_diadem_cpu.pt
if [ "${STEP:-all}" = all ]; then
members_pt=()
for seed in $(seq 0 $((members - 1))); do
  dir=$(run_dir "$seed")
  if [ ! -f "$dir/segmenter.pt" ]; then
    $PY train.py task=segment experiment=segment_diadem_cpu seed="$seed" segmentation.ckpt_dir="$dir" \
      segmentation.data.n_val=0 segmentation.export_checkpoint=last trainer.max_epochs=$((steps / 32)) \
      trainer.enable_progress_bar=false
  fi
  members_pt+=("$dir/segmenter.pt")
done
if [ "$members" = 1 ]; then
  cp "${members_pt[0]}" "$ship.part"
else
  ens="checkpoints/runs/segment/unet3d/diadem_r5_${steps}_ens$members/segmenter.pt"
  $PY -c "import sys; from neurorefiner.inference.ensemble import export_ensemble; \
export_ensemble(sys.argv[1:], '$ens')" "${members_pt[@]}"
  cp "$ens" "$ship.part"
fi
mv "$ship.part" "$ship"
$PY -c "from neurorefiner.inference.segmenter import PostProcess, record_postprocess; \
record_postprocess('$ship', PostProcess($thr, $dust, $keep, $bridge), 'DIADEM dev OP_1-OP_6, 3-fold cross-validation \
(out-of-fold masks through APP2): $(dirname "$CHOICE")/cv_dev.md')"
$PY experiments/segmenters/rows.py --dataset diadem --split test --segmenter "unet3d=$ship" --raw --threads 1 \
  --out experiments/segmenters
STEP=table bash experiments/segmenters/round3.sh
fi
if [ "$members" = 1 ]; then what="the last checkpoint of one network (seed 0, training run $(run_dir 0))"
else what="an average of $members networks (seeds 0-$((members - 1)), each its last checkpoint; \
neurorefiner.inference.ensemble)"; fi
{
  $PY -c "from neurorefiner.training.segmenter import provenance_markdown as p; \
print(p('$ship', 'bash experiments/segmenters/cv_dev.sh (RUNS as in its header), cv_dev.py choose, then \
CHOICE=$CHOICE bash experiments/segmenters/cv_final.sh', 'unet3d_diadem_cpu: CPU 3D U-Net on DIADEM dev ($ROUND round)'))"
  cat <<MD
## What was chosen on what (no test case was used for any choice)

- Recipe (normalisation, labels, crops, learning rate): conf/experiment/segment_diadem_cpu.yaml, as in the
  second round (\`unet3d_diadem_cpu_r2.md\`).
- Step budget ($steps), networks averaged ($members) and post-processing (threshold $thr, gap bridging $bridge um,
  dust $dust voxels, keep_largest $keep): 3-fold cross-validation over OP_1-OP_6 (each fold trained on four cases, scored through
  APP2 on the two it held out), \`$(dirname "$CHOICE")/cv_dev.md\`; rule in \`experiments/segmenters/cv_dev.py\`.
- Weights: $what; all six dev cases train it, no validation case.
- Speed budget in the rule: $budget s on 256^3, 2 cores (issue 5; \`none\`: the rule had none, fifth round).
- Inference window: wide (64x256x256), as chosen on OP_6 in the second round.
- Test split (OP_7-OP_9) figures, evaluated once after every choice above was fixed:
  \`experiments/segmenters/diadem_test.md\` (reporting only).
MD
} > checkpoints/segmenters/unet3d_diadem_cpu.md.part
mv checkpoints/segmenters/unet3d_diadem_cpu.md.part checkpoints/segmenters/unet3d_diadem_cpu.md
