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
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from jaxassoc.app.config import (
    DatasetConfig,
    InterventionConfig,
    MetricConfig,
    ModelConfig,
    StatsConfig,
    TemplateConfig,
    WhiteningConfig,
    check_seed,
)
from jaxassoc.errors import ConfigError

if TYPE_CHECKING:
    from jax.sharding import Mesh
    from jaxtyping import PRNGKeyArray

    from jaxassoc.data.weat import WeatSuite
    from jaxassoc.embeddings.static import StaticEmbeddings
    from jaxassoc.models.base import LanguageModel


@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a task needs: the resolved config groups as plain objects, and what a metric asks of
    its job without the app's internals (:mod:`jaxassoc.plugin`): the model (:meth:`language_model`,
    :meth:`static_embeddings`), the WEAT tests its dataset names (:meth:`weat_suite`), the provenance to
    record (:meth:`provenance`) and its PRNG key (:meth:`key`)."""

    model: ModelConfig
    metric: MetricConfig  # the metric's own config class (a MetricConfig subclass)
    dataset: DatasetConfig  # DatasetConfig, or CustomWeatConfig / CustomSentencesConfig
    template: TemplateConfig
    whitening: WhiteningConfig
    stats: StatsConfig
    seed: int
    output_dir: Path
    quiet: bool = False
    cache_dir: Path | None = None
    mesh: Mesh | None = None  # the mesh models are sharded over (mesh config group); None: one device
    intervention: InterventionConfig = dataclasses.field(default_factory=InterventionConfig)  # ablation, if any

    def __post_init__(self) -> None:
        check_seed(self.seed)
        if self.intervention.name != "none" and self.model.kind == "static":
            raise ConfigError(
                f"intervention={self.intervention.name} acts inside a language model; model {self.model.name!r} is "
                "static word vectors (model.kind=static)"
            )

    def key(self) -> PRNGKeyArray:
        """``jax.random.key(seed)``: split it per purpose and per test (docs/methods.md §5.5)."""
        import jax

        return jax.random.key(self.seed)

    def language_model(self) -> LanguageModel:
        """The job's causal, masked, encoder or seq2seq model, loaded once per process (an audit's later
        jobs reuse it) and sharded over the job's mesh, with the job's ``intervention`` (heads and neurons
        ablated in every forward pass)."""
        from jaxassoc.app import model_loading

        model = model_loading.language_model(self.model, self.mesh)
        return model_loading.with_intervention(model, self.intervention, self.metric.name)

    def static_embeddings(self) -> StaticEmbeddings:
        """The job's static word vectors (``model.kind=static``: GloVe, word2vec)."""
        from jaxassoc.app import model_loading

        return model_loading.static_embeddings(self.model)

    def weat_suite(self) -> WeatSuite:
        """The WEAT tests the job's dataset names: a packaged suite or the user's own (``custom_weat``)."""
        from jaxassoc.app import datasets

        return datasets.weat_suite(self.dataset)

    def provenance(self, model: LanguageModel | StaticEmbeddings | None = None) -> dict[str, Any]:
        """What a result should record beyond the config (which the app records itself): the model's
        weight and tokenizer hashes, file format and dtype, and the dataset's version (a packaged
        dataset's content hash, or a custom WEAT suite's words hash). Return it in ``JobResult.provenance``."""
        from jaxassoc import data
        from jaxassoc.app import datasets, model_loading

        out = model_loading.model_provenance(self.model, model) if model is not None else {}
        if self.dataset.name in datasets.WEAT_DATASETS:
            out["dataset_version"] = datasets.dataset_version(self.dataset, self.weat_suite())
        elif self.dataset.name in data.DATASETS:
            out["dataset_version"] = data.dataset_info(self.dataset.name).version
        return out


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
    on its command line is refused. ``dataset``: the dataset ``metric=<name>`` reads when the command line
    names none (None: the root config's default, ``weat_caliskan2017``)."""

    name: str
    run: Callable[[Job], JobResult]
    config: type
    model_kinds: tuple[str, ...]  # which model kinds the metric can score
    description: str = ""
    uses: frozenset[str] | None = None
    ignores: Callable[[Job], Mapping[str, str]] | None = None
    views: Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]] | None = None
    reads_dataset: bool = True
    dataset: str | None = None


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
    dataset: str | None = None,
) -> MetricSpec:
    """Make ``metric=<name>`` runnable. ``config`` must be a dataclass extending MetricConfig; ``uses``
    and ``ignores`` declare which shared options it reads, ``views`` its compact tables, ``reads_dataset``
    whether it scores a dataset at all, ``dataset`` the one it reads by default (see :class:`MetricSpec`).

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
        dataset=dataset,
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
