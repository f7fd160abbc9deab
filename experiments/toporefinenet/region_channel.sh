#!/usr/bin/env bash
# The region-channel TopoRefineNet (checkpoints/toporefinenet.ckpt since 2026-11-30), trained on the 2-core
# CPU, and the instruction-following tables of README section 5. Run from anywhere; STEP selects a part:
#   STEP=s1    stage 1: the shipped GPU stage-1 weights widened to the region channel, continued on CPU
#   STEP=s2    stage 2 from that, on crops mined from the CPU segmenters' masks of OP_1-OP_5 (target
#              "instructed": only the named operation in the named place); STEP=s2local: the same with
#              target "local" (gold in the named place, whatever the operation), for comparison
#   STEP=breaks  a break-heavy continuation of stage 1 (not shipped; README section 5) and the break probe
#   STEP=s2replay  stage 2 from the break-heavy stage 1, half of its items replayed stage-1 defects (80 % breaks)
#   STEP=eval  the tables (single defects; defects with an unnamed distractor), raw and confined edits
#   STEP=fusion  Table 6 on our data: CAB / AdaLN / CDP with the region channel (multirun); each starts from
#              the stage-1 U-Net body above with its fusion block fresh, and gets the same 500 steps
#   STEP=ship  copy the two-stage checkpoint into checkpoints/ and write its card
# Data: synthetic defects cut into DIADEM gold masks, OP_1-OP_5 train, OP_6 validation/evaluation;
# OP_7-OP_9 are never used.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 WANDB_MODE=${WANDB_MODE:-offline}
Q="trainer.enable_progress_bar=false trainer.enable_checkpointing=false trainer.log_every_n_steps=20"
S1="train.py +stage=1 paths.checkpoint_dir=outputs/cpu_region_s1 stages.1.init_from=outputs/gpu_text_only/toporefinenet_stage1.ckpt stages.1.lr=5e-4 stages.1.max_steps=2000 +trainer.max_time=00:00:38:00 $Q"
SNAP="mkdir -p outputs/init_masks_dev_snapshot && cp -a data/cache/init_masks_dev/diadem outputs/init_masks_dev_snapshot/"
S2L="train.py +stage=2 paths.checkpoint_dir=outputs/cpu_region_s2_local stages.2.datamodule.target=local stages.2.init_from=outputs/cpu_region_s1/toporefinenet_stage1.ckpt stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.max_steps=600 +trainer.max_time=00:00:12:00 $Q"
S2="train.py +stage=2 paths.checkpoint_dir=outputs/cpu_region_s2 stages.2.init_from=outputs/cpu_region_s1/toporefinenet_stage1.ckpt stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.max_steps=600 +trainer.max_time=00:00:12:00 $Q"
FUSION="train.py -m +stage=1 model.net.fusion=cab,adaln,cdp paths.checkpoint_dir=outputs/region_fusion/\${model.net.fusion} stages.1.init_from=outputs/cpu_region_s1/toporefinenet_stage1.ckpt stages.1.init_exclude=[fusion.] stages.1.lr=5e-4 stages.1.max_steps=500 +trainer.max_time=00:00:09:00 $Q"
BRK="train.py +stage=1 paths.checkpoint_dir=outputs/cpu_region_breaks stages.1.init_from=outputs/cpu_region_s1/toporefinenet_stage1.ckpt stages.1.lr=5e-4 stages.1.max_steps=800 +trainer.max_time=00:00:10:00 stages.1.datamodule.defects.probs={break:0.8,paste:0.1,noise:0.1} model.edit_weight=30 $Q"
S2R="train.py +stage=2 paths.checkpoint_dir=outputs/cpu_region_s2_replay stages.2.init_from=outputs/cpu_region_breaks/toporefinenet_stage1.ckpt stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.datamodule.replay_prob=0.5 +stages.2.datamodule.replay={defects:{probs:{break:0.8,paste:0.1,noise:0.1}}} model.edit_weight=30 stages.2.max_steps=600 +trainer.max_time=00:00:12:00 $Q"
EVAL="experiments/toporefinenet/evaluate_instructions.py --n 64 --confine 4"
R=experiments/toporefinenet/results
case "${STEP:-}" in
  s1)
    mkdir -p outputs/gpu_text_only  # the GPU stage-1 weights shipped before the region channel
    [[ -f outputs/gpu_text_only/toporefinenet_stage1.ckpt ]] || git show e865592:checkpoints/toporefinenet_stage1.ckpt > outputs/gpu_text_only/toporefinenet_stage1.ckpt
    $PY $S1 ;;
  s2) [[ -d outputs/init_masks_dev_snapshot/diadem ]] || eval "$SNAP"; $PY $S2 ;;
  s2local) [[ -d outputs/init_masks_dev_snapshot/diadem ]] || eval "$SNAP"; $PY $S2L ;;
  eval)
    mkdir -p outputs/gpu_text_only  # the text-only GPU checkpoint shipped before the region channel
    [[ -f outputs/gpu_text_only/toporefinenet.ckpt ]] || git show e865592:checkpoints/toporefinenet.ckpt > outputs/gpu_text_only/toporefinenet.ckpt
    M_TEXT=(--ckpt outputs/gpu_text_only/toporefinenet.ckpt --label "text only (GPU, shipped before)")
    M_S1=(--ckpt outputs/cpu_region_s1/toporefinenet_stage1.ckpt --label "region channel, stage 1")
    M_S2=(--ckpt outputs/cpu_region_s2/toporefinenet_stage2.ckpt --label "region channel, two-stage")
    M_S2L=(--ckpt outputs/cpu_region_s2_local/toporefinenet_stage2.ckpt --label "region channel, two-stage (local target)")
    $PY $EVAL "${M_TEXT[@]}" "${M_S1[@]}" "${M_S2[@]}" "${M_S2L[@]}" --out $R/region_channel_synthetic \
      stages.1.datamodule.distractor_prob=0.0
    $PY $EVAL "${M_S1[@]}" "${M_S2[@]}" --out $R/region_channel_synthetic_distractors stages.1.datamodule.distractor_prob=1.0
    $PY $EVAL --stage 2 "${M_TEXT[@]}" "${M_S1[@]}" "${M_S2[@]}" "${M_S2L[@]}" --out $R/region_channel_mined \
      stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.datamodule.target=instructed ;;
  breaks)
    $PY $BRK
    $PY experiments/toporefinenet/break_probe.py --n 16 --out $R/break_probe \
      --ckpt checkpoints/toporefinenet_stage1.ckpt --label "region channel, stage 1 (shipped)" \
      --ckpt checkpoints/toporefinenet.ckpt --label "region channel, two-stage (shipped)" \
      --ckpt outputs/cpu_region_breaks/toporefinenet_stage1.ckpt --label "stage 1 + 10 min break-heavy"
    M_BRK=(--ckpt outputs/cpu_region_breaks/toporefinenet_stage1.ckpt --label "stage 1 + 10 min break-heavy")
    $PY $EVAL "${M_BRK[@]}" --out $R/region_channel_breaks_synthetic stages.1.datamodule.distractor_prob=0.0
    $PY $EVAL --stage 2 "${M_BRK[@]}" --out $R/region_channel_breaks_mined \
      stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.datamodule.target=instructed
    $PY experiments/toporefinenet/by_operation.py $R/region_channel_breaks_synthetic $R/region_channel_breaks_mined ;;
  s2replay)
    [[ -d outputs/init_masks_dev_snapshot/diadem ]] || eval "$SNAP"
    $PY $S2R
    M_R=(--ckpt outputs/cpu_region_s2_replay/toporefinenet_stage2.ckpt --label "break-heavy stage 1 + stage 2 with replay")
    $PY experiments/toporefinenet/break_probe.py --n 16 --out $R/break_probe_replay "${M_R[@]}"
    $PY $EVAL "${M_R[@]}" --out $R/region_channel_replay_synthetic stages.1.datamodule.distractor_prob=0.0
    $PY $EVAL --stage 2 "${M_R[@]}" --out $R/region_channel_replay_mined \
      stages.2.datamodule.init_masks_root=outputs/init_masks_dev_snapshot stages.2.datamodule.target=instructed
    $PY experiments/toporefinenet/by_operation.py $R/region_channel_replay_synthetic $R/region_channel_replay_mined ;;
  fusion)
    $PY $FUSION
    $PY $EVAL --ckpt outputs/region_fusion/cab/toporefinenet_stage1.ckpt --label CAB \
      --ckpt outputs/region_fusion/adaln/toporefinenet_stage1.ckpt --label AdaLN \
      --ckpt outputs/region_fusion/cdp/toporefinenet_stage1.ckpt --label CDP \
      --out $R/fusion_ablation_region stages.1.datamodule.distractor_prob=0.0 ;;
  ship)
    cp outputs/cpu_region_breaks/toporefinenet_stage1.ckpt outputs/cpu_region_breaks/toporefinenet_stage1.json outputs/cpu_region_s2_replay/
    $PY experiments/toporefinenet/make_checkpoint_card.py --src outputs/cpu_region_s2_replay --name toporefinenet --stages 1 2 \
      --command1 "python $S1
python $BRK
# (figures below: the second, break-heavy run)" --command2 "python $S2R" \
      --machine "the shared 2-core development CPU, 1 torch thread" \
      --history "Stage 1 starts from the previously shipped GPU stage-1 weights (1479 steps on an H200 at 64 x 128 x 128, batch 8; sha256 59b68a393c36..., checkpoints/toporefinenet_stage1.ckpt at git e865592, whose card is checkpoints/toporefinenet.md at that commit; the script restores it from git into outputs/gpu_text_only/), widened to the region input channel with zero weights (neurorefiner.training.refiner.widen_input_channels), trained 2000 CPU steps with the region channel, distractor defects (0.3) and instruction swapping (0.25), then 709 break-heavy steps (80 % breaks, edit_weight 30). Stage 2 starts from that and replays stage-1 defects in half of its items so that it keeps repairing breaks." \
      --data "stage 1 = synthetic defects (conf/refine_stage/stage1.yaml: breaks by erosion k in [5, 20], pasted foreign annotation, Gaussian noise blobs; 30 % of crops with a second, unnamed defect) cut into the gold masks of DIADEM OP_1-OP_5, crops (z, y, x) 32 x 64 x 64, batch 2, validation = 32 fixed defects on OP_6. Stage 2 = crops mined (Stage2MinedDataModule, difference_writer instructions, target instructed: only the named operation inside the named region) from the CPU segmenters' masks (unet3d, nnunet_style) of OP_1-OP_5 (outputs/init_masks_dev_snapshot = a copy of data/cache/init_masks_dev made before the segmenters were retrained; the unet3d masks there come from an earlier, unshipped export, sha256 ab9e58e4...), half of the training items replayed stage-1 defects (80 % breaks), validation on OP_6 mined crops. OP_7-OP_9 never used."
    for c in checkpoints/toporefinenet.md checkpoints/toporefinenet_stage1.md; do
      printf '%s\n' "" "## Does it follow instructions?" "" "Correct vs wrong-location vs opposite-operation edits on synthetic OP_6 defects and on OP_6 crops mined from real segmenter errors: experiments/toporefinenet/README.md section 5 (tables made by STEP=eval, STEP=breaks and STEP=s2replay of experiments/toporefinenet/region_channel.sh)." >> $c
    done ;;
  *) echo "set STEP=s1|s2|eval|fusion|ship" >&2; exit 2 ;;
esac
