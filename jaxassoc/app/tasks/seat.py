"""``metric=seat``: SEAT (May et al. 2019; docs/methods.md §8) on a WEAT suite (``dataset=weat_caliskan2017``,
``weat_ws``, ``weat_wefe`` or ``custom_weat``) with any language model's sentence vectors.

Every word is slotted into the bleached templates of its form (``seat_templates``,
:mod:`jaxassoc.data.seat`); each sentence's vector is a layer's token states pooled per model kind
(:data:`DEFAULT_POOLING`, ``metric.pooling``) and cached on disk (model, sentences, layer, pooling, batch
size); the WEAT permutation test, effect size and bootstrap CI run on the sentences
(:func:`jaxassoc.suites.seat.run_seat_experiment`). Writes one row per test.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from jaxassoc import data
from jaxassoc.app import datasets, model_loading, tables
from jaxassoc.app.config import MetricConfig, check_choice
from jaxassoc.app.spec import (
    D_RAW_AND_WHITENED,
    EFFECT_PLOTS,
    LANGUAGE_MODELS,
    RAW_VS_WHITENED,
    Job,
    JobResult,
    MetricSpec,
)
from jaxassoc.embeddings.contextual import tokenizer_normaliser
from jaxassoc.embeddings.sentence import POOLINGS
from jaxassoc.progress import stage
from jaxassoc.readouts.seat import check_encodable, seat_suite
from jaxassoc.readouts.vectors import cached_sentence_vectors, suite_words
from jaxassoc.suites.seat import run_seat_experiment
from jaxassoc.suites.weat import check_suite_words

DEFAULT_POOLING = {"encoder": "mean", "masked": "first", "causal": "last"}
"""``metric.pooling=auto`` per model kind: a sentence encoder (MiniLM) its training pooling, the mean;
a masked LM (BERT) its first token, [CLS]; a causal LM its last token, the only one that has read the
whole sentence (docs/methods.md §8)."""


@dataclass
class SeatMetricConfig(MetricConfig):
    layer: int = -1  # hidden layer to pool (-1: last)
    pooling: str = "auto"  # mean | first | last | auto (by model kind: DEFAULT_POOLING)

    def __post_init__(self) -> None:
        check_choice("metric.pooling", self.pooling, ("auto", *POOLINGS))


def pooling_of(pooling: str, kind: str) -> str:
    """The pooling a job uses: ``metric.pooling``, or with ``auto`` the model kind's default."""
    return DEFAULT_POOLING[kind] if pooling == "auto" else pooling


def ignored_options(job: Job) -> dict[str, str]:
    """The options SEAT leaves unused (the app refuses them when set)."""
    return {"stats.alpha": "it is the level of WEAT's raw vs whitened change class; SEAT has no whitening"}


def run(job: Job) -> JobResult:
    cfg = job.metric
    suite = datasets.suite_for("seat", job.dataset)
    check_suite_words(suite.tests)
    templates = data.load_seat_templates()
    model = job.language_model()
    check_suite_words(suite.tests, tokenizer_normaliser(model.tokenizer))  # an uncased tokenizer reads Rose as rose
    check_encodable(suite.tests, model.tokenizer)
    pooling = pooling_of(cfg.pooling, job.model.kind)
    sentences = suite_words(seat_suite(suite, templates))
    with stage("seat", "sentence vectors extracted or read from the cache", len(sentences)):
        matrix = cached_sentence_vectors(
            model,
            sentences,
            cache_dir=job.cache_dir,
            layer=cfg.layer,
            pooling=pooling,
            batch_size=job.model.batch_size,
            progress=not job.quiet,
        )
    with stage("seat", f"{job.dataset.name} tests scored", len(suite.tests)):
        vectors = dict(zip(sentences, matrix))
        table = run_seat_experiment(
            suite, templates, vectors, key=job.key(), options=job.stats.options(), unit=job.stats.unit
        )
    table = table.assign(layer=cfg.layer, pooling=pooling)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": datasets.dataset_version(job.dataset, suite),
        "templates_version": data.dataset_info("seat_templates").version,
    }
    return JobResult(items=table, aggregates=table, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One row per test: its name, set sizes in sentences and in words, how p was counted, d with its CI
    and p, with a note on how they were computed."""
    rows = aggregates.assign(permutations=tables.permutations(aggregates))
    columns = ["test", "name", "n_x", "n_y", "n_a", "n_b", "words_x", "words_y", "words_a", "words_b"]
    return [
        (
            "tests",
            tables.with_notes(
                tables.block(
                    rows,
                    [*columns, "permutations", "d", "ci_low", "ci_high", "p_value", "p_min", "pooling", "caveat"]
                    + ["undefined_reason"],
                ),
                tables.test_note(rows, resampled=_resampled(rows))
                + "; n_x ... n_b: sentences (each word in each template of its form), words_x ... words_b: words",
            ),
        )
    ]


def _resampled(rows: pd.DataFrame) -> str:
    """What the CI resampled (``stats.unit``), for the table's note."""
    if "ci_unit" in rows and (rows["ci_unit"] == "word").all():
        return "of the target words within X and within Y, each with all its sentences (stats.unit=word)"
    return "of the sentences within X and within Y (stats.unit=word resamples words, a wider, word-level CI)"


SPEC = MetricSpec(
    name="seat",
    run=run,
    config=SeatMetricConfig,
    model_kinds=LANGUAGE_MODELS,
    title="SEAT",
    description="SEAT: WEAT on sentence vectors of a WEAT suite's words in bleached templates",
    uses=frozenset({"stats"}),
    ignores=ignored_options,
    views=views,
    effects=D_RAW_AND_WHITENED,
    plots=(*EFFECT_PLOTS, RAW_VS_WHITENED),
)
