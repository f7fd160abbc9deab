#!/usr/bin/env bash
# loop.retry_declined on the SYNTHETIC stand-ins' val splits (test never read): after the editor declines an edit on
# the evidence (a bridge over the decoding's limits, isolated pieces the image shows), try other frames (true, as
# shipped) or escalate the defect at once (false). Each run's rows are tabulated per stack into
# experiments/declined_retry/<preset>_val_<setting>.md. PRESETS (default "bigneuron zbfwb cwmbs_noise") picks them.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1
out=outputs/dev/declined_retry
common=("methods=[initial,neurorefiner]" "protocols=[root_seeded]" split=val table=null figures=false save_masks=false
        progress=false)
declare -A experiment=([bigneuron]=table_2_synthetic_bigneuron [zbfwb]=table_2_synthetic_zbfwb
                       [cwmbs_noise]=table_1_synthetic_cwmbs_noise)
for preset in ${PRESETS:-bigneuron zbfwb cwmbs_noise}; do
  for setting in true false; do
    name=${preset}_val_retry_declined_${setting}
    python evaluate.py experiment="${experiment[$preset]}" "${common[@]}" \
      method_registry.neurorefiner.loop.retry_declined=$setting out_dir=$out/$name
    neurorefiner study rows-table "$out/$name" --split val --method initial --method neurorefiner \
      --title "loop.retry_declined=$setting on SYNTHETIC $preset val" --command "experiments/declined_retry/run.sh" \
      --target "experiments/declined_retry/$name.md"
  done
done
