#!/usr/bin/env bash
# DIADEM dev (real data; OP_7-OP_9 never enter), root-seeded APP2, the shipped 3D U-Net's cached masks, default
# learned agents: the Advisor's frames placed as the editor's training crops hold their defects (neurorefiner,
# the default) against frames centred on each edit (nr_centred: the sentences before, nearly every break
# "Repair break at center-center-center"). Cases are those with a cached unet3d dev mask when this was run
# (OP_1, OP_2); add the others with `neurorefiner init-masks --dataset diadem --split dev --segmenter unet3d`.
# Rows and traces land in OUT (default outputs/editor_instructions_dev); the table is copied to
# instructions_dev.md beside this file by hand with its date and commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-outputs/editor_instructions_dev}
.venv/bin/python evaluate.py dataset=diadem split=dev segmenter=unet3d 'cases=[OP_1,OP_2]' \
  'methods=[initial,neurorefiner,nr_centred]' 'protocols=[root_seeded]' \
  '+method@method_registry.nr_centred=neurorefiner' \
  '+method_registry.nr_centred.agent_overrides={advisor:{placement:centred}}' \
  out_dir="$OUT" figures=false save_masks=false "$@"
