"""A plugin metric whose "forward pass" goes through the on-disk cache, like the built-in metrics'."""

from dataclasses import dataclass

import numpy as np
import pandas as pd

from jaxassoc.plugin import JobResult, MetricConfig, cached_arrays, register_metric


@dataclass
class CachedToyConfig(MetricConfig):
    n_items: int = 5


def run_cached_toy(job) -> JobResult:
    n = job.metric.n_items
    scores = cached_arrays(
        job.cache_dir,
        "cached_toy",
        {"n_items": n, "seed": job.seed},
        lambda: {"scores": np.random.default_rng(job.seed).normal(size=n)},
    )["scores"]
    items = pd.DataFrame({"item": np.arange(n), "score": scores})
    return JobResult(items=items, aggregates=pd.DataFrame({"test": ["cached_toy"], "mean": [float(scores.mean())]}))


register_metric("cached_toy", run=run_cached_toy, config=CachedToyConfig, model_kinds=("static", "causal"))
