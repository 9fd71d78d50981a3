"""docs/bad_inputs.md names, for each bad input or fault, the test that holds it: every named test exists."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "docs" / "bad_inputs.md"
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def defined_functions(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def test_every_row_names_a_test_that_exists():
    rows = [line for line in CATALOGUE.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    cases = [row for row in rows if not row.startswith("| case |")]
    assert len(cases) >= 60
    missing, untested = [], [row for row in cases if not TEST_REF.search(row)]
    for row in cases:
        for file, name in TEST_REF.findall(row):
            if not (ROOT / file).is_file() or name not in defined_functions(ROOT / file):
                missing.append(f"{file}::{name}")
    assert not untested, f"rows without a test: {untested[:3]}"
    assert not missing, f"tests named in {CATALOGUE.name} that do not exist: {sorted(set(missing))}"
