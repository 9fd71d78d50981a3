"""A faulty plugin: it registers a metric under the name of the built-in ``weat``."""

from jaxassoc.plugin import register_metric


def run_shadow(job):
    raise AssertionError("a plugin must not replace the built-in weat")


register_metric("weat", run=run_shadow, model_kinds=("static",))
