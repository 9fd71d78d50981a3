"""``metric=stereoset dataset=stereoset dataset.path=<dev.json>``: StereoSet's LM, SS and ICAT scores
(Nadeem et al. 2021; docs/methods.md §7) per split (intrasentence, intersentence, overall) and domain."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pandas as pd

from jaxassoc.app import datasets, tables
from jaxassoc.app.config import NO_EFFECT, MetricConfig, check_choice, check_range
from jaxassoc.app.spec import Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_chunks, model_key
from jaxassoc.data.stereoset import SPLITS, load_stereoset
from jaxassoc.errors import ConfigError
from jaxassoc.readouts.stereoset import CAUSAL_SCORING, score_candidates
from jaxassoc.suites.stereoset import OVERALL, summarize

log = logging.getLogger("jaxassoc")


@dataclass
class StereoSetMetricConfig(MetricConfig):
    causal_scoring: str = (
        "authors"  # causal intrasentence: authors (their script's contexts) | start (BOS before every token)
    )
    batch_size: int = field(default=64, metadata=NO_EFFECT)  # masked LM: masked prompts per forward batch
    tokens_per_batch: int = field(default=1024, metadata=NO_EFFECT)  # causal LM: tokens per packed batch
    chunk_examples: int = field(default=500, metadata=NO_EFFECT)  # examples per cached chunk (resume granularity)

    def __post_init__(self) -> None:
        check_range("metric.chunk_examples", self.chunk_examples, 1)
        check_choice("metric.causal_scoring", self.causal_scoring, CAUSAL_SCORING)
        check_range("metric.batch_size", self.batch_size, 1)
        check_range("metric.tokens_per_batch", self.tokens_per_batch, 1)


def ignored_options(job: Job) -> dict[str, str]:
    """A causal LM packs sentences (no ``batch_size``); a masked LM batches prompts (no ``tokens_per_batch``)."""
    if job.model.kind == "masked":
        return {
            "metric.tokens_per_batch": "a masked LM batches masked prompts: set metric.batch_size",
            "metric.causal_scoring": "a masked LM fills the blank with masks (docs/methods.md §7.2)",
        }
    return {"metric.batch_size": "a causal LM packs whole sentences: set metric.tokens_per_batch"}


def _candidates(job: Job) -> tuple[pd.DataFrame, str]:
    if job.dataset.name != "stereoset":
        raise ConfigError("metric=stereoset scores StereoSet: use dataset=stereoset dataset.path=<dev.json>")
    rows = load_stereoset(job.dataset.path)
    examples = rows["example"].unique()
    chosen, note = datasets.seeded_sample(len(examples), job.dataset.sample, job.seed, "examples")
    if chosen is not None:
        rows = rows[rows["example"].isin(set(examples[chosen]))].reset_index(drop=True)
    return rows, note


def run(job: Job) -> JobResult:
    cfg = job.metric
    rows, rows_note = _candidates(job)  # read (and checked) before the model loads
    if job.intervention.name == "self_debias" and job.model.kind == "causal" and cfg.causal_scoring == "authors":
        raise ConfigError(
            "intervention=self_debias on a causal LM needs metric.causal_scoring=start: the authors' scoring reads "
            "contexts without a start token, before which the debiasing prefix cannot go (docs/methods.md §11.7)"
        )
    model = job.language_model()
    skipped = None
    if model.objective == "masked" and (rows["split"] == "intersentence").any():
        skipped = "intersentence split not scored: a masked LM has no next-sentence head here (docs/methods.md §7.2)"
        rows = rows[rows["split"] == "intrasentence"].reset_index(drop=True)
        if not len(rows):
            raise ConfigError(f"{job.dataset.path}: no intrasentence examples, and a masked LM scores only those")
    batch = cfg.batch_size if model.objective == "masked" else cfg.tokens_per_batch

    def key(chunk: pd.DataFrame) -> dict:
        candidates = chunk[["split", "context", "sentence", "template_word"]].to_numpy().tolist()
        return {**model_key(model), "candidates": candidates, "batch": batch, "scoring": cfg.causal_scoring}

    def compute(chunk: pd.DataFrame) -> dict:
        kw = dict(scoring=cfg.causal_scoring, batch_size=cfg.batch_size, tokens_per_batch=cfg.tokens_per_batch)
        return {"score": score_candidates(model, chunk, **kw)}

    per_chunk = 3 * cfg.chunk_examples  # three candidates per example, in file order
    log_as = ("stereoset", "candidate sentences scored")
    rows["score"] = cached_chunks(job.cache_dir, "stereoset_scores", rows, per_chunk, key, compute, log_as=log_as)[
        "score"
    ]
    provenance = {
        **job.provenance(model),
        "dataset_file": str(job.dataset.path),
        "dataset_version": datasets.file_version(job.dataset.path),
        "dataset_rows": rows_note,
    }
    if skipped:
        provenance["note"] = skipped
        log.warning("stereoset: %s; the overall row covers the intrasentence split only", skipped)
    return JobResult(items=rows, aggregates=summarize(rows), provenance=provenance)


COLUMNS = ["split", "domain", "covers", "n", "n_targets", "lm_score", "ss_score", "icat_score"]
ONE_SPLIT = (
    "overall covers {covers} only{why}: not comparable with an overall score over both splits (docs/methods.md §7.2)"
)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One table per split (overall last): LM, SS and ICAT by domain."""
    note = (
        "lm_score: % of the 2n (meaningful vs unrelated) comparisons won by the meaningful candidate (ideal 100); "
        "ss_score: % of examples whose stereotype outscores its anti-stereotype (ideal 50); icat_score = lm · "
        "min(ss, 100 − ss) / 50 (ideal 100); each a macro average over the n_targets target terms, as the "
        "authors' evaluation (Nadeem et al. 2021 §6.1; docs/methods.md §7.3); no CI or test: the authors define none"
    )
    out = []
    for split, part in aggregates.groupby("split", sort=False):
        notes = [note]
        if split == OVERALL and "covers" in part and set(part["covers"]) - {", ".join(SPLITS)}:
            covers = part["covers"].iloc[0]
            why = " (a masked LM: no next-sentence head for intersentence)" if covers == "intrasentence" else ""
            notes.insert(0, ONE_SPLIT.format(covers=f"the {covers} split", why=why))
        out.append((split, tables.with_notes(tables.block(part, COLUMNS), *notes)))
    return out


SPEC = MetricSpec(
    name="stereoset",
    run=run,
    config=StereoSetMetricConfig,
    model_kinds=("causal", "masked"),
    title="StereoSet",
    description="StereoSet LM, SS and ICAT scores per split and domain (Nadeem et al. 2021)",
    uses=frozenset({"dataset.sample"}),
    ignores=ignored_options,
    views=views,
    effects=(),
    plots=(),
    dataset="stereoset",
    scores_tokens=True,
)
