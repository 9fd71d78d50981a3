"""``metric=rpam``: RPAM on a causal LM; the dataset chooses the validation task (Hodel et al. 2026, §5).

- ``weat_ws`` / ``weat_caliskan2017``: RPAM Test on every test (d, permutation p, bootstrap CI);
- ``wordsim353``: pair scores vs human similarity (Spearman);
- ``bellezza``: RPAM Valence vs human pleasantness (Spearman, Pearson); ``metric.group_size=k`` > 1
  gives Bellezza-kX; ``metric.downstream=true`` instead compares RPAM Valence with the model's own 1-5
  ratings of the words (Experiment 3, App. F; an instruct model, ``metric.chat_template``);
- ``sst2``: balanced SST-2 valence classification (F1).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import pandas as pd

from jaxassoc import data
from jaxassoc.app import resolve
from jaxassoc.app.config import MetricConfig
from jaxassoc.app.pipelines import rpam, rpam_downstream
from jaxassoc.app.pipelines.rpam_prompts import PromptTemplate
from jaxassoc.app.registry import Job, JobResult
from jaxassoc.app.stages import stage
from jaxassoc.errors import ConfigError

TASKS = ("weat_ws", "weat_caliskan2017", "wordsim353", "bellezza", "sst2")


@dataclass
class RpamMetricConfig(MetricConfig):
    normalise: bool = True  # False: the paper's ablation with full-vocabulary probabilities
    swap_gender_roles: bool = True  # WEAT-WS C7/C8: gender terms as targets (App. B)
    group_size: int = 1  # bellezza: k > 1 joins k words per target (Bellezza-kX)
    downstream: bool = False  # bellezza: Spearman of RPAM Valence vs the model's own 1-5 ratings (Exp. 3)
    chat_template: bool = True  # downstream: wrap the rating prompt in the model's chat template
    max_new_tokens: int = 4  # downstream: greedy tokens generated at most per answer


def run(job: Job) -> JobResult:
    cfg, name = job.metric, job.dataset.name
    if cfg.downstream and name != "bellezza":
        raise ConfigError(f"metric.downstream=true is the Bellezza rating task: use dataset=bellezza, not {name!r}")
    if cfg.max_new_tokens < 1:
        raise ConfigError(f"metric.max_new_tokens={cfg.max_new_tokens} must be at least 1")
    if job.dataset.sample is not None and name not in ("wordsim353", "bellezza", "sst2"):
        raise ConfigError(f"dataset.sample is supported for wordsim353, bellezza and sst2, not {name!r}")
    if name == "bellezza" and cfg.group_size > 1 and job.dataset.sample is not None:
        raise ConfigError("dataset.sample does not apply to Bellezza-kX (metric.group_size > 1)")
    if name not in TASKS:
        raise ConfigError(f"metric=rpam has no task for dataset {name!r}; use one of {TASKS}")
    if not job.template.text:
        raise ConfigError("metric=rpam needs a template: template=tp1 (words) or template=tp2 (n-grams, sentences)")
    template = PromptTemplate(job.template.name, job.template.text, job.template.quote)
    model = resolve.language_model(job.model)
    options = dict(normalise=cfg.normalise, add_bos=job.model.add_bos, batch_size=job.model.batch_size,
                   shard=job.model.shard, progress=not job.quiet, cache_dir=job.cache_dir)
    with stage("rpam", f"{name} items scored") as scored:
        items, aggregates = _task(job, model, template, options)
        scored.count = len(items)
    provenance = {
        **resolve.model_provenance(job.model, model),
        "dataset_version": data.dataset_info(name).version,
        "add_bos": model.vocab.add_bos if job.model.add_bos is None else job.model.add_bos,
    }
    compact = aggregates.drop(columns=[c for c in ("name", "roles", "p_exact") if c in aggregates.columns])
    return JobResult(items=items, aggregates=aggregates, provenance=provenance, summary=compact)


def _task(job: Job, model, template: PromptTemplate, options: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(items, aggregates)`` of the task the dataset names (forward passes through the cache)."""
    cfg, name, s = job.metric, job.dataset.name, job.stats
    key = jax.random.key(job.seed)
    if name.startswith("weat"):
        return rpam.weat_ws(
            model, template, key, suite=name, swap_gender_roles=cfg.swap_gender_roles, ddof=s.ddof,
            exact_bound=s.exact_bound, n_permutations=s.n_permutations, ties=s.ties,
            n_bootstrap=s.n_bootstrap, confidence=s.confidence, **options,
        )
    if name == "wordsim353":
        return rpam.wordsim353(model, template, sample=job.dataset.sample, key=key, **options)
    if name == "bellezza" and cfg.downstream:
        if cfg.group_size > 1:
            raise ConfigError("metric.downstream=true rates single words: leave metric.group_size at 1")
        return rpam_downstream.bellezza_downstream(
            model, template, chat_template=cfg.chat_template, max_new_tokens=cfg.max_new_tokens,
            sample=job.dataset.sample, key=key, **options,
        )
    if name == "bellezza" and cfg.group_size > 1:
        return rpam.bellezza_groups(model, template, key, k=cfg.group_size, **options)
    if name == "bellezza":
        return rpam.bellezza(model, template, sample=job.dataset.sample, key=key, **options)
    return rpam.sst2(model, template, key, sample=job.dataset.sample, **options)
