"""``metric=crows_pairs``: CrowS-Pairs (Nangia et al. 2020; docs/methods.md §6) on a masked or causal LM.

Pairs are scored in chunks of ``metric.chunk_pairs``, each cached as soon as it is done (an interrupted
run resumes at its first unfinished chunk). The aggregates hold one row per bias type and a row ``all``:
``metric_score`` (percent of pairs whose more-stereotyping sentence scores higher) with its exact
Clopper–Pearson CI and binomial test against 50 %, sided as ``stats.alternative``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from jaxassoc.app import datasets, tables
from jaxassoc.app.config import NO_EFFECT, MetricConfig, check_range
from jaxassoc.app.spec import PREFERENCES, Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_chunks, model_key
from jaxassoc.data.crows_pairs import CROWS_PAIRS_FILE, load_crows_pairs
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.crows_pairs import DECIMALS
from jaxassoc.readouts.crows_pairs import check_distinct_pairs, score_pairs
from jaxassoc.suites.crows_pairs import ALL, per_pair, summarize


@dataclass
class CrowsPairsMetricConfig(MetricConfig):
    batch_size: int = field(default=64, metadata=NO_EFFECT)  # masked LM: masked copies per forward batch
    tokens_per_batch: int = field(default=1024, metadata=NO_EFFECT)  # causal LM: tokens per packed batch
    chunk_pairs: int = field(default=256, metadata=NO_EFFECT)  # pairs per cached chunk (resume granularity)

    def __post_init__(self) -> None:
        check_range("metric.batch_size", self.batch_size, 1)
        check_range("metric.tokens_per_batch", self.tokens_per_batch, 1)
        check_range("metric.chunk_pairs", self.chunk_pairs, 1)


def ignored_options(job: Job) -> dict[str, str]:
    """A causal LM packs sentences (no ``batch_size``); a masked LM batches copies (no ``tokens_per_batch``)."""
    if job.model.kind == "masked":
        return {"metric.tokens_per_batch": "a masked LM batches masked copies: set metric.batch_size"}
    return {"metric.batch_size": "a causal LM packs whole sentences: set metric.tokens_per_batch"}


def _pairs(job: Job) -> tuple[pd.DataFrame, str, str]:
    if job.dataset.name != "crows_pairs":
        raise ConfigError(f"metric=crows_pairs scores CrowS-Pairs: use dataset=crows_pairs, not {job.dataset.name!r}")
    path = getattr(job.dataset, "path", None)
    pairs = load_crows_pairs(path)
    rows, note = datasets.seeded_sample(len(pairs), job.dataset.sample, job.seed, "pairs")
    if rows is not None:
        pairs = pairs.iloc[rows].reset_index(drop=True)
    return pairs, (CROWS_PAIRS_FILE if path is None else str(path)), note


def run(job: Job) -> JobResult:
    cfg = job.metric
    pairs, source, rows_note = _pairs(job)  # read (and checked) before the model loads
    model = job.language_model()
    check_distinct_pairs(model, pairs, source)  # all pairs before the first chunk's forward pass
    batch = cfg.batch_size if model.objective == "masked" else cfg.tokens_per_batch

    def key(chunk: pd.DataFrame) -> dict:  # the batching decides the bits of a recomputation
        return {**model_key(model), "pairs": chunk[["sent_more", "sent_less"]].to_numpy().tolist(), "batch": batch}

    def compute(chunk: pd.DataFrame) -> dict:
        kw = dict(batch_size=cfg.batch_size, tokens_per_batch=cfg.tokens_per_batch, progress=not job.quiet)
        return score_pairs(model, chunk, source=source, **kw)

    scores = cached_chunks(
        job.cache_dir,
        "crows_pairs_scores",
        pairs,
        cfg.chunk_pairs,
        key,
        compute,
        log_as=("crows_pairs", "pairs scored"),
    )
    items = per_pair(pairs, scores)
    provenance = {**job.provenance(model), "dataset_rows": rows_note}
    if getattr(job.dataset, "path", None) is not None:  # the user's file, not the packaged one
        provenance.update(dataset_file=str(job.dataset.path), dataset_version=datasets.file_version(job.dataset.path))
    aggregates = summarize(items, alternative=job.stats.alternative, confidence=job.stats.confidence)
    return JobResult(items=items, aggregates=aggregates, provenance=provenance)


COLUMNS = [
    "bias_type",
    "n",
    "metric_score",
    "ci_low",
    "ci_high",
    "p_value",
    "n_neutral",
    "stereotype_score",
    "n_stereo",
    "antistereotype_score",
    "n_antistereo",
]


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """All pairs, then the bias types (their p-values are one family for ``stats.correction``)."""
    sides = tables.SIDES.get(str(aggregates["alternative"].iloc[0]), "two-sided")
    level = f"{float(aggregates['confidence'].iloc[0]):.0%}"
    note = (
        f"metric_score: % of the n pairs whose more-stereotyping sentence scores higher (50 = no preference; "
        f"neutral pairs, equal to {DECIMALS} decimals, count against it); ci: exact {level} Clopper–Pearson "
        f"interval, p: {sides} exact binomial test of 50 % (docs/methods.md §6.3–6.4); stereotype_score / "
        "antistereotype_score: the same share among the non-neutral stereo / antistereo pairs (n_stereo, "
        "n_antistereo)"
    )
    overall = aggregates[aggregates["bias_type"] == ALL]
    types = aggregates[aggregates["bias_type"] != ALL]
    return [
        ("all pairs", tables.with_notes(tables.block(overall, COLUMNS), note)),
        ("bias types", tables.with_notes(tables.block(types, COLUMNS), note)),
    ]


SPEC = MetricSpec(
    name="crows_pairs",
    run=run,
    config=CrowsPairsMetricConfig,
    model_kinds=("causal", "masked"),
    title="CrowS-Pairs",
    description="CrowS-Pairs metric score overall and per bias type (Nangia et al. 2020)",
    uses=frozenset({"stats.alternative", "stats.confidence", "stats.correction", "dataset.sample"}),
    ignores=ignored_options,
    views=views,
    effects=(),
    plots=(PREFERENCES,),
    dataset="crows_pairs",
    bias_term="jaxassoc.readouts.crows_pairs:bias_term",
    scores_tokens=True,
)
