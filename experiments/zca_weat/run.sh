#!/usr/bin/env bash
# The ZCA-WEAT paper's Experiments 1-3 as one Hydra sweep, then Table A1 and Figures 3-4.
#   experiments/zca_weat/run.sh                      # offline: the embedded GloVe-50d and MiniLM
#   MODELS=glove-6b-100d,word2vec-googlenews,bert-base-cased,roberta-base,gpt2,unsup-simcse-bert-base-uncased,unsup-simcse-roberta-base \
#     experiments/zca_weat/run.sh                    # the paper's seven models (weights or hub access needed)
# Extra arguments are Hydra overrides for every job (e.g. stats.n_permutations=10000).
set -euo pipefail
cd "$(dirname "$0")/../.."
models=${MODELS:-glove-6b-50d,minilm-l6}
sweep=${SWEEP_DIR:-multirun/zca_weat}
.venv/bin/jaxassoc -m metric=weat dataset=weat_caliskan2017 whitening=zca "model=$models" \
  "hydra.sweep.dir=$sweep" "$@"
.venv/bin/python experiments/zca_weat/make_tables.py "$sweep"
