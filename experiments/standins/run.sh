#!/usr/bin/env bash
# SYNTHETIC stand-ins in the paper's regime (generated data, never BigNeuron/CWMBS/ZBFWB results).
# Per preset and trained segmenter (ARCHS: unet3d, nnunet_style; the nnU-Net-style net shares the U-Net's recipe
# and budget): train the shipped CPU checkpoint (its experiment config; checkpoint picked by val APP2 F1),
# choose its threshold on the val split (recorded in the checkpoint), write the initial masks of the val and
# test splits, score the test split with the U-Net's initial masks and with the naive floor (Otsu), both
# protocols (full_volume, root_seeded), and collect the rows beside the paper's rows.
#
#   bash experiments/standins/run.sh                                   # every preset, every step
#   PRESETS="synthetic_zbfwb" STEPS="choose masks eval" bash experiments/standins/run.sh
#   STEPS=table bash experiments/standins/run.sh                       # only rebuild the table
#   TEST_CASES=2 PRESETS=synthetic_zbfwb STEPS=eval bash ...          # score only the first 2 test volumes
#   ARCHS=nnunet_style STEPS="train choose card masks eval table" bash experiments/standins/run.sh
# The visibility report (experiments/synthetic_realism/results/visibility.*) and the fragmentation report
# (fragmentation.md) are retired studies: README.md names the commit and command that made them.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
NR=${NR:-.venv/bin/neurorefiner}
export WANDB_MODE=offline OMP_NUM_THREADS=1
PRESETS=${PRESETS:-"synthetic_cwmbs_weak synthetic_cwmbs_noise synthetic_bigneuron synthetic_zbfwb"}
ARCHS=${ARCHS:-unet3d}
STEPS=${STEPS:-"train choose card masks eval table fresh"}
OUT=${OUT:-experiments/standins}
for step in $STEPS; do
  case $step in
    train)
      for a in $ARCHS; do for p in $PRESETS; do
        $PY train.py experiment="${a}_${p}_cpu" ship=true  # choose reads the shipped file
      done; done ;;
    choose)
      for a in $ARCHS; do for p in $PRESETS; do
        # only settings M_init is made with (every component kept, no gap bridging: refinement starts from the
        # pieces), each scored root-seeded as the tables score it
        $NR make postprocess --dataset "$p" --arch "$a" --model "checkpoints/segmenters/${a}_${p}_cpu.pt" \
          --threshold 0.2 --threshold 0.3 --threshold 0.4 --threshold 0.5 --threshold 0.6 --bridge 0 --keep 0 \
          --protocol root_seeded ${CHOOSE_CASES:+--limit $CHOOSE_CASES} --out "$OUT/postprocess" --record
      done; done ;;
    card)
      for a in $ARCHS; do $NR make standin-card $PRESETS --arch "$a"; done ;;
    masks)
      for a in $ARCHS; do for p in $PRESETS; do
        for split in ${MASK_SPLITS:-test val}; do
          $NR init-masks --dataset "$p" --segmenter "$a" --split "$split" --threads 1 --overwrite
        done
      done; done ;;
    eval)
      # the naive floor (Otsu) on the first FLOOR_CASES test volumes, root_seeded only: APP2 on an Otsu mask of these
      # textured stacks takes ~10 min a volume on the shared cores
      for p in $PRESETS; do
        for a in $ARCHS; do
          $PY evaluate.py dataset="$p" split=test methods=[initial] segmenter="$a" ${TEST_CASES:+dataset.n_test=$TEST_CASES} \
            protocols=[full_volume,root_seeded] progress=false out_dir="$OUT/rows/${p}_${a}"
        done
        [ -n "${FLOOR_CASES+x}" ] && [ "$FLOOR_CASES" = 0 ] && continue  # FLOOR_CASES=0: no Otsu floor
        $PY evaluate.py dataset="$p" split=test methods=[initial] segmenter=otsu protocols=[root_seeded] \
          limit="${FLOOR_CASES:-2}" progress=false out_dir="$OUT/rows/${p}_otsu"
      done ;;
    fresh)
      # the shipped U-Net on FRESH_CASES fresh volumes of each preset (dataset seed FRESH_SEED, never used by the
      # project; own cache folder; as many test volumes drawn as scored), root-seeded: the issue's target is within
      # 8 F1 points of the paper's 3D U-Net row
      for a in $ARCHS; do for p in $PRESETS; do
        rm -rf "$OUT/fresh/rows/${p}_${a}"  # rows of a replaced checkpoint or preset never mix with the new ones
        $PY evaluate.py dataset="$p" dataset.seed="${FRESH_SEED:-2027}" dataset.root="data/cache/synth/${p}_fresh" \
          dataset.n_train=0 dataset.n_val=0 dataset.n_test="${FRESH_CASES:-8}" \
          split=test methods=[initial] segmenter="$a" protocols=[root_seeded] limit="${FRESH_CASES:-8}" \
          progress=false figures=false save_masks=false out_dir="$OUT/fresh/rows/${p}_${a}"
      done; done
      $NR study standins-table --rows "$OUT/fresh/rows" --out "$OUT/fresh" --fresh-seed "${FRESH_SEED:-2027}" ;;
    table)
      $NR study standins-table --rows "$OUT/rows" --out "$OUT" ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
