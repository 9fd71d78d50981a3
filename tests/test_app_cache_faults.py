"""The model-output cache never costs a job its result: a damaged entry is a logged miss that is
recomputed, and a cache folder that cannot be written is skipped with a warning."""

import logging

import numpy as np
import pytest
from app_helpers import app_config

from jaxassoc.app.cache import cached_arrays, entry_path, usable_cache_dir
from jaxassoc.app.main import run_job

PARTS = {"weights": "abc", "sentences": ["a b", "c"]}


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    return caplog


def counting_compute(calls):
    def compute():
        calls.append(1)
        return {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "words": np.array(["a", "bb"])}

    return compute


def entry(cache_dir):
    return entry_path(cache_dir, "demo", PARTS)


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),  # a writer killed mid-entry
        lambda path: path.write_bytes(b"not an npz file at all"),
        lambda path: path.write_bytes(b""),
    ],
    ids=["truncated", "garbage", "empty"],
)
def test_damaged_entry_is_a_logged_miss_and_is_rewritten(tmp_path, log, damage):
    calls = []
    first = cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    damage(entry(tmp_path))
    again = cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 2
    assert f"ignoring the unreadable entry {entry(tmp_path)}" in log.text
    for name in first:
        np.testing.assert_array_equal(again[name], first[name])
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 2  # the recomputed entry replaced the damaged one: a hit


def test_unwritable_cache_still_returns_the_arrays(tmp_path, log):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    calls = []
    arrays = cached_arrays(blocker / "cache", "demo", PARTS, counting_compute(calls))  # a folder below a file
    assert len(calls) == 1 and arrays["x"].shape == (3, 4)
    assert "cannot write" in log.text and "not cached" in log.text


def test_unwritable_cache_dir_is_turned_off_with_a_warning(tmp_path, log):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert usable_cache_dir(blocker / "cache") is None
    assert f"cache_dir={blocker / 'cache'} is not writable" in log.text
    assert usable_cache_dir(tmp_path / "new" / "cache") == tmp_path / "new" / "cache"  # made when missing
    assert [p.name for p in (tmp_path / "new" / "cache").iterdir()] == []  # no probe left behind


def test_job_with_unwritable_cache_dir_runs_without_the_cache(tmp_path, log):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with app_config("cached_toy_metric") as compose:
        cfg = compose("metric=cached_toy", "model=glove-6b-50d", f"cache_dir={blocker / 'cache'}")
    result = run_job(cfg, tmp_path / "job")
    assert result is not None and len(result.items) == 5
    assert "is not writable" in log.text and "running without the cache" in log.text
    assert (tmp_path / "job" / "results.json").is_file()


def test_an_entry_written_by_other_jaxassoc_code_is_a_miss(tmp_path, monkeypatch):
    import jaxassoc.readouts.cache as readout_cache

    calls = []
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 1  # same code: a hit
    monkeypatch.setattr(readout_cache, "jaxassoc_code", lambda: {"version": "99.0", "source_sha256": "0" * 16})
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 2  # an upgrade (or an edit of the source) misses
