"""jaxassoc: differentiable, jit-compiled association and social-bias metrics for language models.

Layers (imports flow downwards only)::

    jaxassoc.app                      Hydra entry point, pipelines, result store, reports
    jaxassoc.metrics  jaxassoc.models  jaxassoc.embeddings
    jaxassoc.stats    jaxassoc.data    jaxassoc.resources

``metrics`` never imports ``models`` and ``models`` never imports ``metrics``: the app composes them.
"""

__version__ = "0.1.0"
