"""The WEAT tests a job's dataset config names: a packaged suite (``dataset=weat_caliskan2017``, ...) or
the user's own (``dataset=custom_weat``: a file or four command-line word lists,
:mod:`jaxassoc.data.custom_weat`), with the version string its results record."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import numpy as np

from jaxassoc import data
from jaxassoc.data.custom_weat import load_weat_file, weat_suite_from_sets
from jaxassoc.data.weat import WeatSuite
from jaxassoc.errors import ConfigError

log = logging.getLogger(__name__)

CUSTOM_WEAT = "custom_weat"
WEAT_DATASETS: tuple[str, ...] = (*data.SUITE_NAMES, CUSTOM_WEAT)


def weat_suite(dataset: Any) -> WeatSuite:
    """The suite of a dataset config (a :class:`~jaxassoc.app.config.DatasetConfig`), checked before any
    model is loaded."""
    if dataset.name != CUSTOM_WEAT:
        return data.load_weat_suite(dataset.name)
    if dataset.path is not None:
        return load_weat_file(dataset.path)
    sets = {s: getattr(dataset, s) for s in ("X", "Y", "A", "B")}
    return weat_suite_from_sets(sets, test_id=dataset.test, source="the command line (dataset.X, Y, A, B)")


def suite_for(metric: str, dataset: Any) -> WeatSuite:
    """The WEAT suite a metric that scores one runs on; ConfigError naming the metric for another dataset."""
    if dataset.name not in WEAT_DATASETS:
        raise ConfigError(f"metric={metric} runs on a WEAT suite: use dataset= one of {list(WEAT_DATASETS)}")
    return weat_suite(dataset)


def dataset_version(dataset: Any, suite: WeatSuite) -> str:
    """The packaged dataset's content hash, or for ``custom_weat`` a short SHA-256 of its tests' words."""
    if dataset.name != CUSTOM_WEAT:
        return data.dataset_info(dataset.name).version
    tests = [[t.id, t.targets_x, t.targets_y, t.attributes_a, t.attributes_b] for t in suite.tests]
    return hashlib.sha256(json.dumps(tests).encode()).hexdigest()[:12]


def file_version(path: str) -> str:
    """A short SHA-256 of a user's data file (``dataset.path``): the ``dataset_version`` its results record."""
    from pathlib import Path

    return hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest()[:12]


def seeded_sample(n_items: int, sample: int | None, seed: int, what: str) -> tuple[np.ndarray | None, str]:
    """The rows of a seeded ``dataset.sample`` of ``n_items`` ``what`` (e.g. ``"pairs"``): sorted positions
    drawn without replacement from ``seed``, or None for all of them; and the note that the results record
    (provenance ``dataset_rows``). A sample of ``n_items`` or more scores every item: a logged warning, and
    the note says all were scored, never that a sample was."""
    if sample is None:
        return None, f"all {n_items} {what}"
    if sample >= n_items:
        log.warning(
            "dataset.sample=%d is not fewer than the %d %s there are: all %d are scored, not a sample",
            sample,
            n_items,
            what,
            n_items,
        )
        return None, f"all {n_items} {what} (dataset.sample={sample} asked for as many or more)"
    rows = np.sort(np.random.default_rng(seed).choice(n_items, size=sample, replace=False))
    return rows, f"seeded sample of {sample} of {n_items} {what} (seed {seed})"
