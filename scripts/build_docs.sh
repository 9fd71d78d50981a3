#!/usr/bin/env bash
# Build the API reference from the docstrings with pdoc: HTML pages for jaxassoc and every public module
# (every module whose dotted name has no part starting with "_"; named one by one, so a package's __all__,
# which lists what it re-exports, cannot hide a module from the reference).
# Usage: scripts/build_docs.sh [OUTPUT_DIR]   (default docs/api, which is generated: do not commit it)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/api}"
python="${PYTHON:-.venv/bin/python}"
[ -x "$python" ] || python=python
"$python" -c "import pdoc" 2>/dev/null || { echo "pdoc is missing: pip install -e '.[test]'" >&2; exit 1; }
# NamedTuple __init__ signatures carry jaxtyping annotations pdoc cannot evaluate, and a package named before
# its modules adds them again: silence only those two warnings.
mapfile -t modules < <("$python" -c 'import pkgutil, jaxassoc
for m in pkgutil.walk_packages(jaxassoc.__path__, "jaxassoc."):
    if not any(part.startswith("_") for part in m.name.split(".")):
        print(m.name)')
exec "$python" -W "ignore:Error parsing type annotation" -W "ignore:The module specification" -m pdoc --docformat restructuredtext --no-show-source -o "$out" \
  jaxassoc "${modules[@]}"
