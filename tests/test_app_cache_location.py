"""Where the cache lives and how big it grows: ``$JAXASSOC_CACHE``, else the user cache folder (never the
working folder); ``cache_max_gb`` evicts least recently used entries after a job; ``jaxassoc-cache`` lists
and clears it."""

import os
import sys
import time

import numpy as np
import pytest
from app_helpers import app_config

from jaxassoc.app import cache_command
from jaxassoc.app.cache import default_cache_dir, entries, evict
from jaxassoc.app.main import make_job, run_job
from jaxassoc.array_cache import ENTRY_SUFFIX, cached_arrays, entry_path
from jaxassoc.errors import ConfigError


@pytest.fixture
def no_platformdirs(monkeypatch):
    """The fallback without platformdirs (not a dependency of jaxassoc): XDG_CACHE_HOME, else ~/.cache."""
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # import platformdirs raises ImportError
    monkeypatch.delenv("JAXASSOC_CACHE", raising=False)


def test_cache_dir_comes_from_jaxassoc_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXASSOC_CACHE", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    with app_config() as compose:
        assert compose("model=glove-6b-50d", "metric=weat").cache_dir == str(tmp_path / "mine")


def test_cache_dir_falls_back_to_xdg_cache_home_then_home(tmp_path, monkeypatch, no_platformdirs):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "jaxassoc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "jaxassoc"


def test_explicit_cache_dir_wins_and_null_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXASSOC_CACHE", str(tmp_path / "env"))
    with app_config() as compose:
        assert (
            make_job(compose("model=glove-6b-50d", "metric=weat", f"cache_dir={tmp_path / 'own'}"), tmp_path).cache_dir
            == tmp_path / "own"
        )
        assert make_job(compose("model=glove-6b-50d", "metric=weat", "cache_dir=null"), tmp_path).cache_dir is None


def test_a_job_caches_in_the_user_cache_not_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXASSOC_CACHE", str(tmp_path / "user-cache"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    with app_config("cached_toy_metric") as compose:
        run_job(compose("metric=cached_toy", "model=glove-6b-50d"), tmp_path / "out")
    assert [e.namespace for e in entries(tmp_path / "user-cache")] == ["cached_toy"]
    assert not (tmp_path / "work" / ".cache").exists()


def seed_entries(cache_dir, sizes_and_ages, now):
    """Entries ``n<i>/<i repeated 64 times>.jaxassoc.npz`` of the given byte sizes, last used ``age`` seconds
    before ``now``."""
    paths = []
    for i, (size, age) in enumerate(sizes_and_ages):
        path = cache_dir / f"n{i}" / f"{str(i) * 64}{ENTRY_SUFFIX}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
        os.utime(path, (now - age, now - age))
        paths.append(path)
    return paths


def test_eviction_removes_the_least_recently_used_first_down_to_the_limit(tmp_path):
    now = time.time()
    old, older, oldest, recent = seed_entries(tmp_path, [(100, 300), (100, 400), (100, 500), (100, 10)], now)
    removed = evict(tmp_path, 250, keep_since=now - 60)
    assert [e.path for e in removed] == [oldest, older]
    assert sorted(e.path for e in entries(tmp_path)) == sorted([old, recent])


def test_eviction_never_removes_what_the_job_used(tmp_path):
    now = time.time()
    before, during = seed_entries(tmp_path, [(100, 500), (100, 5)], now)
    assert [e.path for e in evict(tmp_path, 1, keep_since=now - 60)] == [before]
    assert [e.path for e in entries(tmp_path)] == [during]  # over the limit, but used since the job started


def test_clearing_and_eviction_touch_only_jaxassoc_entries_never_a_users_npz_beside_them(tmp_path, capsys):
    now = time.time()
    (entry,) = seed_entries(tmp_path, [(240_000, 3600)], now)
    own = [
        tmp_path / "experiment1" / "embeddings.npz",
        tmp_path / "n0" / "mine.npz",
        tmp_path / "n0" / f"{'a' * 64}.npz",
    ]
    for path in own:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"user data")
        os.utime(path, (now - 7200, now - 7200))
    assert [e.path for e in entries(tmp_path)] == [entry]
    assert [e.path for e in evict(tmp_path, 1, keep_since=now)] == [entry]
    seed_entries(tmp_path, [(10, 60)], now)
    cache_command.main(["--cache-dir", str(tmp_path), "clear"])
    assert entries(tmp_path) == [] and all(p.read_bytes() == b"user data" for p in own)


def test_a_hit_makes_an_entry_recently_used(tmp_path):
    parts = {"a": 1}
    compute = lambda: {"x": np.arange(3)}  # noqa: E731
    cached_arrays(tmp_path, "demo", parts, compute)
    path = entry_path(tmp_path, "demo", parts, compute)
    os.utime(path, (1e9, 1e9))
    cached_arrays(tmp_path, "demo", parts, lambda: pytest.fail("a hit must not recompute"))
    assert path.stat().st_mtime > time.time() - 60


def test_job_with_cache_max_gb_evicts_old_entries_but_keeps_its_own(tmp_path):
    now = time.time()
    (stale,) = seed_entries(tmp_path / "cache", [(1000, 3600)], now)
    with app_config("cached_toy_metric") as compose:
        run_job(
            compose("metric=cached_toy", "model=glove-6b-50d", f"cache_dir={tmp_path / 'cache'}", "cache_max_gb=1e-9"),
            tmp_path / "out",
        )
    assert not stale.exists()
    assert [e.namespace for e in entries(tmp_path / "cache")] == ["cached_toy"]  # over 1 byte, but just written


@pytest.mark.parametrize(("value", "shown"), [("0", "0.0"), ("-1", "-1.0"), ("nan", "nan")])
def test_cache_max_gb_must_be_positive(tmp_path, value, shown):
    with app_config() as compose:
        with pytest.raises(ConfigError, match=rf"^cache_max_gb={shown} is out of range: it must be > 0; a size in GB"):
            make_job(compose("model=glove-6b-50d", "metric=weat", f"cache_max_gb={value}"), tmp_path)


def test_cache_command_lists_entries_with_namespace_size_age_and_total(tmp_path, capsys):
    now = time.time()
    seed_entries(tmp_path, [(1500, 7200), (20, 90)], now)
    cache_command.main(["--cache-dir", str(tmp_path), "list"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"cache: {tmp_path}"
    assert lines[1].split() == [
        "namespace",
        "key",
        "size",
        "last",
        "used",
        "model",
        "dataset",
        "metric",
        "intervention",
    ]
    assert lines[2].split() == ["n0", "0" * 12, "1.5", "kB", "2.0", "h", "ago", "-", "-", "-", "-"]  # no job's labels
    assert lines[3].split() == ["n1", "1" * 12, "20", "B", "2", "min", "ago", "-", "-", "-", "-"]
    assert lines[4] == "total: 2 entries, 1.5 kB"


def test_cache_command_uses_jaxassoc_cache_and_clears_by_age(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAXASSOC_CACHE", str(tmp_path))
    now = time.time()
    old, new = seed_entries(tmp_path, [(300, 10 * 86400), (200, 60)], now)
    cache_command.main(["clear", "--older-than", "7d"])
    assert capsys.readouterr().out.strip() == f"removed 1 entries (300 B) from {tmp_path}"
    assert not old.exists() and new.exists()
    cache_command.main(["clear"])
    assert capsys.readouterr().out.strip() == f"removed 1 entries (200 B) from {tmp_path}"
    assert entries(tmp_path) == []


def test_cache_command_refuses_a_bad_age(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cache_command.main(["--cache-dir", str(tmp_path), "clear", "--older-than", "a week"])
    assert "'a week' is not a duration; use e.g. 30m, 12h, 7d" in capsys.readouterr().err


def test_cache_command_refuses_a_missing_cache_folder_instead_of_listing_nothing(tmp_path, capsys):
    for command in ("list", "clear"):
        with pytest.raises(SystemExit) as exit_:
            cache_command.main(["--cache-dir", str(tmp_path / "typo"), command])
        assert exit_.value.code == 2 and f"--cache-dir {tmp_path / 'typo'}: no such folder" in capsys.readouterr().err


def test_cache_command_says_a_cache_dir_that_is_a_file_is_a_file(tmp_path, capsys):
    (tmp_path / "cache.txt").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_:
        cache_command.main(["--cache-dir", str(tmp_path / "cache.txt"), "list"])
    assert exit_.value.code == 2
    assert f"--cache-dir {tmp_path / 'cache.txt'}: is a file, not a folder" in capsys.readouterr().err


def test_entries_are_listed_and_cleared_by_the_model_dataset_metric_and_intervention_that_used_them(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("JAXASSOC_CACHE", str(tmp_path / "cache"))
    with app_config("cached_toy_metric") as compose:
        run_job(compose("metric=cached_toy", "model=glove-6b-50d"), tmp_path / "out")
    (labelled,) = entries(tmp_path / "cache")
    (other,) = seed_entries(tmp_path / "cache", [(10, 60)], time.time())  # an entry no job labelled
    cache_command.main(["list"])
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:4]]
    assert ["glove-6b-50d", "weat_caliskan2017", "cached_toy", "none"] in [row[-4:] for row in rows]
    cache_command.main(["list", "--metric", "cached_toy"])
    out = capsys.readouterr().out
    assert "cached_toy" in out and "total: 1 entries" in out  # the unlabelled one is left out
    cache_command.main(["clear", "--model", "gpt2"])
    assert capsys.readouterr().out.startswith("removed 0 entries")
    cache_command.main(["clear", "--model", "glove-6b-50d", "--intervention", "none"])
    assert capsys.readouterr().out.startswith("removed 1 entries")
    assert not labelled.path.exists() and not labelled.labels_path.exists() and other.exists()


def test_cache_command_refuses_an_empty_cache_dir(capsys):
    with pytest.raises(SystemExit) as exit_:
        cache_command.main(["--cache-dir", "", "list"])  # it listed the working folder
    assert exit_.value.code == 2 and "--cache-dir is empty: name the cache folder" in capsys.readouterr().err
