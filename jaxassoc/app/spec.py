"""What a metric is, in one place: the :class:`Job` a task receives, the :class:`JobResult` it returns and the
:class:`MetricSpec` that declares it (run function, config schema, model kinds, title, options used and
ignored, compact tables, effect sizes and figures for the report, whether interventions apply, default
dataset). Each task module (:mod:`jaxassoc.app.tasks`) ends with its spec; :mod:`jaxassoc.app.registry` names
them lazily; the console, the validation and the report read everything about a metric from its spec.

A leaf of the app: it imports the config schema only (the model and dataset loaders on a job's request).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import pandas as pd

from jaxassoc.app.config import (
    ERASERS,
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


def resolve(ref: Any) -> Any:
    """The object a lazy reference ``"package.module:name"`` names (imported now), or ``ref`` itself when it is
    not a string; ConfigError naming a reference that does not resolve."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"{ref!r} names nothing that can be imported ({e})") from e


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
    bias_term: Callable[..., Any] | None = None  # intervention=lora objective=metric: the bias metric's, resolved

    def __post_init__(self) -> None:
        check_seed(self.seed)
        static_ok = ("none", "hard_debias", *ERASERS)
        if self.model.kind == "static" and self.intervention.name not in static_ok:
            raise ConfigError(
                f"intervention={self.intervention.name} acts inside a language model; model {self.model.name!r} is "
                "static word vectors (model.kind=static): use intervention=hard_debias"
            )
        if self.model.kind != "static" and self.intervention.name == "hard_debias":
            raise ConfigError(
                f"intervention=hard_debias transforms static word vectors; model {self.model.name!r} is a "
                f"{self.model.kind} language model: use intervention=leace, inlp or sentence_debias"
            )

    def key(self) -> PRNGKeyArray:
        """``jax.random.key(seed)``: split it per purpose and per test (docs/methods.md §5.5)."""
        import jax

        return jax.random.key(self.seed)

    def language_model(self) -> LanguageModel:
        """The job's causal, masked, encoder or seq2seq model, loaded once per process (an audit's later
        jobs reuse it) and sharded over the job's mesh, with the job's ``intervention`` (heads and neurons
        ablated in every forward pass)."""
        from jaxassoc.app import interventions, model_loading

        model = model_loading.language_model(self.model, self.mesh)
        return interventions.with_intervention(
            model, self.intervention, cache_dir=self.cache_dir, progress=not self.quiet, seed=self.seed,
            bias_term=self.bias_term,
        )  # fmt: skip

    def static_embeddings(self) -> StaticEmbeddings:
        """The job's static word vectors (``model.kind=static``: GloVe, word2vec), with its intervention applied."""
        from jaxassoc.app import model_loading
        from jaxassoc.app.interventions import debiased_vectors

        return debiased_vectors(model_loading.static_embeddings(self.model), self.intervention)

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


class Effects(NamedTuple):
    """Where a metric's aggregate rows carry an effect size: its column, CI bounds, p-value and the name of the
    series in figures and rankings ("" with a ``series`` column: each row's own). ``se``: a standard-error
    column giving a normal 95 % CI where the rows have no bounds (CEAT). Rows whose ``effect`` is missing
    are not this series'; the unnamed series leaves out rows that carry a ``d_raw``."""

    series: str = ""
    effect: str = "effect_size"
    lo: str = "ci_low"
    hi: str = "ci_high"
    p: str = "p_value"
    se: str | None = None


class PlotInput(NamedTuple):
    """What a figure of the report is drawn from: the metric's aggregate rows of every job (``job`` and
    ``label`` columns: the job's varying settings), their effect sizes in long form (``job, test, series,
    effect, lo, hi, p, name, label``: :func:`jaxassoc.app.report.effects`), the metric's title, and the settings
    every job shares, as text."""

    rows: pd.DataFrame
    effects: pd.DataFrame
    title: str
    fixed: str


@dataclasses.dataclass(frozen=True)
class Plot:
    """One figure of a metric's report section: ``draw(PlotInput) -> Figure | None`` (None: nothing to draw
    for these rows), saved as ``<stem>_<metric>`` (PNG, PDF, SVG). ``draw`` may be a lazy
    ``"module:function"`` reference (:func:`resolve`); :mod:`jaxassoc.app.plots` has the built-in ones."""

    stem: str
    draw: Callable[[PlotInput], Any] | str


def _drawn_by(stem: str, function: str) -> Plot:
    return Plot(stem, f"jaxassoc.app.plots:{function}")


FOREST = _drawn_by("forest", "forest")
EFFECT_HEATMAP = _drawn_by("effect_sizes", "effect_heatmap")
EFFECT_PLOTS = (FOREST, EFFECT_HEATMAP)
"""The figures of a metric whose rows carry effect sizes (:attr:`MetricSpec.effects`): a forest plot of those
with a CI and a jobs x tests heatmap."""
RAW_VS_WHITENED = _drawn_by("raw_vs_whitened", "raw_vs_whitened")
PREFERENCES = _drawn_by("scores", "preferences")
HEADS = _drawn_by("heads", "heads")
CORRELATIONS = _drawn_by("correlations", "correlations")

EFFECT_SIZE = Effects()
"""The effect-size columns of a test row: ``effect_size``, ``ci_low``, ``ci_high``, ``p_value``."""
D_RAW_AND_WHITENED = (
    Effects("raw", "d_raw", "ci_low_raw", "ci_high_raw", "p_raw"),
    Effects("whitened", "d_whitened", "ci_low_whitened", "ci_high_whitened", "p_whitened"),
    EFFECT_SIZE,
)
"""WEAT's and SEAT's: d on raw and on ZCA-whitened vectors (and ``effect_size`` where a row has only one)."""
LANGUAGE_MODELS = ("causal", "masked", "encoder")
"""The model kinds of a metric that reads any language model's states."""


@dataclasses.dataclass(frozen=True)
class MetricSpec:
    """A metric, declared once. ``uses`` declares the shared options it reads: ``stats.<field>``,
    ``dataset.sample``, or a whole group (``stats``, ``template``, ``whitening``); None (a plugin that
    declares nothing) refuses nothing. ``ignores(job)`` names the options (shared or ``metric.<field>``)
    that this job's setting leaves unused, with why. The app refuses a non-default value of an option
    the metric does not use, naming the key (:mod:`jaxassoc.app.validation`). ``views(aggregates)`` splits
    the aggregate rows into compact titled tables for the console and the report (:mod:`jaxassoc.app.tables`);
    None: the job's ``summary`` on the console and the aggregates in the report. ``title``: its name in the
    report (default: ``name``); ``effects``: the effect sizes its rows carry (figures, ``--rank``; default: the
    conventional ``effect_size``, ``ci_low``, ``ci_high``, ``p_value`` columns); ``plots``: its report figures
    (default: :data:`EFFECT_PLOTS`, drawn where its rows have effect sizes). ``interventions=False``: a metric that
    intervenes on the model itself (``intervention=...`` refused). ``scores_tokens``: it scores sentences' token
    probabilities through ``readouts.sentence_scores``, where ``intervention=self_debias`` acts (refused
    otherwise). ``reads_dataset=False`` (a plugin that scores no dataset): no dataset is
    recorded in its rows or its resume key, and ``dataset=...`` on its command line is refused. ``dataset``:
    the dataset ``metric=<name>`` reads when the command line names none (None: the root config's default,
    ``weat_caliskan2017``). ``bias_term``: its differentiable score as a fine-tuning bias term
    (``intervention=lora intervention.objective=metric intervention.metric=<name>``): ``bias_term(model, bias_type,
    seed, *, heldout, temperature) -> jaxassoc.finetune.bias.BiasSetup``, or a lazy ``"module:function"``; None:
    it has none."""

    name: str
    run: Callable[[Job], JobResult]
    config: type
    model_kinds: tuple[str, ...]  # which model kinds the metric can score
    description: str = ""
    title: str = ""
    uses: frozenset[str] | None = None
    ignores: Callable[[Job], Mapping[str, str]] | None = None
    views: Callable[[pd.DataFrame], list[tuple[str, pd.DataFrame]]] | None = None
    effects: tuple[Effects, ...] = (EFFECT_SIZE,)
    plots: tuple[Plot, ...] = EFFECT_PLOTS
    interventions: bool = True
    scores_tokens: bool = False
    reads_dataset: bool = True
    dataset: str | None = None
    bias_term: Callable[..., Any] | str | None = None

    def __post_init__(self) -> None:
        if not (dataclasses.is_dataclass(self.config) and issubclass(self.config, MetricConfig)):
            raise ConfigError(
                f"metric {self.name!r}: config {self.config!r} must be a dataclass extending MetricConfig"
            )
        object.__setattr__(self, "model_kinds", tuple(self.model_kinds))
        object.__setattr__(self, "uses", None if self.uses is None else frozenset(self.uses))
        object.__setattr__(self, "title", self.title or self.name)
        object.__setattr__(self, "effects", tuple(self.effects))
        object.__setattr__(self, "plots", tuple(self.plots))

    @property
    def origin(self) -> tuple[str, str]:
        """(module, qualified name) of the run function."""
        run = self.run
        return getattr(run, "__module__", None) or "?", getattr(run, "__qualname__", None) or repr(run)

    def result_of(self, result: Any) -> JobResult:
        """``result`` when it is a :class:`JobResult`; ConfigError naming the metric and its run function
        otherwise (e.g. a plugin returning a dict)."""
        if isinstance(result, JobResult):
            return result
        module, qualname = self.origin
        raise ConfigError(
            f"metric {self.name!r}: {module}.{qualname} returned a {type(result).__name__}, not a JobResult; "
            f"return jaxassoc.plugin.JobResult(items=<DataFrame>, aggregates=<DataFrame>)"
        )
