#!/usr/bin/env bash
# RPAM validation sweep (Hodel et al. 2026, Tables 2/3/5/6, Figure 2) for one model, then the tables.
#
#   experiments/rpam/run.sh MODEL [OUT]
#
# MODEL: a conf/model name (smollm2-135m offline; the paper's gpt2, gpt2-large, gpt-neo-125m, mistral-7b-v0.1,
# mistral-7b-instruct-v0.2 and any other causal conf/model need the hub or a local copy). OUT: results folder (default
# experiments/rpam/results/MODEL). Finished jobs are skipped when rerun (Hydra resume).
# Environment knobs (empty = the paper's full setting):
#   SAMPLE_TP2=n        seeded subsample of n items for the TP2 tasks on WS-353, Bellezza, SST-2
#   SAMPLE_WS=n         seeded subsample of n WS-353 pairs with TP1
#   SAMPLE_DOWNSTREAM=n seeded subsample of n Bellezza words for the downstream ratings
#   DOWNSTREAM=0|1      run Experiment 3 (default: 1 for instruct models: smollm2-135m, *instruct*)
#   DOWNSTREAM_ARGS     extra overrides, e.g. "metric.max_new_tokens=8 metric.chat_template=false"
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}  # $PYTHON if set, else the project's venv (scripts/setup.sh), else python3
[ -n "${PYTHON:-}" ] || [ -x "$py" ] || py=python3
MODEL=${1:?usage: run.sh MODEL [OUT]}
OUT=${2:-experiments/rpam/results/$MODEL}
case "$MODEL" in *instruct*|smollm2*) default_down=1 ;; *) default_down=0 ;; esac
DOWNSTREAM=${DOWNSTREAM:-$default_down}
sample() { [ -n "${1:-}" ] && echo "dataset.sample=$1" || true; }
run() { /usr/bin/env time -f "%e s wall: $*" "$py" -m jaxassoc -m metric=rpam model="$MODEL" quiet=true \
          hydra.sweep.dir="$OUT" "$@"; }

run dataset=weat_ws template=tp1,tp2 stats.ties=strict stats.alternative=greater  # Table 2, Figure 2 (Eq. 4: one-sided count)
run dataset=bellezza template=tp1                                      # Table 3 (+ Table 6 ablation row)
run dataset=bellezza template=tp1 metric.group_size=5                  # Bellezza-5X
run dataset=wordsim353 template=tp1 $(sample "${SAMPLE_WS:-}")         # Table 3
run dataset=bellezza,wordsim353 template=tp2 $(sample "${SAMPLE_TP2:-}")
run dataset=bellezza template=tp2 metric.group_size=5
run dataset=sst2 template=tp2 $(sample "${SAMPLE_TP2:-}")              # Table 3 (SST-2 F1)
if [ "$DOWNSTREAM" = 1 ]; then                                         # Table 5 (Experiment 3)
  run dataset=bellezza template=tp1 metric.downstream=true $(sample "${SAMPLE_DOWNSTREAM:-}") ${DOWNSTREAM_ARGS:-}
fi
"$py" "$root/experiments/rpam/make_tables.py" "$OUT"
