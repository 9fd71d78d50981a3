"""A user-defined metric registered from outside jaxassoc (JAXASSOC_PLUGINS=toy_metric).

It scores a seeded sample of standard-normal "items" and reports their mean: enough to check that a
plugin's config, seed and options flow through the app, the result store, resume and the report.
"""

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from jaxassoc.plugin import JobResult, MetricConfig, register_metric


@dataclass
class ToyConfig(MetricConfig):
    n_items: int = 5
    scale: float = 1.0


def run_toy(job) -> JobResult:
    values = job.metric.scale * np.asarray(jax.random.normal(jax.random.key(job.seed), (job.metric.n_items,)))
    items = pd.DataFrame({"item": np.arange(job.metric.n_items), "score": values})
    aggregates = pd.DataFrame({"test": ["toy"], "effect_size": [float(values.mean())], "n_items": [job.metric.n_items]})
    return JobResult(items=items, aggregates=aggregates, provenance={"toy_version": "1"})


register_metric("toy", run=run_toy, config=ToyConfig, model_kinds=("static", "causal"))
