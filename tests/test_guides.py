"""The guides' code runs: every ```python block of README.md, docs/*.md, docs/methods/*.md and examples/README.md
is run in a fresh interpreter (8 simulated CPU devices, as the mesh guide needs), except a block marked
``<!-- excerpt of FILE ... -->``, whose every line (blank lines, comments and lines with ``...`` aside) must
appear in one of the files it names, so an excerpt cannot drift from the code it quotes.

docs/methods.md is an index of docs/methods/*.md: every section number cited as "docs/methods.md §N.M" anywhere
in the tree is listed there, with a link to its file and heading."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs").glob("methods/*.md")),
    ROOT / "examples" / "README.md",
]
BLOCK = re.compile(r"(?:<!-- excerpt of (?P<files>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks():
    for guide in GUIDES:
        text = guide.read_text()
        for n, match in enumerate(BLOCK.finditer(text), start=1):
            line = text[: match.start("code")].count("\n") + 1
            yield pytest.param(
                match["code"],
                (match["files"] or "").split(),
                id=f"{guide.relative_to(ROOT)}:{line}",
                marks=pytest.mark.slow if "load_model(" in match["code"] else (),
            )


CASES = list(blocks())


def test_the_guides_have_code_to_check():
    assert len(CASES) >= 6


@pytest.mark.process  # each runnable block in its own interpreter
@pytest.mark.parametrize("code, files", CASES)
def test_guide_block(code, files, tmp_path):
    if files:
        sources = "\n".join((ROOT / f).read_text() for f in files)
        quoted = {line.strip() for line in sources.splitlines()}
        absent = [
            line
            for line in code.splitlines()
            if line.strip() and not line.strip().startswith("#") and "..." not in line and line.strip() not in quoted
        ]
        assert not absent, f"the excerpt of {files} has lines the files no longer hold: {absent}"
        return
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_readme_maps_every_doc():
    readme = (ROOT / "README.md").read_text()
    unmapped = [
        p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"| [`docs/{p.name}`](docs/{p.name}) |" not in readme
    ]
    assert not unmapped, f"docs the README's map of the docs does not list: {unmapped}"


# --- docs/methods.md: an index of docs/methods/*.md that keeps every cited section number -----------------------

METHODS = ROOT / "docs" / "methods.md"
INDEX_LINK = re.compile(
    r"\[§(?P<number>\d+(?:\.\d+)?) [^\]]*\]\((?P<file>methods/[\w.]+\.md)(?:#(?P<anchor>[\w-]+))?\)"
)
CITATION = re.compile(
    r"methods(?:\.md)?`?[\s#]*(?P<run>§\d+(?:\.\d+)?(?:(?:\s*[–-]\s*|,\s*§|\s+and\s+§)\d+(?:\.\d+)?)*)"
)
CITING = ("README.md", "jaxassoc", "docs", "tests", "conf", "examples", "experiments", "benchmarks", "scripts")


def anchors(markdown: Path) -> set[str]:
    """GitHub's anchor of each heading: the rendered text lower-cased, punctuation dropped, spaces as hyphens."""
    titles = re.findall(r"^#+ (.*)$", markdown.read_text(), flags=re.M)
    return {
        re.sub(r"[^\w\- ]", "", re.sub(r"\\(.)", r"\1", t.replace("`", "")).lower()).replace(" ", "-") for t in titles
    }


def test_the_methods_index_links_every_section_to_its_heading():
    links = list(INDEX_LINK.finditer(METHODS.read_text()))
    numbers = [link["number"] for link in links]
    assert len(numbers) == len(set(numbers)) and {"1", "5.5", "10.8"} <= set(numbers)
    broken = [
        link[0]
        for link in links
        if not (METHODS.parent / link["file"]).is_file()
        or (link["anchor"] and link["anchor"] not in anchors(METHODS.parent / link["file"]))
        or not re.search(rf"^#+ §?{re.escape(link['number'])} ", (METHODS.parent / link["file"]).read_text(), re.M)
    ]
    assert not broken, f"links of {METHODS.name} that name no heading of that number: {broken}"
    listed = {path.relative_to(METHODS.parent).as_posix() for path in (METHODS.parent / "methods").glob("*.md")}
    assert listed - {"methods/references.md"} == {link["file"] for link in links}


def test_every_cited_methods_section_is_in_the_index():
    indexed = {link["number"] for link in INDEX_LINK.finditer(METHODS.read_text())}
    files = [ROOT / "README.md"] + [
        path
        for top in CITING[1:]
        for path in (ROOT / top).rglob("*")
        if path.suffix in {".py", ".md", ".yaml", ".sh", ".txt"} and path.is_file()
    ]
    cited = {}
    for path in files:
        for match in CITATION.finditer(path.read_text(errors="replace")):
            for number in re.findall(r"\d+(?:\.\d+)?", match["run"]):
                cited.setdefault(number, path.relative_to(ROOT).as_posix())
    assert len(cited) >= 30
    missing = {number: where for number, where in cited.items() if number not in indexed}
    assert not missing, f"sections cited as docs/methods.md §N that its index does not list: {missing}"


# --- docs/testing.md: which test files cover which module ------------------------------------------------------

PACKAGE = ROOT / "jaxassoc"
COVERAGE_ROW = re.compile(r"^\| `(?P<module>jaxassoc/[\w/]+(?:\.py|/))` \| (?P<cell>.*) \|$", re.M)
TASK_OF_METRIC = {"set": "stereotypes", "ilps": "stereotypes", "ilps_star": "stereotypes"}


def _module_file(dotted: str) -> Path | None:
    path = ROOT / dotted.replace(".", "/")
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def _defining_file(module: str, name: str) -> Path | None:
    """The file ``from module import name`` reads: the submodule ``name``, else the module that defines it,
    following a package's re-exports."""
    for _ in range(5):
        if (sub := _module_file(f"{module}.{name}")) is not None:
            return sub
        path = _module_file(module)
        if path is None or path.name != "__init__.py":
            return path
        reexports = {
            alias.asname or alias.name: (node.module, alias.name)
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("jaxassoc")
            for alias in node.names
        }
        if name not in reexports:
            return path
        module, name = reexports[name]
    return None


def _covered(path: Path) -> set[str]:
    """The rows of the table a file imports (a family folder as one row) or, for a test, runs as a metric."""
    files = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            files |= {
                f for alias in node.names if alias.name.startswith("jaxassoc") and (f := _module_file(alias.name))
            }
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("jaxassoc"):
            files |= {f for alias in node.names if (f := _defining_file(node.module, alias.name))}
    for metric in re.findall(r"metric=(\w+)", path.read_text()):
        files.add(PACKAGE / "app" / "tasks" / f"{TASK_OF_METRIC.get(metric, metric)}.py")
    rows = set()
    for file in files:
        parts = file.relative_to(ROOT).parts
        rows.add("/".join(parts[:3]) + "/" if len(parts) >= 4 and parts[1] == "models" else "/".join(parts))
    return rows


def test_the_testing_map_names_tests_that_cover_each_module():
    rows = list(COVERAGE_ROW.finditer((ROOT / "docs" / "testing.md").read_text()))
    assert len(rows) >= 100
    wrong = []
    for row in rows:
        module, cell = row["module"], row["cell"]
        if not (ROOT / module).exists():
            wrong.append(f"{module}: no such module")
            continue
        through_users = cell.startswith("none directly")  # then the names are the package modules that import it
        for name in re.findall(r"`([\w/]+(?:\.py|/))`", cell):
            path = (PACKAGE if through_users else ROOT / "tests") / name
            paths = sorted(path.rglob("*.py")) if name.endswith("/") else [path]
            if not path.exists() or not any(module in _covered(p) for p in paths):
                wrong.append(f"{module}: {name}")
    assert not wrong, f"rows of docs/testing.md's module table that are no longer true: {wrong}"
