"""The metric registry: how the app finds the pipeline behind ``metric=<name>``.

Built-in metrics and user-defined ones register the same way, so a researcher's metric runs through
the same Hydra app, result store and report without editing jaxassoc::

    from jaxassoc.app.registry import register_metric
    register_metric("my_metric", run=run_my_metric, config=MyMetricConfig, model_kinds=("causal",))

A module that registers metrics is loaded at start-up when it is named in the environment variable
``JAXASSOC_PLUGINS`` (comma-separated module names) or exposes a ``jaxassoc.metrics`` entry point.
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

from jaxassoc.app.config import MetricConfig
from jaxassoc.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a pipeline needs: the resolved config groups as plain objects."""

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


@dataclasses.dataclass
class JobResult:
    """What a pipeline returns: per-item scores, aggregate rows, provenance it adds, figures to save."""

    items: pd.DataFrame
    aggregates: pd.DataFrame
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    figures: dict[str, Any] = dataclasses.field(default_factory=dict)  # file stem -> matplotlib Figure
    summary: pd.DataFrame | None = None  # a compact view to print (default: the aggregates)


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A registered metric. ``uses`` declares the shared options it reads: ``stats.<field>``,
    ``dataset.sample``, or a whole group (``stats``, ``template``, ``whitening``); None (a plugin that
    declares nothing) refuses nothing. ``ignores(job)`` names the options (shared or ``metric.<field>``)
    that this job's setting leaves unused, with why. The app refuses a non-default value of an option
    the metric does not use, naming the key (:mod:`jaxassoc.app.validation`)."""

    name: str
    run: Callable[[Job], JobResult]
    config: type
    model_kinds: tuple[str, ...]  # which model kinds the metric can score
    description: str = ""
    uses: frozenset[str] | None = None
    ignores: Callable[[Job], Mapping[str, str]] | None = None


METRICS: dict[str, MetricSpec] = {}


def register_metric(
    name: str,
    *,
    run: Callable[[Job], JobResult],
    config: type = MetricConfig,
    model_kinds: tuple[str, ...],
    description: str = "",
    uses: frozenset[str] | None = None,
    ignores: Callable[[Job], Mapping[str, str]] | None = None,
) -> MetricSpec:
    """Make ``metric=<name>`` runnable. ``config`` must be a dataclass extending MetricConfig; ``uses``
    and ``ignores`` declare which shared options it reads (see :class:`MetricSpec`)."""
    if not (dataclasses.is_dataclass(config) and issubclass(config, MetricConfig)):
        raise ConfigError(f"metric {name!r}: config {config!r} must be a dataclass extending MetricConfig")
    spec = MetricSpec(name=name, run=run, config=config, model_kinds=tuple(model_kinds), description=description,
                      uses=None if uses is None else frozenset(uses), ignores=ignores)
    METRICS[name] = spec
    return spec


def get_metric(name: str) -> MetricSpec:
    try:
        return METRICS[name]
    except KeyError:
        raise ConfigError(f"unknown metric {name!r}; known metrics: {sorted(METRICS)}") from None


def load_plugins() -> list[str]:
    """Import the modules named in JAXASSOC_PLUGINS and the ``jaxassoc.metrics`` entry points."""
    loaded = []
    for module in filter(None, (m.strip() for m in os.environ.get("JAXASSOC_PLUGINS", "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(f"JAXASSOC_PLUGINS names {module!r}, which cannot be imported: {e}") from e
        loaded.append(module)
    for entry in importlib.metadata.entry_points(group="jaxassoc.metrics"):
        entry.load()
        loaded.append(entry.value)
    return loaded
