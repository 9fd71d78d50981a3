"""A faulty plugin: its run function returns a dict instead of a JobResult."""

import pandas as pd

from jaxassoc.plugin import register_metric


def run_dict(job):
    table = pd.DataFrame({"test": ["dict"], "effect_size": [0.0]})
    return {"items": table, "aggregates": table}


register_metric("dict_result", run=run_dict, model_kinds=("static", "causal"))
