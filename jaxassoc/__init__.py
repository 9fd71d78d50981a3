"""jaxassoc: differentiable, jit-compiled association and social-bias metrics for language models.

Layers (imports flow downwards only)::

    jaxassoc.app                      Hydra entry point, one task module per metric, result store, reports
    jaxassoc.suites                   a metric's analysis: readouts and vectors into tables, tests, intervals
    jaxassoc.readouts                 model readouts: prompts, forward passes, scores of words and sentences
    jaxassoc.array_cache              on-disk cache of computed arrays (forward passes' outputs), keyed by model
    jaxassoc.metrics  jaxassoc.models  jaxassoc.embeddings
    jaxassoc.stats    jaxassoc.data    jaxassoc.resources

``metrics`` never imports ``models`` and ``models`` never imports ``metrics``: ``embeddings``,
``readouts`` and ``suites`` compose them. ``readouts`` never imports ``suites``, and nothing outside
``app`` imports the app.
"""

__version__ = "0.1.0"


def _source_tree_configs() -> None:
    """Make ``jaxassoc.conf`` (``pkg://jaxassoc.conf``) importable from a source checkout too.

    A wheel installs the configs as the package ``jaxassoc/conf``; in the source tree they are the top-level
    ``conf/`` folder beside this package, registered here under the same name, so the app and users' own
    Hydra apps find them the same way in both."""
    import importlib.util
    import sys
    from pathlib import Path

    package = Path(__file__).resolve().parent
    init = package.parent / "conf" / "__init__.py"
    if (package / "conf").is_dir() or not init.is_file() or "jaxassoc.conf" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("jaxassoc.conf", init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["jaxassoc.conf"] = module
    spec.loader.exec_module(module)
    setattr(sys.modules[__name__], "conf", module)


_source_tree_configs()
