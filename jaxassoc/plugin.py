"""Everything a user-defined metric needs, in one public module (docs/plugins.md).

A plugin metric is a function ``run(job) -> JobResult`` registered under a name; the Hydra app, the result
store, the report and sweeps then treat it as a built-in one::

    from dataclasses import dataclass
    from jaxassoc.plugin import Job, JobResult, MetricConfig, register_metric

    @dataclass
    class MyConfig(MetricConfig):
        scale: float = 1.0

    def run(job: Job) -> JobResult:
        model = job.language_model()          # loaded once per process, sharded over the job's mesh
        suite = job.weat_suite()              # the WEAT tests the job's dataset names
        ...
        return JobResult(items=..., aggregates=..., provenance=job.provenance(model))

    register_metric("my_metric", run=run, config=MyConfig, model_kinds=("causal",), uses={"stats.ddof"},
                    title="My metric", effects=(EFFECT_SIZE,), plots=EFFECT_PLOTS)

The spec (:class:`MetricSpec`) is all the app knows of a metric: its title, compact tables (``views``),
effect-size columns (:class:`Effects`) and figures (:class:`Plot`: the built-in ``EFFECT_PLOTS`` and
``CORRELATIONS``, or a function of a :class:`PlotInput`) give it its section of the report.

A job (:class:`Job`) holds the resolved config groups as typed dataclasses (``job.model``, ``job.metric``,
``job.dataset``, ``job.template``, ``job.whitening``, ``job.stats``), its seed (``job.key()``), output folder
and cache folder. :func:`cached_arrays` keeps a computation's arrays on disk across runs; the ``check_*``
helpers range-check a config's fields in ``__post_init__`` with the app's messages. The module that calls
``register_metric`` is loaded when it is named in ``JAXASSOC_PLUGINS`` or exposes a ``jaxassoc.metrics``
entry point (:mod:`jaxassoc.app.registry`).
"""

from jaxassoc.app.config import (
    DatasetConfig,
    MetricConfig,
    ModelConfig,
    StatsConfig,
    TemplateConfig,
    WhiteningConfig,
    check_choice,
    check_range,
    check_unique,
)
from jaxassoc.app.registry import register_metric
from jaxassoc.app.spec import (
    CORRELATIONS,
    EFFECT_PLOTS,
    EFFECT_SIZE,
    Effects,
    Job,
    JobResult,
    MetricSpec,
    Plot,
    PlotInput,
)
from jaxassoc.array_cache import cached_arrays
from jaxassoc.errors import ConfigError, DataError, InputError

__all__ = [
    "CORRELATIONS",
    "ConfigError",
    "DataError",
    "DatasetConfig",
    "EFFECT_PLOTS",
    "EFFECT_SIZE",
    "Effects",
    "InputError",
    "Job",
    "JobResult",
    "MetricConfig",
    "MetricSpec",
    "ModelConfig",
    "Plot",
    "PlotInput",
    "StatsConfig",
    "TemplateConfig",
    "WhiteningConfig",
    "cached_arrays",
    "check_choice",
    "check_range",
    "check_unique",
    "register_metric",
]
