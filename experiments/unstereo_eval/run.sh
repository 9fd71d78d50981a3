#!/usr/bin/env bash
# UnStereoEval (Belem et al. 2024) on every dataset, then the US-score-vs-eta figure.
#   experiments/unstereo_eval/run.sh                        # offline: the embedded SmolLM2-135M-Instruct
#   MODELS=mistral-7b-v0.1,llama-2-7b experiments/unstereo_eval/run.sh    # ported models of the paper (hub)
# models.csv lists the paper's 28 models and which of them the ports can run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
models=${MODELS:-smollm2-135m}
sweep=${SWEEP_DIR:-multirun/unstereo_eval}
"$py" -m jaxassoc -m metric=unstereo "model=$models" dataset=use5,use10,use20,winobias,winogender \
  "hydra.sweep.dir=$sweep" "$@"
"$py" experiments/unstereo_eval/plot_us_vs_eta.py "$sweep"
