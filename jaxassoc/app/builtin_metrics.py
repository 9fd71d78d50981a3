"""The built-in metrics: their config dataclasses and the adapters from a Job to a pipeline.

Pipelines are imported when a job runs, not when the app starts, so ``jaxassoc --help`` and config
errors stay fast.
"""

from __future__ import annotations

from jaxassoc.app.registry import register_metric


def register_all() -> None:
    """Register every built-in metric (called once at start-up)."""
