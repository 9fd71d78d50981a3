"""Structured configs: the schema every Hydra config group is validated against.

Each group's YAML files (``conf/<group>/*.yaml``) are checked against a dataclass registered here in
Hydra's ConfigStore, so an unknown key or a value of the wrong type fails at start-up with a message
naming the key, before any model is loaded. Metric-specific options live in one dataclass per metric
(``metric/<name>_schema``), which a metric's YAML names in its ``defaults`` list.

Values are range-checked in each dataclass's ``__post_init__``, which runs when the app turns the composed
config into objects (:func:`jaxassoc.app.main.make_job`), so ``stats.alpha=2`` fails naming the key before
any model is loaded. A field that cannot change a result (batch sizes, chunking) says so with
``metadata={"affects_results": False}`` (:data:`NO_EFFECT`); a test holds every other option to
changing a result or being refused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from jaxassoc.errors import ConfigError, JaxassocError
from jaxassoc.readouts.rpam_prompts import template_slots
from jaxassoc.stats import StatsOptions
from jaxassoc.stats.bootstrap import MAX_RESAMPLES, min_resamples
from jaxassoc.stats.multiple import CORRECTIONS
from jaxassoc.stats.options import ALTERNATIVES, RESAMPLING_UNITS, TIES
from jaxassoc.stats.permutation import MAX_PARTITIONS

NO_EFFECT = {"affects_results": False}
"""Field metadata of an option that changes speed or memory only, never a result."""


def check_choice(key: str, value: Any, choices: Iterable[Any], hint: str = "") -> None:
    """ConfigError naming ``key`` unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(
            f"{key}={value!r} is not supported: use one of {', '.join(map(str, choices))}{' (' + hint + ')' if hint else ''}"
        )


def check_range(
    key: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
    hint: str = "",
) -> None:
    """ConfigError naming ``key`` unless ``value`` is finite and lies in [low, high] (open ends as asked)."""
    bad = not isinstance(value, int) and not math.isfinite(value)  # an int beyond a float's range is finite
    bad |= low is not None and (value <= low if open_low else value < low)
    bad |= high is not None and (value >= high if open_high else value > high)
    if bad:
        lo = "" if low is None else f"{'>' if open_low else '>='} {low:,}"
        hi = "" if high is None else f"{'<' if open_high else '<='} {high:,}"
        bounds = " and ".join(b for b in (lo, hi) if b)
        raise ConfigError(f"{key}={value!r} is out of range: it must be {bounds}{'; ' + hint if hint else ''}")


SEEDS = 2**32
"""The job seed lies in 0..2^32 - 1: ``jax.random.key`` keeps a seed's low 32 bits."""


def check_seed(seed: int) -> None:
    """ConfigError naming ``seed`` unless it lies in 0..2^32 - 1 (:data:`SEEDS`): another would draw the same
    numbers as a seed in range (2^32 as 0, -1 as 2^32 - 1), silently, or fail inside JAX or numpy."""
    same = f"jax.random.key would draw it as seed {seed % SEEDS}"
    why = f"{same} and numpy refuses a negative seed" if seed < 0 else same
    check_range("seed", seed, 0, SEEDS - 1, hint=why)


def check_unique(key: str, values: Sequence[Any]) -> None:
    """ConfigError naming ``key`` and the repeats when a list option holds a value twice."""
    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        raise ConfigError(f"{key} repeats {repeated}; list each value once")


def check_corpus(key: str, corpus: str) -> None:
    """ConfigError unless ``corpus`` is ``wikitext2`` or an existing text file."""
    if corpus != "wikitext2" and not Path(corpus).expanduser().is_file():
        raise ConfigError(f"{key}={corpus!r}: no such file; use wikitext2 or a text file, one sentence a line")


@dataclass
class ModelConfig:
    """A model: an embedded name, a local folder or file, or a hub id (with revision)."""

    name: str = MISSING  # short name used in result tables
    source: str = MISSING  # embedded name ("smollm2-135m"), folder, .gguf file or hub id
    revision: Optional[str] = None
    kind: str = "causal"  # causal | masked | encoder | seq2seq (T5) | static
    # float32 | mixed | bfloat16 | float16 | auto (jaxassoc.models.precision: float32 on a CPU, mixed on a GPU/TPU)
    precision: str = "auto"
    dtype: Optional[str] = None  # replaced by precision: refused by name
    batch_size: int = 32
    shard: bool = False  # an alias of mesh=data (data-parallel over all devices)
    add_bos: Optional[bool] = None  # None: the tokenizer's default

    def __post_init__(self) -> None:
        check_range("model.batch_size", self.batch_size, 1)
        if self.dtype is not None:
            raise ConfigError(
                f"model.dtype={self.dtype} was replaced by model.precision (with model.precision={self.precision}): "
                "use model.precision=float32, mixed (bfloat16 weights and products, float32 activations: fast and "
                "close to float32), bfloat16 (weights and activations: the old model.dtype=bfloat16) or float16"
            )
        if self.kind == "static" and self.precision not in ("auto", "float32"):
            raise ConfigError(
                f"model.precision={self.precision} has no effect on static word vectors (model.kind=static), which "
                "are read in float32; remove the override"
            )
        from jaxassoc.models.precision import check_name

        check_name(self.precision)


@dataclass
class MeshConfig:
    """Devices as a ``(data, fsdp, tp)`` mesh (``jaxassoc.models.mesh``): the sizes multiply to the
    device count, one of them may be -1 (all devices the others leave); all 1: one device, no mesh."""

    name: str = "single"  # single | data | fsdp_tp (the conf/mesh file chosen)
    data: int = 1
    fsdp: int = 1
    tp: int = 1

    def __post_init__(self) -> None:
        for axis in ("data", "fsdp", "tp"):
            size = getattr(self, axis)
            if size == 0 or size < -1:
                raise ConfigError(
                    f"mesh.{axis}={size}: a mesh size is a positive integer, or -1 for all devices "
                    "the other sizes leave"
                )


@dataclass
class DatasetConfig:
    name: str = MISSING  # a name in jaxassoc.data.DATASETS
    sample: Optional[int] = None  # a seeded subsample of this many items (None: all)

    def __post_init__(self) -> None:
        if self.sample is not None:
            check_range("dataset.sample", self.sample, 1, hint="give a number of items, or null for all")


@dataclass
class CustomWeatConfig(DatasetConfig):
    """``dataset=custom_weat``: your own WEAT tests from a file (``path``: YAML, JSON or CSV, relative to the
    folder jaxassoc runs in) or one test from four word lists on the command line (``X``, ``Y``, ``A``,
    ``B``, named ``test``); the format is in ``docs/datasets.md``."""

    path: Optional[str] = None
    X: Optional[list[str]] = None
    Y: Optional[list[str]] = None
    A: Optional[list[str]] = None
    B: Optional[list[str]] = None
    test: str = "T1"  # the id of the command-line test

    def __post_init__(self) -> None:
        super().__post_init__()
        inline = [s for s in ("X", "Y", "A", "B") if getattr(self, s) is not None]
        if self.path is None and not inline:
            raise ConfigError(
                "dataset=custom_weat needs dataset.path=<file.yaml|json|csv> or the four word lists "
                "'dataset.X=[...]' 'dataset.Y=[...]' 'dataset.A=[...]' 'dataset.B=[...]'"
            )
        if self.path is not None and inline:
            raise ConfigError(
                f"dataset.path and dataset.{inline[0]} are both set: give the tests in a file or the "
                "four word lists on the command line, not both"
            )
        if self.path is not None and self.test != "T1":
            raise ConfigError("dataset.test names the command-line test only; a file names its own tests")
        missing = [s for s in ("X", "Y", "A", "B") if s not in inline]
        if inline and missing:
            raise ConfigError(
                f"dataset.{missing[0]} is missing: a command-line WEAT test needs all four word lists "
                "dataset.X, dataset.Y, dataset.A and dataset.B"
            )
        if self.path is not None:
            from jaxassoc.data.custom_weat import weat_file_format

            self.path = data_file("dataset.path", self.path, weat_file_format)


@dataclass
class CrowsPairsConfig(DatasetConfig):
    """``dataset=crows_pairs``: the packaged CrowS-Pairs file, or your own CSV in its layout (``path``,
    relative to the folder jaxassoc runs in; ``docs/datasets.md``)."""

    path: Optional[str] = None


@dataclass
class VigProfessionsConfig(DatasetConfig):
    """``dataset=vig_professions``: the professions and templates of Vig et al. 2020, or your own: ``path``
    (a JSON list of [profession, definitional, stereotypical]) and ``templates`` (a text file, one template
    a line with one ``{}``), relative to the folder jaxassoc runs in (``docs/datasets.md``)."""

    path: Optional[str] = None
    templates: Optional[str] = None


@dataclass
class StereoSetConfig(DatasetConfig):
    """``dataset=stereoset``: StereoSet's published JSON (``dev.json``), which is not packaged: ``path``
    is required (README, "StereoSet data")."""

    path: Optional[str] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.path is None:
            raise ConfigError(
                "dataset=stereoset needs dataset.path=<file.json>: StereoSet's dev.json is not packaged with jaxassoc "
                "(README, 'StereoSet data', says where to get it and its licence)"
            )


@dataclass
class CustomSentencesConfig(DatasetConfig):
    """``dataset=custom_sentences``: your own UnStereoEval templates, one a line (``.txt``) or a ``template``
    column (``.csv``), relative to the folder jaxassoc runs in (``docs/datasets.md``)."""

    path: Optional[str] = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.path is None:
            raise ConfigError(
                "dataset=custom_sentences needs dataset.path=<file.txt|csv> (one template a line, with {pronoun})"
            )
        from jaxassoc.data.custom_sentences import sentences_file_format

        self.path = data_file("dataset.path", self.path, sentences_file_format)


def data_file(key: str, path: str, file_format) -> str:
    """The absolute path of a user's data file named by ``key`` (relative to the folder jaxassoc runs in,
    ``~`` expanded); ConfigError naming ``key`` if ``file_format(path)`` refuses its suffix or it is missing."""
    from hydra.utils import to_absolute_path

    try:
        file_format(path)
    except JaxassocError as e:
        raise ConfigError(f"{key}={path!r}: {e}") from None
    absolute = Path(to_absolute_path(str(Path(path).expanduser())))
    if not absolute.is_file():
        raise ConfigError(
            f"{key}={path!r}: no such file ({absolute}); paths are relative to the folder jaxassoc runs in"
        )
    return str(absolute)


@dataclass
class TemplateConfig:
    name: str = "none"
    text: Optional[str] = None  # e.g. "These words are associated: {target} and"
    quote: str = '"'

    def __post_init__(self) -> None:
        if self.text is not None:
            template_slots(self.name, self.text)


@dataclass
class WhiteningConfig:
    name: str = "none"  # none | zca
    eps: float = 1e-3
    reference: str = "corpus_word_types"  # corpus_word_types | vocabulary_uniform (static vectors)
    max_samples: int = 100_000

    def __post_init__(self) -> None:
        check_choice("whitening.name", self.name, ("none", "zca"))
        check_range("whitening.eps", self.eps, 0, open_low=True)
        check_choice("whitening.reference", self.reference, ("corpus_word_types", "vocabulary_uniform"))
        check_range("whitening.max_samples", self.max_samples, 2)


@dataclass
class InterventionConfig:
    """The ``intervention`` group (docs/methods.md §11): what is done to the job's model before every metric
    scores it. ``none``; ``ablate`` (heads and MLP neurons zeroed in every forward pass, docs/models.md "Named
    sites"); the concept erasers ``leace``, ``inlp``, ``sentence_debias`` (fitted on the model's states at
    ``site`` from counterfactual sentences of ``corpus`` for ``bias_type``, bound at that site in every pass,
    cached); ``hard_debias`` (static word vectors only); ``self_debias`` (scoring-time, Schick et al. 2021).
    Each method reads only its own options (:data:`INTERVENTION_OPTIONS`; :meth:`unused` names the others set,
    which the job logs), so ``-m intervention=none,leace,self_debias intervention.site=...`` sweeps them all."""

    name: str = "none"  # none | ablate | leace | inlp | sentence_debias | hard_debias | self_debias
    heads: list[list[int]] = field(default_factory=list)  # ablate: [[layer, head], ...]
    neurons: list[list[int]] = field(default_factory=list)  # ablate: [[layer, neuron], ...] (MLP hidden units)
    # ablate: a metric=mediation job's output folder (or its aggregates.parquet): ablate its top heads / neurons too
    from_mediation: Optional[str] = None
    top_heads: int = 0  # ... the top_heads heads by natural indirect effect
    top_neurons: int = 0  # ... the top_neurons neurons by natural indirect effect
    # erasers, hard_debias and self_debias: gender | race | religion (packaged word lists) or a JSON file of yours
    bias_type: str = "gender"
    # erasers: output (what the metrics read: a causal LM's final_norm, else the last block's resid_post) |
    # final_norm | layers.<i>.<kind> | layers.*.<kind> (one eraser per layer)
    site: str = "output"
    corpus: str = "wikitext2"  # erasers: fitting sentences: wikitext2 (its valid split) or a text file, one a line
    max_sentences: int = 1000  # erasers: the first N corpus sentences holding attribute words of one class
    batch_size: int = 32  # erasers: sentences per forward pass when reading the fitting states
    orth: bool = False  # leace: the orthogonal variant (no whitening)
    shrinkage: bool = True  # leace: shrink the covariance toward a multiple of I
    iterations: int = 10  # inlp: classifiers trained and projected out
    classifier: str = "logistic"  # inlp: logistic | svm
    min_accuracy: Optional[float] = None  # inlp: stop once a classifier is this accurate or less (None: never)
    directions: int = 1  # sentence_debias: principal directions removed
    decay: float = 50.0  # self_debias: lambda in p * max(exp(-lambda * alpha), epsilon)
    epsilon: float = 0.01  # self_debias: the floor of the decay factor
    lm_cost_tokens: int = 20000  # every intervention: WikiText-2 test tokens scored for the LM cost (0: off)
    # lora (docs/methods.md §13): low-rank adapters trained against a bias; the trained adapter is cached
    objective: str = "cda"  # lora: cda (counterfactual text) | metric (a metric's differentiable score)
    metric: Optional[str] = None  # lora, objective=metric: the metric whose score is the bias term
    rank: int = 8  # lora: the adapters' rank r
    alpha: float = 16.0  # lora: the scale alpha / r of the adapters' output
    targets: list[str] = field(default_factory=lambda: ["attn.q", "attn.v"])  # lora: the projections adapted
    layers: Any = None  # lora: the layers adapted, a list of indices, or "*" / null: every layer
    steps: int = 200  # lora: optimiser steps
    seq_len: int = 128  # lora: tokens per training row (longer sentences truncated)
    accumulate: int = 1  # lora: micro batches per step (gradient accumulation; divides batch_size)
    lr: float = 1e-3  # lora: AdamW's peak learning rate
    warmup: int = 0  # lora: linear warm-up steps
    schedule: str = "cosine"  # lora: cosine | constant after the warm-up
    weight_decay: float = 0.0  # lora: AdamW's decoupled weight decay
    preservation: str = "kl"  # lora: kl (to the frozen model's outputs on held text) | mse (of its states)
    lam: float = 1.0  # lora: the preservation term's weight lambda
    heldout: float = 0.5  # lora, objective=metric: the share of the metric's items held out of training
    temperature: Optional[float] = None  # lora, objective=metric: the surrogate's temperature (None: by agreement)
    bias_batch: int = 16  # lora, objective=metric: the metric's training items per step (0: all of them)
    evaluate_every: int = 25  # lora: steps between evaluations (held-out perplexity, surrogate vs real)
    checkpoint_every: int = 50  # lora: steps between checkpoints (resumed after an interrupt)

    def __post_init__(self) -> None:
        check_choice("intervention.name", self.name, INTERVENTIONS)
        check_range("intervention.top_heads", self.top_heads, 0)
        check_range("intervention.top_neurons", self.top_neurons, 0)
        check_range("intervention.max_sentences", self.max_sentences, 2)
        check_range("intervention.batch_size", self.batch_size, 1)
        check_range("intervention.iterations", self.iterations, 1)
        check_range("intervention.directions", self.directions, 1)
        check_range("intervention.decay", self.decay, 0.0)
        check_range("intervention.lm_cost_tokens", self.lm_cost_tokens, 0)
        check_choice("intervention.classifier", self.classifier, ("logistic", "svm"))
        if not 0 < self.epsilon <= 1:
            raise ConfigError(f"intervention.epsilon={self.epsilon} must be in (0, 1]")
        if self.min_accuracy is not None and not 0 <= self.min_accuracy <= 1:
            raise ConfigError(f"intervention.min_accuracy={self.min_accuracy} must be in [0, 1]")
        if self.name in ERASERS or self.name in ("hard_debias", "self_debias", "lora"):
            if self.bias_type not in BIAS_TYPES and not Path(self.bias_type).expanduser().is_file():
                raise ConfigError(
                    f"intervention.bias_type={self.bias_type!r}: choose one of {list(BIAS_TYPES)} or a JSON word-list "
                    "file of yours (docs/methods.md §11.5)"
                )
        if self.name in ERASERS or self.name == "lora":
            check_corpus("intervention.corpus", self.corpus)
        if self.name == "lora":
            self.finetune_options(seed=0)  # its checks, before any model loads
        if self.name in ("self_debias", "hard_debias") and self.bias_type not in BIAS_TYPES:
            raise ConfigError(
                f"intervention={self.name} takes intervention.bias_type={'|'.join(BIAS_TYPES)}, not a word-list file "
                f"({self.bias_type!r}): its prefixes / pairs are written per bias type"
            )
        chosen = self.heads or self.neurons or self.from_mediation is not None
        if self.name == "ablate" and not chosen:
            raise ConfigError(
                "intervention=ablate needs intervention.heads=[[layer,head],...], intervention.neurons=[[layer,"
                "neuron],...] or intervention.from_mediation=<a metric=mediation output> with top_heads / top_neurons"
            )
        if self.from_mediation is not None and not (self.top_heads or self.top_neurons):
            raise ConfigError("intervention.from_mediation needs intervention.top_heads=k and/or top_neurons=k")

    def finetune_options(self, seed: int) -> Any:
        """``intervention=lora``'s options as :class:`jaxassoc.finetune.adapt.FinetuneOptions` (its checks:
        ConfigError naming the option)."""
        from jaxassoc.finetune.adapt import FinetuneOptions

        if self.objective == "metric" and self.metric is None:
            raise ConfigError(
                "intervention.objective=metric needs intervention.metric=<name>: the metric whose differentiable "
                "score is the bias term (e.g. crows_pairs, rpam)"
            )
        if self.layers is None or self.layers == "*":
            layers = None
        elif isinstance(self.layers, (list, tuple)) and all(isinstance(i, int) for i in self.layers):
            layers = tuple(self.layers)
        else:
            raise ConfigError(
                f"intervention.layers={self.layers!r}: give a list of layer indices, or '*' for every layer"
            )
        return FinetuneOptions(
            objective=self.objective, bias_type=self.bias_type, corpus=self.corpus, rank=self.rank, alpha=self.alpha,
            targets=tuple(self.targets), layers=layers, steps=self.steps, batch_size=self.batch_size,
            seq_len=self.seq_len, accumulate=self.accumulate, learning_rate=self.lr, warmup=self.warmup,
            schedule=self.schedule, weight_decay=self.weight_decay, preservation=self.preservation, lam=self.lam,
            heldout=self.heldout, temperature=self.temperature, bias_batch=self.bias_batch, seed=seed,
            evaluate_every=self.evaluate_every, checkpoint_every=self.checkpoint_every,
        )  # fmt: skip

    def unused(self) -> list[str]:
        """The options set away from their defaults that this intervention does not read, in field order."""
        fields = [f for f in dataclasses.fields(self) if f.name != "name"]
        default = {
            f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default for f in fields
        }
        return [
            f.name
            for f in fields
            if getattr(self, f.name) != default[f.name] and f.name not in INTERVENTION_OPTIONS[self.name]
        ]


ERASERS = ("leace", "inlp", "sentence_debias")
"""The interventions that fit a linear concept eraser at a site (jaxassoc.mitigation)."""
INTERVENTIONS = ("none", "ablate", *ERASERS, "hard_debias", "self_debias", "lora")
BIAS_TYPES = ("gender", "race", "religion")
_FITTING = ("bias_type", "site", "corpus", "max_sentences", "batch_size", "lm_cost_tokens")
INTERVENTION_OPTIONS: dict[str, tuple[str, ...]] = {
    "none": (),
    "ablate": ("heads", "neurons", "from_mediation", "top_heads", "top_neurons", "lm_cost_tokens"),
    "leace": (*_FITTING, "orth", "shrinkage"),
    "inlp": (*_FITTING, "iterations", "classifier", "min_accuracy"),
    "sentence_debias": (*_FITTING, "directions"),
    "hard_debias": ("bias_type",),
    "self_debias": ("bias_type", "decay", "epsilon", "lm_cost_tokens"),
    "lora": (
        "bias_type",
        "corpus",
        "batch_size",
        "lm_cost_tokens",
        "objective",
        "metric",
        "rank",
        "alpha",
        "targets",
        "layers",
        "steps",
        "seq_len",
        "accumulate",
        "lr",
        "warmup",
        "schedule",
        "weight_decay",
        "preservation",
        "lam",
        "heldout",
        "temperature",
        "evaluate_every",
        "checkpoint_every",
    ),  # fmt: skip
}
"""The options each intervention reads (the job logs the others that were set: :meth:`InterventionConfig.unused`)."""


@dataclass
class StatsConfig:
    """The ``stats`` group: the test options (:class:`jaxassoc.stats.StatsOptions`: the same fields, in its
    order, with its defaults) and the app's own ``alpha``, ``correction`` and ``unit``.

    Mutable, as Hydra's overrides need (a frozen dataclass is a read-only config node), so it is not a
    :class:`~jaxassoc.stats.StatsOptions` itself: :meth:`options` gives the frozen value the kernels take."""

    ddof: int = StatsOptions.ddof
    exact_bound: int = StatsOptions.exact_bound
    n_permutations: int = StatsOptions.n_permutations
    n_bootstrap: int = StatsOptions.n_bootstrap
    confidence: float = StatsOptions.confidence
    alternative: str = StatsOptions.alternative
    ties: str = StatsOptions.ties
    alpha: float = 0.05  # significance level of WEAT's raw vs whitened change class
    # multiple comparisons in the tables: none | holm | bh (docs/methods.md §5.9); the result files keep raw p
    correction: str = field(default="none", metadata=NO_EFFECT)
    unit: str = "sentence"  # SEAT: what the bootstrap CI of d resamples, sentence | word (docs/methods.md §8)

    def __post_init__(self) -> None:
        check_choice("stats.ddof", self.ddof, (1, 0), "1: sample std, Caliskan et al.; 0: population std, WEFE")
        check_range("stats.exact_bound", self.exact_bound, 0, MAX_PARTITIONS)
        check_range(
            "stats.n_permutations",
            self.n_permutations,
            1,
            MAX_PARTITIONS,
            hint="p resolves to 1 / n_permutations; 10^7 gives 1e-7",
        )
        check_range("stats.n_bootstrap", self.n_bootstrap, 1, MAX_RESAMPLES)
        check_range("stats.confidence", self.confidence, 0, 1, open_low=True, open_high=True, hint="e.g. 0.95")
        fewest = min_resamples(self.confidence)
        check_range(
            "stats.n_bootstrap",
            self.n_bootstrap,
            fewest,
            MAX_RESAMPLES,
            hint=f"a {self.confidence:.0%} CI's percentiles need 2 / (1 - stats.confidence) = {fewest} resamples or more",
        )
        check_choice("stats.alternative", self.alternative, ALTERNATIVES)
        check_choice("stats.ties", self.ties, TIES)
        check_range("stats.alpha", self.alpha, 0, 1, open_low=True, open_high=True, hint="e.g. 0.05")
        check_choice("stats.correction", self.correction, CORRECTIONS)
        check_choice("stats.unit", self.unit, RESAMPLING_UNITS, "what SEAT's CI resamples")

    def options(self) -> StatsOptions:
        """The test options as the frozen value the kernels and readouts take (``alpha``, ``correction`` and
        ``unit`` left out)."""
        return StatsOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(StatsOptions)})


@dataclass
class MetricConfig:
    """Options every metric has; each metric extends it with its own dataclass."""

    name: str = MISSING


@dataclass
class AuditPart:
    """One line of the default audit: a (model, metric, dataset) job with its own overrides."""

    name: str = MISSING
    overrides: list[str] = field(default_factory=list)


@dataclass
class AuditConfig:
    parts: list[AuditPart] = field(default_factory=list)


@dataclass
class AppConfig:
    model: ModelConfig = MISSING
    metric: Any = MISSING  # a MetricConfig subclass, chosen by the metric group
    dataset: DatasetConfig = MISSING
    template: TemplateConfig = field(default_factory=TemplateConfig)
    whitening: WhiteningConfig = field(default_factory=WhiteningConfig)
    intervention: InterventionConfig = field(default_factory=InterventionConfig)
    stats: StatsConfig = field(default_factory=StatsConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    seed: int = 0
    quiet: bool = False
    resume: bool = True  # skip a job whose results already exist in its output folder
    # On-disk cache of model outputs: $JAXASSOC_CACHE, else the user cache folder (jaxassoc.app.cache); None: off.
    cache_dir: Optional[str] = "${jaxassoc.user_cache_dir:}"
    cache_max_gb: Optional[float] = None  # after each job, drop least recently used entries beyond it (None: no limit)
    compile_cache: bool = True  # keep XLA's compiled functions in <cache_dir, else the user cache folder>/xla
    distributed: bool = False  # call jax.distributed.initialize() before any work (multi-host)
    distributed_timeout_s: int = 120  # how long distributed=true waits for every process to connect


GROUP_SCHEMAS: dict[str, type] = {
    "model": ModelConfig,
    "dataset": DatasetConfig,
    "template": TemplateConfig,
    "whitening": WhiteningConfig,
    "intervention": InterventionConfig,
    "stats": StatsConfig,
    "mesh": MeshConfig,
}


DATASET_OVERRIDE = "override /dataset@_global_.dataset"
"""How a metric's schema sets its own default dataset in Hydra's defaults list (the root's ``dataset`` is
listed before ``metric``, so the metric's override wins, and a command line's ``dataset=...`` wins over both)."""


def register_configs(
    metric_schemas: dict[str, type],
    metric_yamls: set[str] = frozenset(),
    metric_datasets: Mapping[str, str] | None = None,
) -> None:
    """Register the app schema, one schema per group, and one per metric (``metric/<name>_schema``).

    Each metric's schema is also stored as ``metric/<name>`` with its defaults, so a plugin metric needs
    no YAML; a built-in metric's YAML in ``conf/metric/`` takes precedence and names its schema.
    ``metric_datasets`` (metric -> dataset, ``MetricSpec.dataset``): the dataset ``metric=<name>`` reads
    when the command line names none. Its schema then carries a defaults list that overrides the root
    config's dataset (the fields themselves are stored as ``metric/<name>_fields``), so each job of a sweep
    over metrics reads its own metric's default dataset.
    """
    cs = ConfigStore.instance()
    cs.store(name="app_schema", node=AppConfig)
    for group, schema in GROUP_SCHEMAS.items():
        cs.store(group=group, name=f"{group}_schema", node=schema)
    cs.store(group="dataset", name="custom_weat_schema", node=CustomWeatConfig)
    cs.store(group="dataset", name="custom_sentences_schema", node=CustomSentencesConfig)
    cs.store(group="dataset", name="crows_pairs_schema", node=CrowsPairsConfig)
    cs.store(group="dataset", name="stereoset_schema", node=StereoSetConfig)
    cs.store(group="dataset", name="vig_professions_schema", node=VigProfessionsConfig)
    cs.store(group="metric", name="audit_schema", node=MetricConfig)
    own = dict(metric_datasets or {})
    for name, schema in metric_schemas.items():
        if name in own:
            cs.store(group="metric", name=f"{name}_fields", node=schema)
            defaults = [f"{name}_fields", {DATASET_OVERRIDE: own[name]}]
            cs.store(group="metric", name=f"{name}_schema", node={"defaults": defaults})
        else:
            cs.store(group="metric", name=f"{name}_schema", node=schema)
        if name not in metric_yamls:  # a plugin's metric: `metric=<name>` works without a YAML file
            plain = name not in own
            node = schema(name=name) if plain else {"defaults": [f"{name}_schema", "_self_"], "name": name}
            cs.store(group="metric", name=name, node=node)
