"""The model-output cache never costs a job its result: a damaged entry is a logged miss that is
recomputed, and a cache folder that cannot be written is skipped with a warning."""

import functools
import io
import logging
import threading
import time

import numpy as np
import pytest
from app_helpers import app_config

from jaxassoc.app.cache import usable_cache_dir
from jaxassoc.app.main import run_job
from jaxassoc.array_cache import cached_arrays, entry_path

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
    return entry_path(cache_dir, "demo", PARTS, counting_compute([]))


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _arrays(path):
    with np.load(path) as stored:
        return {name: stored[name] for name in stored.files}


def _restamp(path, rows):
    """Write, under ``path``'s name, the entry another key stored for fewer rows (stamps and all)."""
    other = entry_path(path.parent.parent, "demo", {**PARTS, "sentences": ["a b"]}, counting_compute([]))
    cached_arrays(
        path.parent.parent,
        "demo",
        {**PARTS, "sentences": ["a b"]},
        lambda: {"x": np.arange(12, dtype=np.float32).reshape(3, 4)[rows], "words": np.array(["a", "bb"])[rows]},
    )
    path.write_bytes(other.read_bytes())


def _edit_array(path):
    arrays = _arrays(path)
    arrays["x"] = arrays["x"] + 1
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),  # a writer killed mid-entry
        lambda path: path.write_bytes(b"not an npz file at all"),
        lambda path: path.write_bytes(b""),
        lambda path: np.savez(open(path, "wb"), y=np.zeros(3)),  # a foreign archive: another array name
        lambda path: path.write_bytes(_npy(np.zeros((3, 4), np.float32))),  # a bare .npy under the name
        lambda path: _restamp(path, rows=slice(0, 2)),  # another key's entry copied here: other rows
        lambda path: _edit_array(path),  # one value changed after it was written
    ],
    ids=["truncated", "garbage", "empty", "foreign_names", "bare_npy", "other_key", "edited"],
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
    import jaxassoc.array_cache as array_cache

    calls = []
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 1  # same code: a hit
    monkeypatch.setattr(array_cache, "jaxassoc_code", lambda: {"version": "99.0", "source_sha256": "0" * 16})
    cached_arrays(tmp_path, "demo", PARTS, counting_compute(calls))
    assert len(calls) == 2  # an upgrade (or an edit of the source) misses


def test_two_computations_of_one_entry_at_once_compute_it_once(tmp_path, log):
    calls, results = [], []
    started, release = threading.Event(), threading.Event()

    def slow():  # holds the claim until the other computation has said it waits (no sleeps: any load)
        calls.append(1)
        started.set()
        assert release.wait(timeout=60)
        return {"x": np.arange(4)}

    workers = [
        threading.Thread(target=lambda: results.append(cached_arrays(tmp_path, "demo", PARTS, slow))) for _ in range(2)
    ]
    workers[0].start()
    assert started.wait(timeout=60)  # the first holds the claim when the second asks
    workers[1].start()
    deadline = time.monotonic() + 60
    while "is computing demo" not in log.text and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for worker in workers:
        worker.join()
    assert len(calls) == 1 and len(results) == 2
    np.testing.assert_array_equal(results[0]["x"], results[1]["x"])
    assert "is computing demo" in log.text and "waiting to read its result" in log.text
    assert list((tmp_path / "demo").glob("*.lock")) == []  # the writer removed its claim


def test_a_claim_given_up_without_an_entry_is_computed_by_the_waiter(tmp_path, log):
    import fcntl

    compute = counting_compute(calls := [])
    lock = entry(tmp_path).with_name(entry(tmp_path).name.replace(".npz", ".lock"))
    lock.parent.mkdir(parents=True)
    holder = open(lock, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)  # a process computing the entry (then killed: the OS frees its lock)
    waiter = threading.Thread(target=cached_arrays, args=(tmp_path, "demo", PARTS, compute))
    waiter.start()
    time.sleep(0.5)
    assert calls == [] and waiter.is_alive()
    holder.close()
    waiter.join(timeout=30)
    assert calls == [1] and entry(tmp_path).is_file()
    assert "is free after" in log.text


def test_only_locks_no_process_holds_are_removed(tmp_path):
    import fcntl

    from jaxassoc.app.cache import remove_stale_temporaries

    folder = tmp_path / "demo"
    folder.mkdir()
    held, left = folder / f"{'a' * 64}.jaxassoc.lock", folder / f"{'b' * 64}.jaxassoc.lock"
    handle = open(held, "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
    left.write_text("pid 1 on gone\n")
    remove_stale_temporaries(tmp_path)
    assert held.exists() and not left.exists()
    handle.close()


def test_an_edit_of_a_plugins_compute_misses_its_entries(tmp_path, monkeypatch):
    import importlib
    import sys

    (tmp_path / "my_plugin_compute.py").write_text(
        "import numpy as np\n\ndef compute():\n    return {'x': np.arange(3)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("my_plugin_compute")
    monkeypatch.setitem(sys.modules, "my_plugin_compute", module)
    first = entry_path(tmp_path / "cache", "demo", PARTS, module.compute)
    cached_arrays(tmp_path / "cache", "demo", PARTS, module.compute)
    assert first.is_file()
    (tmp_path / "my_plugin_compute.py").write_text(
        "import numpy as np\n\ndef compute():\n    return {'x': -np.arange(3)}\n"
    )
    assert entry_path(tmp_path / "cache", "demo", PARTS, module.compute) != first  # the module's hash is keyed
    wrapped = functools.partial(module.compute)  # a partial of the plugin's function keys the plugin's code too
    assert entry_path(tmp_path / "cache", "demo", PARTS, wrapped) == entry_path(
        tmp_path / "cache", "demo", PARTS, module.compute
    )


def test_a_folder_under_an_entrys_name_is_a_miss_and_never_removed(tmp_path, log):
    from jaxassoc.app.cache import clear, entries

    compute = counting_compute(calls := [])
    entry(tmp_path).mkdir(parents=True)
    (entry(tmp_path) / "mine.txt").write_text("a user's file")
    arrays = cached_arrays(tmp_path, "demo", PARTS, compute)
    assert calls == [1] and arrays["x"].shape == (3, 4)
    assert "cannot write" in log.text
    assert entries(tmp_path) == [] and clear(tmp_path) == []
    assert (entry(tmp_path) / "mine.txt").read_text() == "a user's file"


CLAIMING_SCRIPT = """
import sys, time
from pathlib import Path
import numpy as np
from jaxassoc.array_cache import cached_arrays

def compute():
    with open(sys.argv[2], "a") as f:
        f.write("computed\\n")
    time.sleep(4)
    return {"x": np.arange(3)}

print(cached_arrays(Path(sys.argv[1]), "demo", {"a": 1}, compute)["x"].sum())
"""


@pytest.mark.slow  # two processes: ~8 s (issue 38: the default suite's budget)
@pytest.mark.process
def test_two_processes_on_one_entry_extract_it_once(tmp_path):
    import subprocess
    import sys

    script, counter = tmp_path / "claim.py", tmp_path / "computed.txt"
    script.write_text(CLAIMING_SCRIPT)
    command = [sys.executable, str(script), str(tmp_path / "cache"), str(counter)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert [out.strip() for out, _ in outputs] == ["3", "3"]
    assert counter.read_text() == "computed\n"  # one extraction; the other process read its entry


def test_a_bfloat16_array_is_read_back_as_written(tmp_path, log):
    """``model.precision=bfloat16`` results (ml_dtypes' bfloat16, which ``np.load`` cannot read back) are stored
    as their bits and viewed back: a hit with the same values and dtype, never a checksum miss."""
    import ml_dtypes

    calls = []
    values = np.array([1.5, -2.25, 3.0e-3, 65504.0], dtype=ml_dtypes.bfloat16)

    def compute():
        calls.append(1)
        return {"x": values}

    first = cached_arrays(tmp_path, "bf16", PARTS, compute)
    again = cached_arrays(tmp_path, "bf16", PARTS, compute)
    assert len(calls) == 1 and "ignoring" not in log.text
    assert again["x"].dtype == ml_dtypes.bfloat16 and first["x"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(again["x"].astype(np.float32), values.astype(np.float32))
