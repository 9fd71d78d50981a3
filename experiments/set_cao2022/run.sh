#!/usr/bin/env bash
# Cao et al. 2022: ILPS, ILPS* and SeT over every ABC template the model can score, aligned with the human
# ratings; the best template is chosen on the pilot groups and reported on the held-out groups, beside the
# mean over all templates. See README.md.
#   experiments/set_cao2022/run.sh                                        # embedded SmolLM2 (offline, causal)
#   MODELS=paper experiments/set_cao2022/run.sh                           # the paper's bert-large-cased,roberta-large (hub)
#   MODELS=qwen2.5-0.5b,llama-3.2-1b experiments/set_cao2022/run.sh      # any conf/model names (causal LMs too)
#   MODELS=bert-large-cased experiments/set_cao2022/run.sh model.source=/path/to/bert-large-cased
# Extra arguments are Hydra overrides for every job, except metric.set_* (SeT's score options), which only
# the set jobs get: ilps and ilps_star do not read them and refuse them. The three metrics share the forward
# passes through the on-disk cache (unless metric.set_* changes the set jobs' entries); one multirun per
# metric, since Hydra composes a sweep's base config before it picks a metric and metric.templates must then
# exist.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
sweep=${SWEEP_DIR:-multirun/set_cao2022}
models=${MODELS:-smollm2-135m}
[ "$models" != paper ] || models=bert-large-cased,roberta-large  # the paper's masked LMs
for metric in set ilps ilps_star; do
  args=()
  for arg in "$@"; do
    case "$arg" in metric.set_*) [ "$metric" = set ] || continue ;; esac
    args+=("$arg")
  done
  "$py" -m jaxassoc -m "metric=$metric" dataset=abc "model=$models" \
    'metric.templates=[all]' "hydra.sweep.dir=$sweep" ${args[@]+"${args[@]}"}
done
"$py" -m jaxassoc.app.report "$sweep"
