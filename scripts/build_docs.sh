#!/usr/bin/env bash
# Build the API reference from the docstrings with pdoc: HTML pages for jaxassoc and every submodule.
# Usage: scripts/build_docs.sh [OUTPUT_DIR]   (default docs/api, which is generated: do not commit it)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/api}"
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python
"$python" -c "import pdoc" 2>/dev/null || { echo "pdoc is missing: pip install -e '.[test]'" >&2; exit 1; }
# NamedTuple __init__ signatures carry jaxtyping annotations pdoc cannot evaluate: silence only those.
exec "$python" -W "ignore:Error parsing type annotation" -m pdoc --docformat restructuredtext --no-show-source -o "$out" \
  jaxassoc '!jaxassoc.__main__'
