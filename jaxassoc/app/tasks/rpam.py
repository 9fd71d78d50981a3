"""``metric=rpam``: RPAM on a causal LM; the dataset chooses the validation task (Hodel et al. 2026, §5).

- ``weat_ws`` / ``weat_caliskan2017`` / ``custom_weat`` (the user's own targets and attributes):
  RPAM Test on every test (d, permutation p, bootstrap CI);
- ``wordsim353``: pair scores vs human similarity (Spearman);
- ``bellezza``: RPAM Valence vs human pleasantness (Spearman, Pearson); ``metric.group_size=k`` > 1
  gives Bellezza-kX; ``metric.downstream=true`` instead compares RPAM Valence with the model's own 1-5
  ratings of the words (Experiment 3, App. F; an instruct model, ``metric.chat_template``);
- ``sst2``: balanced SST-2 valence classification (F1).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import pandas as pd

from jaxassoc import data
from jaxassoc.app import datasets, model_loading, tables
from jaxassoc.app.config import MetricConfig, check_range
from jaxassoc.app.spec import CORRELATIONS, EFFECT_PLOTS, EFFECT_SIZE, Job, JobResult, MetricSpec
from jaxassoc.errors import ConfigError
from jaxassoc.progress import stage
from jaxassoc.readouts.rpam_prompts import PromptTemplate
from jaxassoc.stats import StatsOptions
from jaxassoc.suites import rpam
from jaxassoc.suites.weat import check_suite_words

TASKS = ("weat_ws", "weat_caliskan2017", "custom_weat", "wordsim353", "bellezza", "sst2")
SUITE_TASKS = ("weat_ws", "weat_caliskan2017", "custom_weat")
SAMPLE_TASKS = ("wordsim353", "bellezza", "sst2")
STATS_USED = tuple(f.name for f in dataclasses.fields(StatsOptions))
"""The stats options of the RPAM Test (WEAT-suite tasks); the other tasks report correlations or F1."""


@dataclass
class RpamMetricConfig(MetricConfig):
    normalise: bool = True  # False: the paper's ablation with full-vocabulary probabilities
    swap_gender_roles: bool = True  # WEAT-WS C7/C8: gender terms as targets (App. B)
    group_size: int = 1  # bellezza: k > 1 joins k words per target (Bellezza-kX)
    downstream: bool = False  # bellezza: Spearman of RPAM Valence vs the model's own 1-5 ratings (Exp. 3)
    chat_template: bool = True  # downstream: wrap the rating prompt in the model's chat template
    max_new_tokens: int = 16  # downstream: greedy tokens generated at most per answer

    def __post_init__(self) -> None:
        check_range("metric.group_size", self.group_size, 1, hint="1: single words; k > 1: Bellezza-kX")
        check_range("metric.max_new_tokens", self.max_new_tokens, 1)


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job's task leaves unused (the app refuses them when set)."""
    cfg, name = job.metric, job.dataset.name
    ignored = {}
    if name not in SUITE_TASKS:
        ignored |= {
            f"stats.{f}": f"dataset={name} reports correlations or F1 with their own p-values; stats "
            f"options apply to the RPAM Test (dataset={' or '.join(SUITE_TASKS)})"
            for f in STATS_USED
        }
    if name != "weat_ws":
        ignored["metric.swap_gender_roles"] = "it swaps the roles of WEAT-WS C7/C8 (dataset=weat_ws) only"
    if name != "bellezza":
        ignored |= {f"metric.{f}": "the Bellezza tasks only (dataset=bellezza)" for f in ("group_size", "downstream")}
    if not cfg.downstream:
        ignored |= {
            f"metric.{f}": "the downstream rating task only (metric.downstream=true)"
            for f in ("chat_template", "max_new_tokens")
        }
    elif cfg.group_size > 1:
        ignored["metric.group_size"] = "metric.downstream=true rates single words"
    if name not in SAMPLE_TASKS:
        ignored["dataset.sample"] = f"dataset.sample subsamples {', '.join(SAMPLE_TASKS)} only"
    elif name == "bellezza" and cfg.group_size > 1:
        ignored["dataset.sample"] = "Bellezza-kX (metric.group_size > 1) groups all words"
    if job.template.text is not None and "{quote}" not in job.template.text:
        ignored["template.quote"] = "the template text has no {quote} slot"
    return ignored


def run(job: Job) -> JobResult:
    cfg, name = job.metric, job.dataset.name
    if name not in TASKS:
        raise ConfigError(f"metric=rpam has no task for dataset {name!r}; use one of {TASKS}")
    if not job.template.text:
        raise ConfigError("metric=rpam needs a template: template=tp1 (words) or template=tp2 (n-grams, sentences)")
    if cfg.downstream and job.model.kind == "seq2seq":
        raise ConfigError(
            f"metric.downstream=true: the ratings are generated greedily by a causal LM, and model "
            f"{job.model.name!r} is an encoder-decoder (model.kind=seq2seq); drop metric.downstream"
        )
    suite = datasets.weat_suite(job.dataset) if name in SUITE_TASKS else None
    if suite is not None:
        check_suite_words(suite.tests)  # before the model loads
    template = PromptTemplate(job.template.name, job.template.text, job.template.quote)
    model = job.language_model()
    options = dict(
        normalise=cfg.normalise,
        add_bos=job.model.add_bos,
        batch_size=job.model.batch_size,
        mesh=model.mesh,
        progress=not job.quiet,
        cache_dir=job.cache_dir,
    )
    with stage("rpam", f"{name} items scored") as scored:
        items, aggregates = _task(job, model, template, options, suite)
        scored.count = len(items)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": data.dataset_info(name).version
        if suite is None
        else datasets.dataset_version(job.dataset, suite),
        "add_bos": model.vocab.add_bos if job.model.add_bos is None else job.model.add_bos,
    }
    return JobResult(items=items, aggregates=aggregates, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The RPAM Test rows (d, CI, p, set sizes), the share of tests with d > 0, and the benchmark rows
    (correlations with human ratings, SST-2 F1), each with its own columns."""
    test = aggregates["test"] if "test" in aggregates else pd.Series(None, index=aggregates.index, dtype=object)
    benchmark = aggregates["benchmark"].notna() if "benchmark" in aggregates else test.isna()
    tests = aggregates[test.notna() & (test != "all")]
    tests = tests.assign(permutations=tables.permutations(tests))
    return [
        (
            "tests",
            tables.with_notes(
                tables.block(
                    tests,
                    [
                        "test",
                        "name",
                        "n_targets",
                        "n_attributes",
                        "n_multi_token_attributes",
                        "permutations",
                        "effect_size",
                        "ci_low",
                        "ci_high",
                        "p_value",
                        "p_min",
                        "caveat",
                        "undefined_reason",
                    ],
                ),
                tables.test_note(tests, resampled="of the targets within X and within Y"),
            ),
        ),
        (
            "share of tests with d > 0 (WEAT-WS F1)",
            tables.block(aggregates[test == "all"], ["share_positive", "n_undefined"]),
        ),
        (
            "benchmarks",
            tables.block(
                aggregates[benchmark],
                [
                    c
                    for c in aggregates.columns
                    if c
                    not in (
                        "test",
                        "name",
                        "roles",
                        "p_exact",
                        "p_resamples",
                        "n_bootstrap",
                        "alternative",
                        "confidence",
                        "share_positive",
                        "n_undefined",
                        "p_min",
                        "caveat",
                    )
                ],
            ),
        ),
    ]


def _task(job: Job, model, template: PromptTemplate, options: dict, suite) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(items, aggregates)`` of the task the dataset names (forward passes through the cache); ``suite``:
    the WEAT tests of a suite task."""
    cfg, name = job.metric, job.dataset.name
    key = jax.random.key(job.seed)
    if suite is not None:
        return rpam.weat_ws(
            model,
            template,
            key,
            suite=suite,
            swap_gender_roles=cfg.swap_gender_roles and name == "weat_ws",
            options=job.stats.options(),
            **options,
        )
    if name == "wordsim353":
        return rpam.wordsim353(model, template, sample=job.dataset.sample, key=key, **options)
    if name == "bellezza" and cfg.downstream:
        return rpam.bellezza_downstream(
            model,
            template,
            chat_template=cfg.chat_template,
            max_new_tokens=cfg.max_new_tokens,
            sample=job.dataset.sample,
            key=key,
            **options,
        )
    if name == "bellezza" and cfg.group_size > 1:
        return rpam.bellezza_groups(model, template, key, k=cfg.group_size, **options)
    if name == "bellezza":
        return rpam.bellezza(model, template, sample=job.dataset.sample, key=key, **options)
    return rpam.sst2(model, template, key, sample=job.dataset.sample, **options)


SPEC = MetricSpec(
    name="rpam",
    run=run,
    config=RpamMetricConfig,
    model_kinds=("causal", "seq2seq"),
    title="RPAM",
    description="RPAM Test / Valence / similarity on a causal LM or an encoder-decoder (T5)",
    uses=frozenset({*(f"stats.{f}" for f in STATS_USED), "stats.correction", "dataset.sample", "template"}),
    ignores=ignored_options,
    views=views,
    effects=(EFFECT_SIZE,),
    plots=(*EFFECT_PLOTS, CORRELATIONS),
    bias_term="jaxassoc.readouts.rpam_head:bias_term",
)
