"""The metric registry: how the app finds the :class:`~jaxassoc.app.spec.MetricSpec` behind ``metric=<name>``.

Built-in metrics are named lazily (:data:`BUILTIN`: ``"module:object"``, the spec each task module ends
with), so asking for one metric imports its task module only. A researcher's metric registers the same
spec, so it runs through the same Hydra app, result store and report without editing jaxassoc::

    from jaxassoc.plugin import register_metric
    register_metric("my_metric", run=run_my_metric, config=MyMetricConfig, model_kinds=("causal",))

A module that registers metrics is loaded at start-up (and in every launcher worker, on first use) when
it is named in the environment variable ``JAXASSOC_PLUGINS`` (comma-separated module names) or exposes a
``jaxassoc.metrics`` entry point. A plugin cannot take the name of a metric registered before it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from typing import Any, Callable

from jaxassoc.app.spec import MetricSpec, resolve
from jaxassoc.errors import ConfigError

_TASKS = "jaxassoc.app.tasks"
BUILTIN = {
    "weat": f"{_TASKS}.weat:SPEC",
    "wefe": f"{_TASKS}.wefe:SPEC",
    "seat": f"{_TASKS}.seat:SPEC",
    "rpam": f"{_TASKS}.rpam:SPEC",
    "ilps": f"{_TASKS}.stereotypes:ILPS",
    "ilps_star": f"{_TASKS}.stereotypes:ILPS_STAR",
    "set": f"{_TASKS}.stereotypes:SET",
    "unstereo": f"{_TASKS}.unstereo:SPEC",
    "ceat": f"{_TASKS}.ceat:SPEC",
    "intersectional": f"{_TASKS}.intersectional:SPEC",
    "crows_pairs": f"{_TASKS}.crows_pairs:SPEC",
    "mediation": f"{_TASKS}.mediation:SPEC",
    "stereoset": f"{_TASKS}.stereoset:SPEC",
}
"""The built-in metrics: name -> the spec, as a lazy ``"module:object"`` reference."""

METRICS: dict[str, MetricSpec] = {}
_loaded = False  # every built-in metric and plugin registered in this process


def register(spec: MetricSpec) -> MetricSpec:
    """Make ``metric=<spec.name>`` runnable. A name belongs to the module that registered it first: another
    module registering the same name (a plugin shadowing a built-in metric) is refused; the same module
    registering it again (a reload) is not."""
    name = spec.name
    previous = METRICS.get(name)
    if previous is None and name in BUILTIN and not BUILTIN[name].startswith(spec.origin[0] + ":"):
        previous = _builtin(name)
    if previous is not None and previous.origin != spec.origin:
        raise ConfigError(
            f"metric {name!r} is already registered by {previous.origin[0]}; {spec.origin[0]} cannot "
            f"replace it: register your metric under another name"
        )
    METRICS[name] = spec
    return spec


def register_metric(name: str, *, run: Callable, model_kinds: tuple[str, ...], **fields: Any) -> MetricSpec:
    """:func:`register` of ``MetricSpec(name, run, model_kinds=..., **fields)`` (``config`` defaults to
    :class:`~jaxassoc.app.config.MetricConfig`; the fields: :class:`~jaxassoc.app.spec.MetricSpec`)."""
    from jaxassoc.app.config import MetricConfig

    fields.setdefault("config", MetricConfig)
    return register(MetricSpec(name=name, run=run, model_kinds=model_kinds, **fields))


def _builtin(name: str) -> MetricSpec:
    spec = resolve(BUILTIN[name])
    if not isinstance(spec, MetricSpec) or spec.name != name:
        raise ConfigError(f"{BUILTIN[name]!r} is not the MetricSpec of metric {name!r}")
    METRICS.setdefault(name, spec)
    return METRICS[name]


def metric_module(spec: MetricSpec) -> str:
    """The module that defines a metric's run function (a plugin's module, or one of jaxassoc's)."""
    return spec.origin[0]


def load_metrics() -> dict[str, MetricSpec]:
    """Every built-in metric, then the plugins (:func:`load_plugins`), registered once per process.

    The app calls it at start-up, and :func:`get_metric` when a name is neither built in nor registered, so a
    process that never ran the app's ``main`` (a Hydra launcher's worker: joblib, submitit, SLURM) finds every
    metric too."""
    global _loaded
    if not _loaded:
        for name in BUILTIN:
            _builtin(name)
        load_plugins()
        _loaded = True
    return METRICS


def get_metric(name: str) -> MetricSpec:
    """The spec of ``metric=<name>``: a built-in one imports its task module only."""
    if name in METRICS:
        return METRICS[name]
    if name in BUILTIN:
        return _builtin(name)
    load_metrics()
    try:
        return METRICS[name]
    except KeyError:
        raise ConfigError(f"unknown metric {name!r}; known metrics: {sorted(METRICS)}") from None


def load_plugins() -> list[str]:
    """Import the modules named in JAXASSOC_PLUGINS and the ``jaxassoc.metrics`` entry points."""
    loaded = []
    for module in filter(None, (m.strip() for m in os.environ.get("JAXASSOC_PLUGINS", "").split(","))):
        _import_plugin(f"JAXASSOC_PLUGINS names {module!r}", lambda m=module: importlib.import_module(m))
        loaded.append(module)
    for entry in importlib.metadata.entry_points(group="jaxassoc.metrics"):
        _import_plugin(f"the jaxassoc.metrics entry point {entry.name!r} ({entry.value})", entry.load)
        loaded.append(entry.value)
    return loaded


def _import_plugin(what: str, load: Callable[[], Any]) -> None:
    try:
        load()
    except ImportError as e:
        raise ConfigError(f"{what}, which cannot be imported: {e}") from e
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from e
