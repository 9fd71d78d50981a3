"""The toy metric registered as what it is, a metric that reads no dataset (``reads_dataset=False``)."""

from toy_metric import ToyConfig, run_toy

from jaxassoc.plugin import register_metric

register_metric("dataless", run=run_toy, config=ToyConfig, model_kinds=("static", "causal"), reads_dataset=False)
