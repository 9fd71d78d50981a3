#!/usr/bin/env bash
# Which heads of SmolLM2 mediate its gender bias (Vig et al. 2020), and how RPAM's WEAT-WS d and UnStereoEval's
# preference disparity move when the top ones are ablated.
#   experiments/mediation_smollm2/run.sh            # offline, the embedded SmolLM2-135M-Instruct, CPU-sized subset
#   TEMPLATES= PROFESSIONS= experiments/mediation_smollm2/run.sh   # all 17 templates x every profession (GPU)
# Knobs: MODEL (a causal conf/model), TEMPLATES (first N templates; empty: all), PROFESSIONS (seeded sample; empty:
# all), TOP (heads ablated), USE_SAMPLE (UnStereoEval USE-10 pairs; empty: all), OUT (results folder).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
MODEL=${MODEL:-smollm2-135m}
OUT=${OUT:-multirun/mediation_smollm2/$MODEL}
TOP=${TOP:-5}
opt() { [ -n "${2:-}" ] && echo "$1=$2" || true; }
# 1. causal mediation: every head's natural indirect and direct effect (and the top neurons per layer)
"$py" -m jaxassoc metric=mediation "model=$MODEL" $(opt metric.templates "${TEMPLATES-2}") \
  $(opt dataset.sample "${PROFESSIONS-24}") "hydra.run.dir=$OUT/mediation" "$@"
# 2. the same model with and without its TOP heads by indirect effect, under two other metrics
ablate=(intervention=none,ablate "intervention.from_mediation=$OUT/mediation" "intervention.top_heads=$TOP")
"$py" -m jaxassoc -m metric=rpam "model=$MODEL" dataset=weat_ws template=tp1 "${ablate[@]}" \
  "hydra.sweep.dir=$OUT/ablation_rpam" "$@"
"$py" -m jaxassoc -m metric=unstereo "model=$MODEL" dataset=use10 $(opt dataset.sample "${USE_SAMPLE-300}") \
  "${ablate[@]}" "hydra.sweep.dir=$OUT/ablation_unstereo" "$@"
# 3. the reports (heads heatmap) and results.md
"$py" -m jaxassoc.app.report "$OUT/mediation"
"$py" experiments/mediation_smollm2/summarize.py "$OUT" "$TOP" experiments/mediation_smollm2
