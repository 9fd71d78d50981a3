#!/usr/bin/env bash
# Set up (first time only, with the test extra) and run the test suite.
# Tests marked `slow` run when CI=true or with `--all`; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
marker=(-m "not slow")
if [ "${CI:-}" = "true" ] || [ "${1:-}" = "--all" ]; then
  marker=()
  [ "${1:-}" = "--all" ] && shift
fi
exec .venv/bin/python -m pytest -q "${marker[@]}" "$@"
