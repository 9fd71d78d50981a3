#!/usr/bin/env bash
# Set up (first time only, with the test extra) and run the test suite.
# Tests marked `slow` run when CI=true or with `--all`; extra arguments go to pytest. The test files are
# spread over up to 4 worker processes (one per CPU; each file stays on one worker, so its module-scoped
# checkpoints are built once), longest files first (tests/conftest.py orders them by their seconds in the
# last run): JAXASSOC_TEST_WORKERS=1 runs them in this process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
marker=(-m "not slow")
if [ "${CI:-}" = "true" ] || [ "${1:-}" = "--all" ]; then
  marker=()
  [ "${1:-}" = "--all" ] && shift
fi
cpus=$(nproc)
workers=${JAXASSOC_TEST_WORKERS:-$(( cpus < 4 ? cpus : 4 ))}
parallel=()
[ "$workers" -gt 1 ] && parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
exec .venv/bin/python -m pytest -q "${parallel[@]}" "${marker[@]}" "$@"
