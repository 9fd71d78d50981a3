"""``compile_cache``: a job keeps XLA's compiled functions in <cache folder>/xla; a later run (its in-memory
caches cleared, as in a new process) loads every one of them instead of compiling, with bit-identical
results; off, nothing is kept or loaded."""

from pathlib import Path

import jax
import jax.monitoring
import pandas as pd
import pytest
from app_helpers import compose_config, start_hydra, use_tiny_suite, write_tiny_glove

from jaxassoc.app.cache import use_compile_cache
from jaxassoc.app.main import run_job

USES, HITS = "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_hits"


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.fixture(autouse=True)
def app_compile_cache(monkeypatch):
    """The app picks its folder only where the user set none: the suite's own (``tests/conftest.py``) is set
    aside during the test and put back after it."""
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    before = jax.config.jax_compilation_cache_dir
    yield
    use_compile_cache(Path(before) if before else None)


@pytest.fixture(scope="module")
def glove(tmp_path_factory):
    return write_tiny_glove(tmp_path_factory.mktemp("glove") / "tiny.txt")


@pytest.fixture
def events():
    """Counts of JAX's compilation-cache events while the test runs."""
    counts = {USES: 0, HITS: 0}

    def listen(event, **_):
        if event in counts:
            counts[event] += 1

    jax.monitoring.register_event_listener(listen)
    yield counts
    jax.monitoring.unregister_event_listener(listen)


def _run(glove, out, events, *extra):
    overrides = [
        "metric=weat",
        "model=glove-6b-50d",
        f"model.source={glove}",
        "model.name=tiny",
        "stats.exact_bound=0",
        "stats.n_permutations=300",
        "stats.n_bootstrap=100",
        *extra,
    ]
    jax.clear_caches()  # as in a new process: nothing compiled in memory
    events.update({USES: 0, HITS: 0})
    return run_job(compose_config(overrides), out).aggregates, dict(events)


@pytest.mark.slow  # two processes: ~9 s (issue 38: the default suite's budget)
def test_compiled_functions_are_kept_and_reused_with_identical_results(glove, tmp_path, monkeypatch, events):
    use_tiny_suite(monkeypatch)
    cache = tmp_path / "cache"
    first, counted = _run(glove, tmp_path / "a", events, f"cache_dir={cache}")
    assert counted[USES] > 0 and counted[HITS] == 0 and any((cache / "xla").iterdir())
    second, counted = _run(glove, tmp_path / "b", events, f"cache_dir={cache}")
    assert counted[HITS] == counted[USES] > 0  # every compilation loaded from the folder
    off, counted = _run(glove, tmp_path / "c", events, f"cache_dir={tmp_path / 'other'}", "compile_cache=false")
    assert counted[HITS] == 0 and not (tmp_path / "other" / "xla").exists()
    pd.testing.assert_frame_equal(first, second)
    pd.testing.assert_frame_equal(first, off)


def test_the_compile_cache_is_trimmed_oldest_first_when_a_job_starts_without_jaxs_per_write_limit(tmp_path):
    import os

    folder = tmp_path / "xla"
    folder.mkdir()
    for age, name in ((300, "old-cache"), (200, "older-but-not-oldest-cache"), (100, "new-cache")):
        (folder / name).write_bytes(b"x" * 100)
        os.utime(folder / name, (1e9 - age, 1e9 - age))
    (folder / "new-cache-atime").unlink(missing_ok=True)  # an entry without its access-time file is harmless
    use_compile_cache(folder, max_bytes=150)
    assert sorted(p.name for p in folder.iterdir()) == ["new-cache"]
    assert jax.config.jax_compilation_cache_max_size == -1  # no scan of the whole folder on every write
