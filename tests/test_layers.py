"""The library's layers import downwards only (``jaxassoc/__init__.py``): metrics never import models,
models never metrics, data and stats import neither, nothing outside the app imports the app, and no module
imports another that (directly or not) imports it back; the readouts the app and the examples share live in
the library, and so do the suites (what a metric makes of them), which the readouts never import."""

import ast
from pathlib import Path

import pytest

import jaxassoc

PACKAGE = Path(jaxassoc.__file__).parent


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def _offenders(layer: str, forbidden: str) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in sorted(_imports(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]


def test_metrics_and_models_do_not_import_each_other():
    assert _offenders("metrics", "jaxassoc.models") == []
    assert _offenders("models", "jaxassoc.metrics") == []


LAYERS = {  # each layer: the layers of the package it may import (besides itself, errors, io, progress, ...)
    "stats": set(),
    "data": set(),
    "resources": set(),
    "metrics": {"stats", "data"},
    "models": {"resources"},
    "embeddings": {"models", "metrics", "stats", "data", "resources"},
    "array_cache": {"models"},
    "readouts": {"models", "metrics", "embeddings", "stats", "data", "resources", "array_cache"},
    "mitigation": {"readouts", "models", "metrics", "embeddings", "stats", "data", "resources", "array_cache"},
    "suites": {
        "mitigation",
        "readouts",
        "models",
        "metrics",
        "embeddings",
        "stats",
        "data",
        "resources",
        "array_cache",
    },
}
LAYER_NAMES = {
    "stats",
    "data",
    "resources",
    "metrics",
    "models",
    "embeddings",
    "array_cache",
    "mitigation",
    "readouts",
    "suites",
    "app",
    "plugin",
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_the_layers_below_it(layer):
    paths = sorted((PACKAGE / layer).rglob("*.py")) if (PACKAGE / layer).is_dir() else [PACKAGE / f"{layer}.py"]
    found = [
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in paths
        for name in sorted(_imports(path))
        if name.startswith("jaxassoc.")
        and (top := name.split(".")[1]) in LAYER_NAMES
        and top != layer
        and top not in LAYERS[layer]
    ]
    assert found == []


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its file (function-level imports too)."""
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in PACKAGE.rglob("*.py")
    }

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    return {
        module: {r for name in _imports(path) if (r := resolve(name)) not in ("", module, "jaxassoc")}
        for module, path in modules.items()
    }


def test_no_import_circle():
    graph = _module_graph()
    circles = []
    for start in graph:  # a module that reaches itself again through what it imports
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                todo.extend(graph.get(module, ()))
    assert circles == []


def test_only_the_app_imports_the_app():
    for layer in ("suites", "readouts", "embeddings", "metrics", "models", "stats", "data"):
        assert _offenders(layer, "jaxassoc.app") == [], layer


def test_the_app_has_one_task_module_per_metric_and_no_jobs_or_pipelines():
    from jaxassoc.app.registry import load_metrics

    app = PACKAGE / "app"
    assert not (app / "jobs").exists() and not (app / "pipelines").exists()
    modules = {spec.run.__module__ for spec in load_metrics().values() if spec.run.__module__.startswith("jaxassoc.")}
    assert modules == {
        f"jaxassoc.app.tasks.{m}"
        for m in (
            "weat",
            "rpam",
            "stereotypes",
            "unstereo",
            "ceat",
            "intersectional",
            "crows_pairs",
            "stereoset",
            "seat",
            "wefe",
            "mediation",
        )
    }
