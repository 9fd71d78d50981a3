#!/usr/bin/env bash
# bias-bench's study (Meade et al. 2022) on the embedded models: concept erasers (LEACE, INLP, SentenceDebias) at
# the final norm and at every layer, Self-Debias, Hard Debias on GloVe; gender, race, religion; with the
# WikiText-2 language-modelling cost beside every bias number (docs/methods.md §11).
#   experiments/mitigation/run.sh                  # offline, CPU-sized: seeded CrowS-Pairs samples, 60 sentences a layer
#   CROWS_SAMPLE= LAYER_SENTENCES=1000 experiments/mitigation/run.sh   # every CrowS-Pairs pair, full fits (a GPU job)
# Knobs: CROWS_SAMPLE (seeded CrowS-Pairs pairs; empty: all 1,508), LAYER_SENTENCES (fitting sentences of the
# layer-by-layer fit), LM_TOKENS (WikiText-2 test tokens of the LM cost), OUT (results folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
OUT=${OUT:-multirun/mitigation}
opt() { [ -n "${2:-}" ] && echo "$1=$2" || true; }
crows=(metric=crows_pairs dataset=crows_pairs $(opt dataset.sample "${CROWS_SAMPLE-300}"))
cost="intervention.lm_cost_tokens=${LM_TOKENS:-10000}"
# 1. SmolLM2, gender: every method at the final norm, and Self-Debias, on CrowS-Pairs
"$py" -m jaxassoc -m model=smollm2-135m "${crows[@]}" intervention=none,leace,inlp,sentence_debias,self_debias \
  "$cost" "hydra.sweep.dir=$OUT/smollm2_crows_gender" "$@"
# 2. SmolLM2, race and religion: LEACE and Self-Debias
"$py" -m jaxassoc -m model=smollm2-135m "${crows[@]}" intervention=leace,self_debias \
  intervention.bias_type=race,religion "$cost" "hydra.sweep.dir=$OUT/smollm2_crows_race_religion" "$@"
# 3. SmolLM2, gender: LEACE and SentenceDebias at every layer's output, each fitted on the states the layers below
#    already erased (concept scrubbing)
"$py" -m jaxassoc -m model=smollm2-135m "${crows[@]}" intervention=leace,sentence_debias \
  'intervention.site=layers.*.resid_post' "intervention.max_sentences=${LAYER_SENTENCES:-60}" "$cost" \
  "hydra.sweep.dir=$OUT/smollm2_crows_layers" "$@"
# 4. SEAT (gender tests of the Caliskan suite as sentences) on SmolLM2 and MiniLM, the erasers at the final norm
"$py" -m jaxassoc -m model=smollm2-135m,minilm-l6 metric=seat dataset=weat_caliskan2017 \
  intervention=none,leace,inlp,sentence_debias "$cost" "hydra.sweep.dir=$OUT/seat" "$@"
# 5. GloVe: WEAT with Hard Debias and the erasers applied to the whole vector table
"$py" -m jaxassoc -m model=glove-6b-50d metric=weat dataset=weat_caliskan2017 \
  intervention=none,hard_debias,leace,inlp,sentence_debias "hydra.sweep.dir=$OUT/glove_weat" "$@"
# 6. results.md and the figure
"$py" experiments/mitigation/summarize.py "$OUT" experiments/mitigation
