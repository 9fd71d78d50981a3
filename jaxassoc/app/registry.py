"""The metric registry: how the app finds the task behind ``metric=<name>``.

Built-in metrics and user-defined ones register the same way, so a researcher's metric runs through
the same Hydra app, result store and report without editing jaxassoc::

    from jaxassoc.app.registry import register_metric
    register_metric("my_metric", run=run_my_metric, config=MyMetricConfig, model_kinds=("causal",))

A module that registers metrics is loaded at start-up (and in every launcher worker, on first use) when
it is named in the environment variable ``JAXASSOC_PLUGINS`` (comma-separated module names) or exposes a
``jaxassoc.metrics`` entry point. A plugin cannot take the name of a metric registered before it.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from jaxassoc.app.config import MetricConfig, check_seed
from jaxassoc.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a task needs: the resolved config groups as plain objects."""

    model: Any
    metric: Any
    dataset: Any
    template: Any
    whitening: Any
    stats: Any
    seed: int
    output_dir: Path
    quiet: bool = False
    cache_dir: Path | None = None
    mesh: Any = None  # the jax.sharding.Mesh models are sharded over (mesh config group); None: one device

    def __post_init__(self) -> None:
        check_seed(self.seed)


@dataclasses.dataclass
class JobResult:
    """What a task returns: per-item scores, aggregate rows, provenance it adds, figures to save."""

    items: pd.DataFrame
    aggregates: pd.DataFrame
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)  # file stem -> matplotlib Figure
    summary: pd.DataFrame | None = None  # a compact table to print for a metric without views (default: aggregates)


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A registered metric. ``uses`` declares the shared options it reads: ``stats.<field>``,
    ``dataset.sample``, or a whole group (``stats``, ``template``, ``whitening``); None (a plugin that
    declares nothing) refuses nothing. ``ignores(job)`` names the options (shared or ``metric.<field>``)
    that this job's setting leaves unused, with why. The app refuses a non-default value of an option
    the metric does not use, naming the key (:mod:`jaxassoc.app.validation`). ``views(aggregates)`` splits
    the aggregate rows into compact titled tables for the console and the report (:mod:`jaxassoc.app.tables`);
    None: the job's ``summary`` on the console and the aggregates in the report. ``reads_dataset=False`` (a
    plugin that scores no dataset): no dataset is recorded in its rows or its resume key, and ``dataset=...``
    on its command line is refused."""

    name: str
    run: Callable[[Job], JobResult]
    config: type
    model_kinds: tuple[str, ...]  # which model kinds the metric can score
    description: str = ""
    uses: frozenset[str] | None = None
    ignores: Callable[[Job], Mapping[str, str]] | None = None
    views: Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]] | None = None
    reads_dataset: bool = True


METRICS: dict[str, MetricSpec] = {}
_loaded = False  # built-in metrics and plugins registered in this process


def register_metric(
    name: str,
    *,
    run: Callable[[Job], JobResult],
    config: type = MetricConfig,
    model_kinds: tuple[str, ...],
    description: str = "",
    uses: frozenset[str] | None = None,
    ignores: Callable[[Job], Mapping[str, str]] | None = None,
    views: Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]] | None = None,
    reads_dataset: bool = True,
) -> MetricSpec:
    """Make ``metric=<name>`` runnable. ``config`` must be a dataclass extending MetricConfig; ``uses``
    and ``ignores`` declare which shared options it reads, ``views`` its compact tables, ``reads_dataset``
    whether it scores a dataset at all (see :class:`MetricSpec`).

    A name belongs to the module that registered it first: another module registering the same name (a
    plugin shadowing a built-in metric) is refused; the same module registering it again (a reload) is not.
    """
    if not (dataclasses.is_dataclass(config) and issubclass(config, MetricConfig)):
        raise ConfigError(f"metric {name!r}: config {config!r} must be a dataclass extending MetricConfig")
    previous = METRICS.get(name)
    if previous is not None and _origin(previous.run) != _origin(run):
        raise ConfigError(
            f"metric {name!r} is already registered by {_origin(previous.run)[0]}; {_origin(run)[0]} cannot "
            f"replace it: register your metric under another name"
        )
    spec = MetricSpec(
        name=name,
        run=run,
        config=config,
        model_kinds=tuple(model_kinds),
        description=description,
        uses=None if uses is None else frozenset(uses),
        ignores=ignores,
        views=views,
        reads_dataset=reads_dataset,
    )
    METRICS[name] = spec
    return spec


def metric_module(spec: MetricSpec) -> str:
    """The module that defines a metric's run function (a plugin's module, or one of jaxassoc's)."""
    return _origin(spec.run)[0]


def _origin(run: Callable[..., Any]) -> tuple[str, str]:
    """(module, qualified name) of a metric's run function."""
    return getattr(run, "__module__", None) or "?", getattr(run, "__qualname__", None) or repr(run)


def load_metrics() -> dict[str, MetricSpec]:
    """Register the built-in metrics, then the plugins (:func:`load_plugins`), once per process.

    The app calls it at start-up, and :func:`get_metric` on first use, so a process that never ran the
    app's ``main`` (a Hydra launcher's worker: joblib, submitit, SLURM) finds every metric too.
    """
    global _loaded
    if not _loaded:
        from jaxassoc.app import builtin_metrics

        builtin_metrics.register_all()
        load_plugins()
        _loaded = True
    return METRICS


def get_metric(name: str) -> MetricSpec:
    if name not in METRICS:
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


def result_of(spec: MetricSpec, result: Any) -> JobResult:
    """``result`` when it is a :class:`JobResult`; ConfigError naming the metric and its run function
    otherwise (e.g. a plugin returning a dict)."""
    if isinstance(result, JobResult):
        return result
    module, qualname = _origin(spec.run)
    raise ConfigError(
        f"metric {spec.name!r}: {module}.{qualname} returned a {type(result).__name__}, not a JobResult; "
        f"return jaxassoc.app.registry.JobResult(items=<DataFrame>, aggregates=<DataFrame>)"
    )
