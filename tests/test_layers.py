"""The library's layers import downwards only (``jaxassoc/__init__.py``): metrics never import models,
models never metrics, and nothing outside the app imports the app; the readouts the app and the examples
share live in the library."""

import ast
from pathlib import Path

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


def test_only_the_app_imports_the_app():
    for layer in ("readouts", "embeddings", "metrics", "models", "stats", "data"):
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
