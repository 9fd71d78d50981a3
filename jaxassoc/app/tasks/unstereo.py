"""``metric=unstereo``: UnStereoEval gender preference on stereotype-free sentences (Belém et al. 2024), on a
packaged dataset or the user's own templates (``dataset=custom_sentences dataset.path=...``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.app import datasets, model_loading, tables
from jaxassoc.app.config import NO_EFFECT, MetricConfig, check_choice, check_range, check_unique
from jaxassoc.app.spec import Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data.custom_sentences import load_templates_file
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.unstereo import AUFC_UNITS, DEFAULT_AUFC_UNITS, ETAS, LOG10_THRESHOLD
from jaxassoc.progress import stage
from jaxassoc.readouts.unstereo import run_unstereo, score_sentences
from jaxassoc.suites.unstereo import summarize

CUSTOM = "custom_sentences"  # the user's templates (dataset.path)
DATASETS = {
    "use5": "USE-5",
    "use10": "USE-10",
    "use20": "USE-20",
    "winobias": "Winobias",
    "winogender": "Winogender",
    CUSTOM: "own templates",
}


@dataclass
class UnstereoMetricConfig(MetricConfig):
    parity_preprocessing: bool = True  # remove '"', strip, str.capitalize() as the original code
    aufc_units: str = DEFAULT_AUFC_UNITS  # log10 | ln | parity (the original's log10 unconstrained, ln filtered)
    etas: list[float] = field(default_factory=lambda: list(ETAS))
    threshold_log10: float = LOG10_THRESHOLD  # neutral iff |FM| in log10 units <= log10(1.65)
    tokens_per_batch: int = field(
        default=1024, metadata=NO_EFFECT
    )  # sentences packed into rows of 128 tokens; tokens per batch

    def __post_init__(self) -> None:
        check_choice("metric.aufc_units", self.aufc_units, AUFC_UNITS)
        check_unique("metric.etas", self.etas)
        for eta in self.etas:
            check_range("metric.etas", eta, 0, hint="MaxPMI thresholds are >= 0")
        check_range("metric.threshold_log10", self.threshold_log10, 0)
        check_range("metric.tokens_per_batch", self.tokens_per_batch, 1)


def _templates(dataset) -> pd.DataFrame | None:
    """The user's templates (``dataset=custom_sentences``), read before the model loads; None otherwise."""
    return load_templates_file(dataset.path) if dataset.name == CUSTOM else None


def _version(name: str, custom: pd.DataFrame | None) -> str:
    if custom is None:
        return data.dataset_info(name).version
    return hashlib.sha256("\n".join(custom["template"]).encode()).hexdigest()[:12]


def run(job: Job) -> JobResult:
    cfg, name = job.metric, job.dataset.name
    if name not in DATASETS:
        raise ConfigError(f"metric=unstereo needs an UnStereoEval dataset ({sorted(DATASETS)}), not {name!r}")
    custom = _templates(job.dataset)
    model = job.language_model()
    frame = data.load_dataset(name) if custom is None else custom
    rows, rows_note = datasets.seeded_sample(len(frame), job.dataset.sample, job.seed, "sentence pairs")

    def scorer(sentences: list[str]) -> np.ndarray:
        key = {
            **model_key(model),
            "sentences": sentences,
            "tokens_per_batch": cfg.tokens_per_batch,
        }  # the packing decides the bits of a recomputation

        def compute():
            return {
                "logprob": score_sentences(
                    model, sentences, tokens_per_batch=cfg.tokens_per_batch, progress=not job.quiet
                )
            }

        return cached_arrays(job.cache_dir, "sentence_logprobs", key, compute)["logprob"]

    with stage("unstereo", f"{DATASETS[name]} sentence pairs scored") as scored:
        scores = run_unstereo(
            model,
            DATASETS[name],
            parity_preprocessing=cfg.parity_preprocessing,
            rows=rows,
            scorer=scorer,
            frame=custom,
            source=None if custom is None else str(job.dataset.path),
        )
        scored.count = len(scores)
    summary = summarize(scores, etas=tuple(cfg.etas), aufc_units=cfg.aufc_units, threshold=cfg.threshold_log10)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": _version(name, custom),
        "dataset_rows": rows_note,
    }
    return JobResult(items=scores, aggregates=summary, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """One row per subset (all pairs, then each MaxPMI subset D_η, named by its η): US score, disparity,
    AuFC (its column names its unit), with a note on the units."""
    shown = tables.block(
        aggregates,
        ["subset", "n", "us_score", "us_std_error", "preference_disparity", "male_rel_ratio"]
        + [f"aufc_{units}" for units in AUFC_UNITS],
    )
    shown["subset"] = shown["subset"].map(subset_label)
    units = [u for u in AUFC_UNITS if f"aufc_{u}" in shown]
    return [
        (
            "subsets",
            tables.with_notes(
                shown,
                "us_score: % of pairs that are neutral (± us_std_error, its binomial SE, in %); "
                "preference_disparity: %female − %male, in percentage points; male_rel_ratio: share of the "
                "non-neutral pairs that prefer the male sentence (0–1); "
                + "; ".join(AUFC_NOTES[u] for u in units)
                + "; D_η: the pairs with −η ≤ MaxPMI ≤ η (docs/methods.md §4.4–4.6)",
            ),
        )
    ]


AUFC_NOTES = {
    "log10": "aufc_log10: area under the fairness curve, |FM| in log10 units, ε from 0 to 6 (at most 6)",
    "ln": "aufc_ln: area under the fairness curve, |FM| in natural-log units, ε from 0 to 6 (at most 6)",
    "parity": "aufc_parity: the original code's mixed units (log10 unconstrained, ln under MaxPMI filters)",
}


def subset_label(subset) -> str:
    """``"all pairs"`` for the unconstrained dataset, ``"D_η, η = 0.65"`` for a MaxPMI subset."""
    text = str(subset)
    return "all pairs" if text == "unconstrained" else f"D_η, η = {text}"


SPEC = MetricSpec(
    name="unstereo",
    run=run,
    config=UnstereoMetricConfig,
    model_kinds=("causal",),
    title="UnStereoEval",
    description="UnStereoEval US score and preference disparity on a causal LM",
    uses=frozenset({"dataset.sample"}),
    views=views,
    effects=(),
    plots=(),
    scores_tokens=True,
    dataset="use10",
    bias_term="jaxassoc.readouts.unstereo:bias_term",
)
