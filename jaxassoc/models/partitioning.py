"""Deprecated alias of :mod:`jaxassoc.models.mesh` (the mesh, its rules and the placement of weights), kept
for one release: import from ``jaxassoc.models.mesh``."""

from jaxassoc.models.mesh import *  # noqa: F403
from jaxassoc.models.mesh import __all__  # noqa: F401
