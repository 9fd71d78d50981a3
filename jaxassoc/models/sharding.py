"""Deprecated alias of :mod:`jaxassoc.models.multihost` (process rows, feeding and gathering batches), kept
for one release: import from ``jaxassoc.models.multihost``."""

from jaxassoc.models.multihost import *  # noqa: F403
from jaxassoc.models.multihost import __all__  # noqa: F401
