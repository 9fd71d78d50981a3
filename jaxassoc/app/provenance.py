"""Provenance shared by every result row: package versions, device kind, a hash of the job's config; and
the cheap file fingerprints that resume compares."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax

from jaxassoc.code_identity import git_state, jaxassoc_code, module_code

PACKAGES = ("jaxassoc", "jax", "jaxlib", "flax", "optax", "transformers", "tokenizers", "numpy")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


NUMERIC_PACKAGES = ("jax", "jaxlib", "numpy")
"""The packages whose versions change a result's numbers: resume recomputes a result written under others."""


def numeric_versions() -> dict[str, str]:
    """The versions of :data:`NUMERIC_PACKAGES` (a part of the resume key, :func:`jaxassoc.app.main.job_inputs`)."""
    versions = package_versions()
    return {name: versions[name] for name in NUMERIC_PACKAGES}


def device_kind() -> str:
    devices = jax.devices()
    return f"{len(devices)}x {devices[0].device_kind} ({devices[0].platform})"


def code_identity(metric_module: str) -> dict[str, Any]:
    """What resume compares of the code (:mod:`jaxassoc.code_identity`): jaxassoc's version and source hash
    and, for a plugin metric (``metric_module`` outside jaxassoc), its module's name, file hash and version."""
    plugin = None if metric_module.split(".")[0] == "jaxassoc" else module_code(metric_module)
    return {"jaxassoc": jaxassoc_code(), "plugin": plugin}


def code_provenance(identity: dict[str, Any]) -> dict[str, Any]:
    """The code identity as flat provenance fields, with the git commit and dirty flag of a checkout."""
    plugin = identity["plugin"] or {}
    return {
        "jaxassoc_source_sha256": identity["jaxassoc"]["source_sha256"],
        "jaxassoc_commit": git_state()["commit"],
        "jaxassoc_dirty": git_state()["dirty"],
        "plugin_module": plugin.get("module"),
        "plugin_source_sha256": plugin.get("source_sha256"),
        "plugin_version": plugin.get("version"),
    }


def config_hash(config: dict[str, Any]) -> str:
    """A short, stable hash of a resolved config (keys sorted)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_sha256(*paths: Path, chunk: int = 1 << 20) -> str:
    """sha256 over the bytes of one or more files, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                digest.update(block)
    return digest.hexdigest()


def files_fingerprint(paths: Iterable[Path]) -> dict[str, list[int] | None]:
    """``{path: [size, mtime_ns, ctime_ns]}`` from ``stat`` alone, without reading a byte: it changes when
    a file is rewritten, replaced or copied over (even with its old time kept, as ``cp -p`` does). None
    marks a missing file."""
    fingerprint = {}
    for path in paths:
        try:
            info = Path(path).stat()
        except FileNotFoundError:
            fingerprint[str(path)] = None
            continue
        fingerprint[str(path)] = [info.st_size, info.st_mtime_ns, info.st_ctime_ns]
    return fingerprint
