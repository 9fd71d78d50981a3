"""``metric=ceat``: CEAT (Guo & Caliskan 2021; docs/methods.md §3) on a WEAT suite (``dataset=weat_caliskan2017``,
``weat_ws``) with any language model's contextual embeddings.

Per-word pools of contextual embeddings come from the reference corpus (see
:mod:`jaxassoc.readouts.ceat`; the tests: :mod:`jaxassoc.suites.ceat`) and are cached on disk keyed by the model hashes, the corpus text,
layer, pool size, context seed and fallback, never by the job seed or N: a rerun with another seed or N
reuses them bit for bit. Writes ``items`` (one row per test, set and word: contexts used and how),
``aggregates`` (one row per test: CES, its variance, τ², one-sided p, per-draw summaries) and
``draws`` (every draw's effect size and variance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import pandas as pd

from jaxassoc.app import datasets, model_loading, store, tables
from jaxassoc.app.config import NO_EFFECT, MetricConfig, check_choice, check_corpus, check_range, check_unique
from jaxassoc.app.spec import EFFECT_PLOTS, LANGUAGE_MODELS, Effects, Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.embeddings.contextual import ContextIndex, tokenizer_normaliser
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.ceat import N_DRAWS
from jaxassoc.progress import stage
from jaxassoc.readouts.ceat import FALLBACKS, ContextPools, context_pools, corpus_sentences
from jaxassoc.suites.ceat import run_ceat_suite, word_table
from jaxassoc.suites.weat import check_suite_words

MAX_DRAWS = 10**6
"""Most CEAT draws: the per-draw table and draw indices stay within a few hundred MB."""


@dataclass
class CeatMetricConfig(MetricConfig):
    n_draws: int = N_DRAWS  # random draws of one context per word (Guo & Caliskan: 10,000)
    tests: list[str] = field(default_factory=list)  # a subset of the suite's test ids ([]: all)
    layer: int = -1  # hidden layer to pool (-1: last)
    max_contexts: int = 100  # corpus sentences per word at most (the pool a draw picks from)
    context_seed: int = 0  # which sentences enter a pool (not the job seed: pools are reused across seeds)
    fallback: str = "word"  # a word without any corpus context: word | templates | drop
    max_oov_share: float = 0.2  # with fallback drop: refuse a set that loses more than this share
    corpus: str = "wikitext2"  # wikitext2 (test+valid, offline) or a text file, one sentence a line
    chunk: int = field(default=1000, metadata=NO_EFFECT)  # draws evaluated at a time (memory)

    def __post_init__(self) -> None:
        check_range("metric.n_draws", self.n_draws, 2, MAX_DRAWS, hint="the random-effects model needs 2 draws")
        check_unique("metric.tests", self.tests)
        check_range("metric.max_contexts", self.max_contexts, 1)
        check_range("metric.context_seed", self.context_seed, 0, hint="numpy's generator takes a seed >= 0")
        check_choice("metric.fallback", self.fallback, FALLBACKS)
        check_range("metric.max_oov_share", self.max_oov_share, 0, 1)
        check_corpus("metric.corpus", self.corpus)
        check_range("metric.chunk", self.chunk, 1)


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job leaves unused (the app refuses them when set)."""
    if job.metric.fallback != "drop":
        return {"metric.max_oov_share": "it bounds the words lost with metric.fallback=drop only"}
    return {}


def _tests(job: Job):
    suite = datasets.suite_for("ceat", job.dataset)
    wanted = job.metric.tests or list(suite.ids)
    unknown = [t for t in wanted if t not in suite.ids]
    if unknown:
        raise ConfigError(f"metric.tests names {unknown}, not in {job.dataset.name} ({list(suite.ids)})")
    return [suite.test(t) for t in wanted], [suite.ids.index(t) for t in wanted], suite


def run(job: Job) -> JobResult:
    cfg = job.metric
    tests, positions, suite = _tests(job)
    check_suite_words(tests)
    words = sorted({w for t in tests for w in (*t.targets_x, *t.targets_y, *t.attributes_a, *t.attributes_b)})
    model = job.language_model()
    check_suite_words(tests, tokenizer_normaliser(model.tokenizer))  # an uncased tokenizer reads Rose as rose
    sentences, corpus = corpus_sentences(cfg.corpus)
    key = {
        **model_key(model),
        "corpus": corpus,
        "layer": cfg.layer,
        "max_contexts": cfg.max_contexts,
        "context_seed": cfg.context_seed,
        "fallback": cfg.fallback,
        "words": words,
    }

    def compute():
        return context_pools(
            model,
            ContextIndex.build(sentences),
            words,
            layer=cfg.layer,
            max_contexts=cfg.max_contexts,
            seed=cfg.context_seed,
            fallback=cfg.fallback,
            batch_size=job.model.batch_size,
        ).to_arrays()

    with stage("ceat", "words' context pools built or read from the cache", len(words)) as st:
        pools = ContextPools.from_arrays(cached_arrays(job.cache_dir, "ceat_contexts", key, compute))
        st.what = f"words' context pools ({int(pools.counts.sum()):,} embeddings) built or read from the cache"
    with stage("ceat", f"tests x {cfg.n_draws:,} draws combined", len(tests)):
        aggregates, draws = run_ceat_suite(
            pools,
            tests,
            positions,
            key=jax.random.key(job.seed),
            n_draws=cfg.n_draws,
            chunk=cfg.chunk,
            max_oov_share=cfg.max_oov_share,
            alternative=job.stats.alternative,
        )
    aggregates = aggregates.assign(
        suite=job.dataset.name, corpus=corpus, layer=cfg.layer, max_contexts=cfg.max_contexts, fallback=cfg.fallback
    )
    store.write_table(job.output_dir, "draws", draws)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": datasets.dataset_version(job.dataset, suite),
        "corpus": corpus,
    }
    return JobResult(items=word_table(pools, tests), aggregates=aggregates, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One row per test: its name and set sizes, the combined effect size, its SE, tau², p, draws and
    contexts per word, with a note on how p was computed."""
    sides = tables.SIDES.get(str(aggregates["alternative"].iloc[0]), "") if "alternative" in aggregates else ""
    return [
        (
            "tests",
            tables.with_notes(
                tables.block(
                    aggregates,
                    [
                        *tables.TEST_DESIGN,
                        "ces",
                        "ces_se",
                        "tau_squared",
                        "p_value",
                        "n_draws",
                        "contexts_per_word_mean",
                        "caveat",
                        "undefined_reason",
                    ],
                ),
                f"p: {sides or 'two-sided'} normal test of the random-effects mean, z = CES / SE, over n_draws draws "
                "of one context per word (Guo & Caliskan 2021; docs/methods.md §3.10); no CI column: the forest plot "
                "draws CES ± 1.96 SE",
            ),
        )
    ]


SPEC = MetricSpec(
    name="ceat",
    run=run,
    config=CeatMetricConfig,
    model_kinds=LANGUAGE_MODELS,
    title="CEAT",
    description="CEAT (random-effects WEAT over contextual embeddings) on a WEAT suite",
    uses=frozenset({"stats.alternative", "stats.correction"}),
    ignores=ignored_options,
    views=views,
    effects=(Effects(se="ces_se"),),
    plots=EFFECT_PLOTS,
)
