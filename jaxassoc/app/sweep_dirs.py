"""Safe, short names for a sweep's job folders.

Hydra names each job's folder by its overrides (``hydra.job.override_dirname``, e.g. ``model=gpt2,seed=1``).
A path-valued override (``model.source=/data/m``) would turn that name into nested folders, and many
overrides into a name longer than a file system allows. :func:`safe_dirname` maps it to one folder name,
the same for the same overrides, so that rerunning a sweep lands in the same folders and resumes there.
``conf/config.yaml`` applies it as ``hydra.sweep.subdir: ${jaxassoc.safe_dirname:${hydra.job.override_dirname}}``.
"""

from __future__ import annotations

import hashlib
import re

from omegaconf import OmegaConf

RESOLVER = "jaxassoc.safe_dirname"
MAX_LENGTH = 128  # characters of a job folder's name (file systems allow 255 bytes)
_UNSAFE = re.compile(r"[^A-Za-z0-9._,=+@\[\]-]+")  # path separators, spaces, quotes, $, :, *, ?, ~, ...
_DIGEST = 8  # hex digits of the sha256 suffix


def safe_dirname(name: str, max_length: int = MAX_LENGTH) -> str:
    """``name`` itself when it is a plain folder name of at most ``max_length`` characters; otherwise each run
    of other characters (``/``, spaces, quotes, ...) replaced by ``_``, cut to fit, and followed by ``-`` and
    the first 8 hex digits of the sha256 of ``name``, so that different names stay apart."""
    safe = _UNSAFE.sub("_", name)
    if safe == name and len(name) <= max_length:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST]
    return f"{safe[: max_length - _DIGEST - 1]}-{digest}"


def register_resolver() -> None:
    """Make ``${jaxassoc.safe_dirname:...}`` available to OmegaConf (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, safe_dirname)
