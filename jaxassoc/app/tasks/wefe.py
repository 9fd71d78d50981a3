"""``metric=wefe``: WEFE's metric family (RND, RNSB, MAC, ECT, RIPA; Badilla et al. 2020; docs/methods.md §9)
on a WEAT suite (``dataset=weat_caliskan2017``, ``weat_wefe``, ``weat_ws`` or ``custom_weat``), each test a
query, with static vectors or a language model's contextual word vectors (the same vectors and cache as
``metric=weat``: :func:`jaxassoc.app.tasks.weat.suite_vectors`).

Writes ``aggregates`` (one row per test and metric, and attribute set for RND, ECT and RIPA: the score,
the value ranked, set sizes, RNSB's accuracy) and ``items`` (RND and RIPA per attribute word, RNSB per
target word). ``jaxassoc-report --rank`` ranks models per metric and test by |effect_size|.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import pandas as pd

from jaxassoc.app import datasets, tables
from jaxassoc.app.config import MetricConfig, check_choice, check_corpus, check_range, check_unique
from jaxassoc.app.spec import EFFECT_PLOTS, EFFECT_SIZE, LANGUAGE_MODELS, Job, JobResult, MetricSpec
from jaxassoc.app.tasks.weat import CONTEXTUAL_ONLY, suite_vectors
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.wefe import RND_DISTANCES
from jaxassoc.progress import stage
from jaxassoc.suites.weat import check_suite_words
from jaxassoc.suites.wefe import METRICS, WefeOptions, run_wefe_suite

WEFE_CONTEXTUAL = tuple(f for f in CONTEXTUAL_ONLY if f in ("layer", "max_contexts", "fallback"))


@dataclass
class WefeMetricConfig(MetricConfig):
    metrics: list[str] = field(default_factory=lambda: list(METRICS))  # any of rnd, rnsb, mac, ect, ripa
    max_oov_share: float = 0.2  # refuse a set that loses more than this share to the vocabulary (WEFE: 0.2)
    normalize: bool = False  # unit-length vectors before every metric (WEFE's normalize)
    rnd_distance: str = "norm"  # RND: norm (Euclidean, WEFE's default) | cos (WEFE's cosine similarity)
    rnsb_c: float = 1.0  # RNSB: inverse L2 strength of the logistic regression (scikit-learn's C)
    rnsb_holdout: bool = True  # RNSB: fit on a stratified split, score accuracy on the rest (WEFE's holdout)
    rnsb_test_share: float = 0.2  # RNSB: share of attribute words held out
    rnsb_iterations: int = 1  # RNSB: splits averaged (WEFE's n_iterations)
    layer: int = -1  # contextual: hidden layer to pool (-1: last)
    max_contexts: int = 20  # contextual: sentences per word (Bommasani et al. 2020)
    fallback: str = "word"  # contextual, no context in the corpus: word | templates | drop
    corpus: str = "wikitext2"  # contextual: wikitext2 (test+valid, offline) or a text file, one sentence a line

    def __post_init__(self) -> None:
        check_unique("metric.metrics", self.metrics)
        for m in self.metrics:
            check_choice("metric.metrics", m, METRICS)
        if not self.metrics:
            raise ConfigError(f"metric.metrics is empty: name one or more of {list(METRICS)}")
        check_range("metric.max_oov_share", self.max_oov_share, 0, 1)
        check_choice("metric.rnd_distance", self.rnd_distance, RND_DISTANCES)
        check_range("metric.rnsb_c", self.rnsb_c, 0, open_low=True)
        check_range("metric.rnsb_test_share", self.rnsb_test_share, 0, 1, open_low=True, open_high=True)
        check_range("metric.rnsb_iterations", self.rnsb_iterations, 1)
        check_range("metric.max_contexts", self.max_contexts, 1)
        check_choice("metric.fallback", self.fallback, ("word", "templates", "drop"))
        check_corpus("metric.corpus", self.corpus)

    def options(self, n_bootstrap: int = 0, confidence: float = WefeOptions.confidence) -> WefeOptions:
        """WEFE's options, with the word bootstrap of every score (``stats.n_bootstrap``, ``stats.confidence``)."""
        return WefeOptions(
            n_bootstrap=n_bootstrap,
            confidence=confidence,
            metrics=tuple(self.metrics),
            normalize=self.normalize,
            rnd_distance=self.rnd_distance,
            rnsb_c=self.rnsb_c,
            rnsb_holdout=self.rnsb_holdout,
            rnsb_test_share=self.rnsb_test_share,
            rnsb_iterations=self.rnsb_iterations,
        )


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job's model kind and metrics leave unused (the app refuses them when set)."""
    cfg, ignored = job.metric, {}
    if job.model.kind == "static":
        ignored |= {
            f"metric.{f}": "contextual word vectors only (a language model, not static vectors)"
            for f in (*WEFE_CONTEXTUAL, "corpus")
        }
    if "rnd" not in cfg.metrics:
        ignored["metric.rnd_distance"] = "RND only (metric.metrics has no rnd)"
    if "rnsb" not in cfg.metrics:
        ignored |= {
            f"metric.{f}": "RNSB only (metric.metrics has no rnsb)"
            for f in ("rnsb_c", "rnsb_holdout", "rnsb_test_share", "rnsb_iterations")
        }
    elif not cfg.rnsb_holdout:
        ignored["metric.rnsb_test_share"] = "the holdout split only (metric.rnsb_holdout=true)"
    return ignored


def run(job: Job) -> JobResult:
    cfg = job.metric
    suite = datasets.suite_for("wefe", job.dataset)
    check_suite_words(suite.tests)
    found = suite_vectors(job, suite, cfg, "wefe")
    with stage("wefe", f"{job.dataset.name} queries scored", len(suite.tests)):
        aggregates, items = run_wefe_suite(
            found.vectors,
            suite,
            key=jax.random.key(job.seed),
            options=cfg.options(job.stats.n_bootstrap, job.stats.confidence),
            max_oov_share=cfg.max_oov_share,
        )
    provenance = {**found.provenance, "dataset_version": datasets.dataset_version(job.dataset, suite)}
    return JobResult(items=items, aggregates=aggregates, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The scores as a tests x metrics table, then each query's row with its sizes and RNSB's accuracy."""
    wide = aggregates.pivot_table(index=["test", "name"], columns="series", values="score", sort=False)
    wide = wide.reset_index()
    wide.columns.name = None
    return [
        (
            "WEFE scores (tests x metrics)",
            tables.with_notes(
                wide,
                "RND, ECT, RIPA: one column per attribute set (A), (B), the subqueries X, Y wrt A and wrt B; "
                "RNSB: A positive, B negative; MAC: X ∪ Y against A and B (docs/methods.md §9)",
            ),
        ),
        (
            "queries",
            tables.with_notes(
                tables.block(
                    aggregates,
                    ["test", "metric", "query", "score", "effect_size", "ci_low", "ci_high", "ci_undefined", "n_x"]
                    + ["n_y", "n_a", "n_b", "n_pairs", "accuracy", "lost_words", "caveat"],
                ),
                "effect_size: the value whose |·| ranks models (jaxassoc-report --rank): the score for RND, RNSB "
                "and RIPA, 1 − MAC and 1 − ECT (0: no bias); accuracy: RNSB's classifier on its held-out words",
                ci_note(aggregates),
            ),
        ),
    ]


def ci_note(aggregates: pd.DataFrame) -> str:
    """How the scores' CIs were drawn (WEFE itself gives none)."""
    if "n_bootstrap" not in aggregates or aggregates["n_bootstrap"].isna().all():
        return ""
    level = " / ".join(f"{float(v) * 100:g} %" for v in dict.fromkeys(aggregates["confidence"].dropna()))
    rnsb = aggregates["metric"] == "RNSB"
    counts = [
        (aggregates.loc[~rnsb, "n_bootstrap"], ""),
        (aggregates.loc[rnsb, "n_bootstrap"], " (RNSB, which refits)"),
    ]
    resamples = ", ".join(
        " / ".join(f"{int(v):,}" for v in dict.fromkeys(n.dropna())) + what for n, what in counts if n.notna().any()
    )
    return (
        f"CI of effect_size: {level} percentile bootstrap over words, {resamples} resamples, each set resampled "
        "within itself (RIPA's target pairs as pairs; RNSB's split fixed); ci_undefined: resamples whose score "
        "is undefined (ECT's ρ on one repeated attribute word), left out; WEFE gives no interval "
        "(docs/methods.md §9.4)"
    )


SPEC = MetricSpec(
    name="wefe",
    run=run,
    config=WefeMetricConfig,
    model_kinds=("static", *LANGUAGE_MODELS),
    title="WEFE",
    description="WEFE's RND, RNSB, MAC, ECT and RIPA on a WEAT suite, static or contextual vectors",
    uses=frozenset({"stats.n_bootstrap", "stats.confidence"}),
    ignores=ignored_options,
    views=views,
    effects=(EFFECT_SIZE,),
    plots=EFFECT_PLOTS,
)
