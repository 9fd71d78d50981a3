#!/usr/bin/env bash
# The ZCA-WEAT paper's Experiments 1-3 as one Hydra sweep, then Table A1 and Figures 3-4.
#   experiments/zca_weat/run.sh                      # offline: the embedded GloVe-50d and MiniLM
#   MODELS=paper experiments/zca_weat/run.sh         # the paper's seven models, `paper` below (weights or hub access)
#   MODELS=glove-6b-100d,gpt2 experiments/zca_weat/run.sh   # any conf/model names
# Extra arguments are Hydra overrides for every job (e.g. stats.n_permutations=10000).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
cd "$root"
models=${MODELS:-glove-6b-50d,minilm-l6}
paper=glove-6b-100d,word2vec-googlenews,bert-base-cased,roberta-base,gpt2,unsup-simcse-bert-base-uncased,unsup-simcse-roberta-base
[ "$models" != paper ] || models=$paper
sweep=${SWEEP_DIR:-multirun/zca_weat}
"$py" -m jaxassoc -m metric=weat dataset=weat_caliskan2017 whitening=zca "model=$models" \
  stats.ties=strict stats.alternative=greater "hydra.sweep.dir=$sweep" "$@"  # the paper's p: Eq. 4 as printed (one-sided)
"$py" experiments/zca_weat/make_tables.py "$sweep"
