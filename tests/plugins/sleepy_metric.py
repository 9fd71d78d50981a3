"""A plugin metric that records its process id in its output folder, then waits ``metric.seconds``.

Tests kill a sweep of such jobs and check that its worker processes do not outlive it.
"""

import os
import time
from dataclasses import dataclass

import pandas as pd

from jaxassoc.io import atomic_write
from jaxassoc.plugin import JobResult, MetricConfig, register_metric


@dataclass
class SleepyConfig(MetricConfig):
    seconds: float = 120.0


def run_sleepy(job) -> JobResult:
    atomic_write(job.output_dir / "worker.pid", lambda p: p.write_text(str(os.getpid())))
    deadline = time.monotonic() + job.metric.seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
    table = pd.DataFrame({"test": ["sleepy"], "seconds": [job.metric.seconds]})
    return JobResult(items=table, aggregates=table)


register_metric("sleepy", run=run_sleepy, config=SleepyConfig, model_kinds=("static", "causal"))
