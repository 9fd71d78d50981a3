#!/usr/bin/env bash
# UnStereoEval (Belem et al. 2024) on every dataset, then the US-score-vs-eta figure.
#   experiments/unstereo_eval/run.sh                        # offline: the embedded SmolLM2-135M-Instruct
#   MODELS=paper experiments/unstereo_eval/run.sh           # the paper's 28 models, one multirun (hub access)
#   MODELS=pythia-70m,opt-125m experiments/unstereo_eval/run.sh    # any conf/model names
# models.csv lists the paper's 28 models and the conf/model config each runs as (MODELS=paper reads it).
# Extra arguments are Hydra overrides for every job (e.g. model.precision=mixed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
models=${MODELS:-smollm2-135m}
if [ "$models" = paper ]; then  # the configs of models.csv's runnable_in_jaxassoc column: "yes (model=NAME)"
  models=$(sed -n 's/.*,yes (model=\([^)]*\)),.*/\1/p' experiments/unstereo_eval/models.csv | paste -sd, -)
  [ -n "$models" ] || { echo "MODELS=paper: no 'yes (model=...)' rows in experiments/unstereo_eval/models.csv" >&2; exit 2; }
fi
sweep=${SWEEP_DIR:-multirun/unstereo_eval}
"$py" -m jaxassoc -m metric=unstereo "model=$models" dataset=use5,use10,use20,winobias,winogender \
  metric.aufc_units=parity "hydra.sweep.dir=$sweep" "$@"  # the original code's AuFC units, for its numbers
"$py" experiments/unstereo_eval/plot_us_vs_eta.py "$sweep"
