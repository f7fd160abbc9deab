#!/usr/bin/env bash
# Which piece the agents grow: the piece at the root (tree_root=gold: the soma the root-seeded protocol gives APP2)
# against the largest piece (tree_root=largest), on development splits only (SYNTHETIC zbfwb and bigneuron val,
# DIADEM dev OP_1-OP_6), and zbfwb val with the DIADEM gap-signal gate put back (0.25; its refiner config sets it
# off). Each run's rows are tabulated per stack into experiments/tree_root/<run>.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
out=outputs/dev/tree_root
common=("methods=[initial,neurorefiner]" "protocols=[root_seeded]" table=null figures=false save_masks=false)
for tr in gold largest; do
  python evaluate.py experiment=table_2_synthetic_zbfwb split=val "${common[@]}" agent.inspector.join_signal_min=0.25 \
    method_registry.neurorefiner.tree_root=$tr out_dir=$out/zbfwb_val_gate_$tr
  python evaluate.py experiment=table_2_synthetic_bigneuron split=val "${common[@]}" \
    method_registry.neurorefiner.tree_root=$tr out_dir=$out/bigneuron_val_$tr
  python evaluate.py dataset=diadem split=dev "methods=[initial,classical,neurorefiner]" "protocols=[root_seeded]" \
    table=null figures=false save_masks=false method_registry.classical.tree_root=$tr \
    method_registry.neurorefiner.tree_root=$tr out_dir=$out/diadem_dev_$tr
done
python evaluate.py experiment=table_2_synthetic_zbfwb split=val "${common[@]}" \
  method_registry.neurorefiner.tree_root=gold out_dir=$out/zbfwb_val_gold
python evaluate.py experiment=table_2_synthetic_zbfwb split=val "methods=[initial,classical]" "protocols=[root_seeded]" \
  table=null figures=false save_masks=false out_dir=$out/zbfwb_val_gold_classical
# cwmbs_noise val with its adapted refiner: the root's piece against the largest, and the shipped editor in place
# of the adapted one (editor.checkpoint=null)
for tr in gold largest; do
  python evaluate.py experiment=table_1_synthetic_cwmbs_noise split=val "methods=[initial,classical,neurorefiner]" \
    "protocols=[root_seeded]" table=null figures=false save_masks=false method_registry.classical.tree_root=$tr \
    method_registry.neurorefiner.tree_root=$tr out_dir=$out/cwmbs_noise_val_$tr
done
python evaluate.py experiment=table_1_synthetic_cwmbs_noise split=val "methods=[initial,classical,neurorefiner]" \
  "protocols=[root_seeded]" table=null figures=false save_masks=false editor.checkpoint=null \
  out_dir=$out/cwmbs_noise_val_gold_shipped_editor
# The judge trained on the candidates of the root's piece (train-judge --tree-root gold), on train alone so that val
# is unseen: zbfwb at the join reach of 8 um (the default) and 16 um; cwmbs_noise at 8 um with its adapted editor
jd=outputs/dev/judge_root
for r in 8 16; do
  neurorefiner train-judge --dataset synthetic_zbfwb --split train --segmenters unet3d --min-support 10 --tree-root gold \
    --reach-um $r --out outputs/judge/zbfwb_train_root_r$r.json
  python evaluate.py experiment=table_2_synthetic_zbfwb split=val "${common[@]}" \
    agent.inspector.judge=$PWD/outputs/judge/zbfwb_train_root_r$r.json agent.inspector.reach_um=$r \
    out_dir=$jd/zbfwb_val_train_r$r
done
neurorefiner train-judge --dataset synthetic_cwmbs_noise --split train --segmenters unet3d --min-support 10 \
  --tree-root gold --out outputs/judge/cwmbs_noise_train_root.json
python evaluate.py experiment=table_1_synthetic_cwmbs_noise split=val "${common[@]}" \
  agent.inspector.judge=$PWD/outputs/judge/cwmbs_noise_train_root.json out_dir=$jd/cwmbs_noise_val_trainroot
for run in zbfwb_val_train_r8 zbfwb_val_train_r16 cwmbs_noise_val_trainroot; do
  neurorefiner make rows-table "$jd/$run" --split val --method initial --method neurorefiner \
    --title "tree_root: $run (judge trained on train, the root's piece)" --command "experiments/tree_root/run.sh" \
    --target "experiments/tree_root/$run.md"
done
# DIADEM test (held out, run once, never tuned on) at the new default, both segmenters, into the shared rows of the
# DIADEM tables (the table file itself is not rewritten: its learned baselines' rows are not in this checkout's cache)
python evaluate.py experiment=table_diadem table=null
python evaluate.py experiment=table_diadem segmenter=nnunet_style table=null
neurorefiner make rows-table outputs/tables/diadem --split test --method initial --method classical \
  --method neurorefiner --title "tree_root: DIADEM test (held out) with the root's piece, both segmenters" \
  --command "python evaluate.py experiment=table_diadem (and segmenter=nnunet_style)" \
  --target experiments/tree_root/diadem_test_gold.md
for run in zbfwb_val_gate_gold zbfwb_val_gate_largest zbfwb_val_gold zbfwb_val_gold_classical bigneuron_val_gold \
           bigneuron_val_largest diadem_dev_gold diadem_dev_largest cwmbs_noise_val_gold cwmbs_noise_val_largest \
           cwmbs_noise_val_gold_shipped_editor; do
  split=val; methods=(--method initial --method neurorefiner)
  case $run in
    diadem*) split=dev; methods=(--method initial --method classical --method neurorefiner);;
    cwmbs*) methods=(--method initial --method classical --method neurorefiner);;
    *classical) methods=(--method initial --method classical);;
  esac
  neurorefiner make rows-table "$out/$run" --split $split "${methods[@]}" --title "tree_root: $run" \
    --command "experiments/tree_root/run.sh" --target "experiments/tree_root/$run.md"
done
