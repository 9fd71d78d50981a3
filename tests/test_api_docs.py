"""The public API and its reference pages cannot rot: every exported name exists and is documented, every
public kernel of metrics/embeddings is exported, and ``scripts/build_docs.sh`` (pdoc) builds pages that
show the key symbols."""

import importlib
import inspect
import pkgutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jaxassoc.metrics", "jaxassoc.models", "jaxassoc.embeddings", "jaxassoc.stats")
KEY_SYMBOLS = {
    "metrics": [
        "rpam_effect_size",
        "weat_effect_size",
        "RpamTestResult",
        "WeatResult",
        "SetResult",
        "set_optax_kernel",
        "sc_weat_effect_size",
        "unstereo_eval",
        "random_effects",
    ],
    "models": ["load_model", "LanguageModel", "Head", "ForwardOutput", "run_batched"],
    "embeddings": [
        "apply_zca",
        "fit_zca",
        "StaticEmbeddings",
        "sentence_vectors",
        "ContextualWordVectors",
        "token_states",
    ],
    "stats": ["permutation_test", "bootstrap_ci", "spearman", "kendall_tau_b"],
}


@pytest.mark.parametrize("name", PACKAGES)
def test_exports_exist_and_are_documented(name):
    package = importlib.import_module(name)
    assert package.__doc__ and len(package.__doc__) > 200, f"{name} needs a field-guide module docstring"
    assert len(set(package.__all__)) == len(package.__all__)
    for symbol in package.__all__:
        obj = getattr(package, symbol)  # AttributeError names a stale export
        if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj) or hasattr(obj, "__wrapped__"):
            assert inspect.getdoc(obj), f"{name}.{symbol} has no docstring"


@pytest.mark.parametrize("name", ["jaxassoc.metrics", "jaxassoc.embeddings"])
def test_every_public_kernel_is_exported(name):
    package = importlib.import_module(name)
    missing = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{name}.{info.name}")
        for symbol, obj in vars(module).items():
            defined_here = getattr(obj, "__module__", None) == module.__name__
            if symbol.startswith("_") or not defined_here or not callable(obj):
                continue
            # a function named like its module is reached through the module (metrics.weat.weat)
            if symbol not in package.__all__ and symbol != info.name:
                missing.append(f"{info.name}.{symbol}")
    assert not missing, f"add these to {name}.__all__ (and its docstring): {missing}"


def test_result_namedtuples_are_exported():
    metrics = importlib.import_module("jaxassoc.metrics")
    for symbol in metrics.__all__:
        obj = getattr(metrics, symbol)
        if inspect.isclass(obj) and issubclass(obj, tuple):
            assert hasattr(obj, "_fields") and inspect.getdoc(obj)


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory):
    out = tmp_path_factory.mktemp("api")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh"), str(out)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.mark.slow  # builds the API docs with pdoc: ~17 s (issue 38: the default suite's budget)
@pytest.mark.process  # scripts/build_docs.sh: bash and pdoc
def test_api_pages_show_the_key_symbols(built_docs):
    assert (built_docs / "index.html").is_file() and (built_docs / "search.js").is_file()
    for page, symbols in KEY_SYMBOLS.items():
        html = (built_docs / "jaxassoc" / f"{page}.html").read_text()
        absent = [s for s in symbols if f'id="{s}"' not in html]
        assert not absent, f"docs page {page}.html lacks {absent}"
    rpam_page = (built_docs / "jaxassoc" / "metrics" / "rpam.html").read_text()
    assert "Hodel" in rpam_page and 'id="rpam_effect_size"' in rpam_page


def public_modules() -> list[str]:
    """Every module of jaxassoc whose dotted name has no part starting with ``_``."""
    jaxassoc = importlib.import_module("jaxassoc")
    names = [m.name for m in pkgutil.walk_packages(jaxassoc.__path__, "jaxassoc.")]
    return ["jaxassoc", *(n for n in names if not any(part.startswith("_") for part in n.split(".")))]


@pytest.mark.slow  # shares the built docs (issue 38: the default suite's budget)
@pytest.mark.process  # scripts/build_docs.sh: bash and pdoc
def test_every_public_module_has_a_page(built_docs):
    modules = public_modules()
    assert {"jaxassoc.models.heads", "jaxassoc.embeddings.static", "jaxassoc.plugin"} <= set(modules)
    missing = [m for m in modules if not (built_docs / (m.replace(".", "/") + ".html")).is_file()]
    assert not missing, f"scripts/build_docs.sh leaves these public modules out of the API docs: {missing}"
    assert 'id="Job"' in (built_docs / "jaxassoc" / "plugin.html").read_text()
