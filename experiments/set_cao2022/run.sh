#!/usr/bin/env bash
# Cao et al. 2022 on the embedded SmolLM2 (causal adaptation): ILPS, ILPS* and SeT over every ABC template
# whose trait ends the prompt, aligned with the human ratings; the best template is chosen on the pilot
# groups and reported on the held-out groups, beside the mean over all templates.
# The three metrics share one forward pass per (template, group, trait word) through the on-disk cache.
# Masked LMs (bert-large-cased, roberta-large in the paper) are not wired into the app yet.
set -euo pipefail
cd "$(dirname "$0")/../.."
sweep=${SWEEP_DIR:-multirun/set_cao2022}
.venv/bin/jaxassoc -m metric=set,ilps,ilps_star dataset=abc "model=${MODELS:-smollm2-135m}" \
  'metric.templates=[all]' "hydra.sweep.dir=$sweep" "$@"
.venv/bin/jaxassoc-report "$sweep"
