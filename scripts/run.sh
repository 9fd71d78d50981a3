#!/usr/bin/env bash
# Set up (first time only) and run the main job: the association audit on the embedded offline models.
# Extra arguments are Hydra overrides, e.g. `scripts/run.sh stats.n_permutations=10000`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/jaxassoc "$@"
