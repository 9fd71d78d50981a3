#!/usr/bin/env bash
# Fine-tuning against a bias on the embedded SmolLM2-135M (docs/methods.md §13): low-rank adapters trained by
# counterfactual augmentation (CDA) and by two metrics' differentiable scores as the loss (RPAM's d, CrowS-Pairs'
# soft score), against LEACE and Self-Debias (docs/methods.md §11), every adapter evaluated with every metric and
# the WikiText-2 language-modelling cost, the bias metric's held-out items apart.
#   experiments/finetune_mitigation/run.sh                       # offline, CPU-sized (see the knobs)
#   STEPS=2000 BATCH=32 SEQ=512 CROWS_SAMPLE= UNSTEREO_SAMPLE= experiments/finetune_mitigation/run.sh mesh=fsdp_tp \
#       model.precision=mixed                                    # the same study on a GPU/TPU mesh
# Knobs: STEPS, BATCH (rows per step), SEQ (tokens per row), LR, CROWS_SAMPLE / UNSTEREO_SAMPLE (seeded items;
# empty: all), LM_TOKENS (WikiText-2 test tokens of the LM cost), OUT (results folder). Extra arguments go to
# every job (e.g. mesh=fsdp_tp model.precision=mixed). Every sweep shares the cache, so each adapter is trained
# once and each eraser fitted once.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
OUT=${OUT:-multirun/finetune_mitigation}
opt() { [ -n "${2:-}" ] && echo "$1=$2" || true; }
cost="intervention.lm_cost_tokens=${LM_TOKENS:-5000}"
lora=(intervention=lora "intervention.steps=${STEPS:-100}" "intervention.batch_size=${BATCH:-4}"
      "intervention.seq_len=${SEQ:-64}" "intervention.lr=${LR:-1e-3}" intervention.evaluate_every=20 "$cost")
run() {  # run <sweep folder> <metric overrides...> -- one folder per metric: its baselines and the three adapters
  local dir=$1; shift
  local metric=()
  while [ "$1" != "--" ]; do metric+=("$1"); shift; done; shift
  "$py" -m jaxassoc -m model=smollm2-135m "${metric[@]}" "${lora[@]}" intervention.objective=cda \
    "hydra.sweep.dir=$OUT/$dir" "$@"
  "$py" -m jaxassoc -m model=smollm2-135m "${metric[@]}" "${lora[@]}" intervention.objective=metric \
    intervention.metric=rpam,crows_pairs "hydra.sweep.dir=$OUT/$dir" "$@"
}
baselines() {  # baselines <sweep folder> <interventions> <metric overrides...>
  local dir=$1 which=$2; shift 2
  "$py" -m jaxassoc -m model=smollm2-135m "$@" "intervention=$which" "$cost" "hydra.sweep.dir=$OUT/$dir" \
    "${EXTRA[@]}"
}
EXTRA=("$@")
crows=(metric=crows_pairs dataset=crows_pairs $(opt dataset.sample "${CROWS_SAMPLE-500}"))
rpam=(metric=rpam dataset=weat_ws template=tp1)
unstereo=(metric=unstereo dataset=use5 $(opt dataset.sample "${UNSTEREO_SAMPLE-300}"))
seat=(metric=seat dataset=weat_caliskan2017)
# 1. the three adapters (trained here, once) and their CrowS-Pairs, RPAM, UnStereoEval and SEAT results
run crows "${crows[@]}" -- "$@"
run rpam "${rpam[@]}" -- "$@"
run unstereo "${unstereo[@]}" -- "$@"
run seat "${seat[@]}" -- "$@"
# 2. the baselines: no intervention, LEACE at the output, Self-Debias (scoring-time: where a metric scores tokens)
baselines crows none,leace,self_debias "${crows[@]}"
baselines rpam none,leace "${rpam[@]}"
baselines unstereo none,leace,self_debias "${unstereo[@]}"
baselines seat none,leace "${seat[@]}"
# 3. results.md, the figures and each adapter's training curves
"$py" experiments/finetune_mitigation/summarize.py "$OUT" experiments/finetune_mitigation
