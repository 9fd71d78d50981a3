"""``metric=mediation``: causal mediation analysis of gender bias (Vig et al. 2020; docs/methods.md §10) on a
causal LM, over ``dataset=vig_professions`` (the professions and the 17 templates).

Examples are scored in batches of one length, each cached as soon as it is done (an interrupted run
resumes at its first unfinished batch). The aggregates: a row ``component=total`` (the total effect of
set-gender), one row per head (``component=head``, integer ``layer`` and ``head``) with its natural
indirect and direct effects, and one per selected neuron (``component=neuron``, ``layer`` and ``neuron``);
every row carries ``total_effect`` and ``n`` (examples). Each effect has a percentile CI from a bootstrap
over professions (``stats.n_bootstrap`` resamples at ``stats.confidence``; docs/methods.md §10.8).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd

from jaxassoc.app import datasets, tables
from jaxassoc.app.config import NO_EFFECT, MetricConfig, check_range
from jaxassoc.app.spec import HEADS, Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data.mediation import load_vig_professions
from jaxassoc.errors import ConfigError
from jaxassoc.progress import progress, stage
from jaxassoc.readouts import mediation as readout
from jaxassoc.stats.cluster_bootstrap import cluster_codes
from jaxassoc.stats.small_samples import MIN_SET_WORDS
from jaxassoc.suites.mediation import Bootstrap, per_example, summarize

log = logging.getLogger("jaxassoc")

SELECTION = "attribution patching at the profession's position, top per layer"


@dataclass
class MediationMetricConfig(MetricConfig):
    templates: int | None = None  # the first N of the dataset's templates (None: all 17)
    neurons_per_layer: int = 5  # neurons per layer whose effects are computed exactly (0: heads only)
    top_k: int = 10  # components listed in the report's top tables
    batch_size: int = field(default=32, metadata=NO_EFFECT)  # examples per forward batch

    def __post_init__(self) -> None:
        if self.templates is not None:
            check_range("metric.templates", self.templates, 1)
        check_range("metric.neurons_per_layer", self.neurons_per_layer, 0)
        check_range("metric.top_k", self.top_k, 1)
        check_range("metric.batch_size", self.batch_size, 1)


def _dataset(job: Job) -> tuple[list[str], list[str], str]:
    if job.dataset.name != "vig_professions":
        raise ConfigError(
            f"metric=mediation runs Vig et al.'s professions and templates: use dataset=vig_professions, "
            f"not {job.dataset.name!r}"
        )
    data = load_vig_professions(getattr(job.dataset, "path", None), getattr(job.dataset, "templates", None))
    professions, templates = list(data.professions), list(data.templates)
    if job.metric.templates is not None:
        templates = templates[: job.metric.templates]
    rows, note = datasets.seeded_sample(len(professions), job.dataset.sample, job.seed, "professions")
    if rows is not None:
        professions = [professions[i] for i in rows]
    return professions, templates, note


def log_dropped(frame: pd.DataFrame, model: str) -> None:
    """Says on the console how many examples are dropped and why, with the professions concerned."""
    dropped = frame[~frame["kept"]]
    if dropped.empty:
        return
    for why, rows in dropped.groupby("dropped", sort=False):
        names = list(dict.fromkeys(rows["profession"]))
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        log.warning(
            "mediation: %d of %d examples dropped for %s: %s (%s), as the authors drop them",
            len(rows),
            len(frame),
            model,
            why,
            shown,
        )


def run(job: Job) -> JobResult:
    cfg = job.metric
    professions, templates, rows_note = _dataset(job)  # read (and checked) before the model loads
    model = job.language_model()
    frame = readout.examples(model, professions, templates)
    kept = frame[frame["kept"]]
    log_dropped(frame, model.name)
    if kept.empty:
        raise ConfigError(
            f"metric=mediation: no profession of the dataset is one token for {model.name!r} where its set-gender "
            "word is; nothing to intervene on"
        )
    groups = readout.batches(frame, cfg.batch_size)
    neurons = cfg.neurons_per_layer > 0

    def key(rows: np.ndarray, what: str, **extra) -> dict:
        return {**model_key(model), what: frame.loc[rows, ["base", "alt"]].to_numpy().tolist(), **extra}

    parts = []
    with stage("mediation", "examples through every head", len(kept)):
        for rows, batch in progress(groups, "mediation: every head", quiet=job.quiet, unit="batch"):
            compute = lambda b=batch: readout.head_runs(model, b, neurons=neurons)  # noqa: E731
            parts.append(cached_arrays(job.cache_dir, "mediation_heads", key(rows, "heads", neurons=neurons), compute))
    order = np.concatenate([rows for rows, _ in groups])
    runs = {k: np.concatenate([p[k] for p in parts]) for k in ("lo_base", "lo_alt", "head_indirect", "head_direct")}
    selected = np.zeros((0, 2), int)
    if neurons:
        estimate = sum(p["neuron_estimate"] for p in parts)
        selected = readout.top_neurons(estimate, min(cfg.neurons_per_layer, estimate.shape[1]))
        found = []
        with stage("mediation", "examples through the selected neurons", len(kept)):
            for rows, batch in progress(groups, "mediation: selected neurons", quiet=job.quiet, unit="batch"):
                compute = lambda b=batch: readout.neuron_runs(model, b, selected)  # noqa: E731
                found.append(
                    cached_arrays(
                        job.cache_dir, "mediation_neurons", key(rows, "neurons", selected=selected.tolist()), compute
                    )
                )
        runs.update({k: np.concatenate([p[k] for p in found]) for k in ("neuron_indirect", "neuron_direct")})
        runs["neuron_estimate"] = estimate[selected[:, 0], selected[:, 1]]
    items = per_example(frame.loc[order], runs)
    L, H = readout.layer_and_heads(model)
    bootstrap = Bootstrap(
        jax.random.key(job.seed), cluster_codes(items["profession"]), job.stats.n_bootstrap, job.stats.confidence
    )
    aggregates = summarize(runs, L, H, selected, bootstrap).assign(top_k=cfg.top_k)
    provenance = {
        **job.provenance(model),
        "examples_dropped": int((~frame["kept"]).sum()),
        "neuron_selection": SELECTION,
        "dataset_rows": rows_note,
    }
    if getattr(job.dataset, "path", None) is not None:
        provenance.update(dataset_file=str(job.dataset.path), dataset_version=datasets.file_version(job.dataset.path))
    return JobResult(items=items, aggregates=aggregates, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The total effect, then the ``metric.top_k`` heads and neurons with the largest indirect effects, each
    effect with its CI over professions."""
    top_k = int(aggregates["top_k"].iloc[0])
    first = aggregates.iloc[0]
    notes = [
        "effects are mean relative changes of y = p(anti-stereotypical pronoun) / p(stereotypical pronoun) over "
        "the n examples (docs/methods.md §10.2): total = set-gender; indirect = the original sentence with only "
        "that component set to its set-gender value; direct = the set-gender sentence with only it kept",
        f"CIs: {first['confidence']:.0%} percentile bootstrap over the {int(first['n_professions'])} professions "
        f"({int(first['n_bootstrap']):,} resamples; each profession's examples in every template resampled "
        "together, the templates fixed)",
    ]
    if first["n_professions"] < MIN_SET_WORDS:
        notes.append(
            f"fewer than {MIN_SET_WORDS} professions: these CIs resample a handful of values, do not rely on them"
        )
    total = aggregates[aggregates["component"] == "total"]
    columns = ["total_effect", "total_ci_low", "total_ci_high", "n", "n_professions"]
    out = [("total effect", tables.with_notes(tables.block(total, columns), *notes))]
    effect = [
        "indirect_effect",
        "indirect_ci_low",
        "indirect_ci_high",
        "direct_effect",
        "direct_ci_low",
        "direct_ci_high",
    ]
    for component, unit in (("head", ["layer", "head"]), ("neuron", ["layer", "neuron"])):
        rows = aggregates[aggregates["component"] == component]
        if len(rows):
            top = rows.sort_values("indirect_effect", ascending=False, kind="stable").head(top_k)
            out.append(
                (
                    f"top {len(top)} {component}s by indirect effect",
                    tables.with_notes(tables.block(top, [*unit, *effect, "n"]), *notes),
                )
            )
    return out


SPEC = MetricSpec(
    name="mediation",
    run=run,
    config=MediationMetricConfig,
    model_kinds=("causal",),
    title="Causal mediation analysis (Vig et al. 2020)",
    description="causal mediation analysis of gender bias: effects of every head and top neurons (Vig et al. 2020)",
    uses=frozenset({"dataset.sample", "stats.n_bootstrap", "stats.confidence"}),
    views=views,
    effects=(),
    plots=(HEADS,),
    interventions=False,  # it intervenes on the model itself: an ablation would not be what it measures
    dataset="vig_professions",
)
