"""Every file the app writes is atomic, gets the user's umask, and a killed writer's temporary is removed
by the next job; results.json is strict JSON."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from app_helpers import app_config

from jaxassoc import io
from jaxassoc.app import store
from jaxassoc.app.main import run_job
from jaxassoc.app.tasks import weat as weat_task
from jaxassoc.embeddings import whitening
from jaxassoc.embeddings.whitening import ZcaStats, load_zca, save_zca

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def dead_pid() -> int:
    """The id of a process that does not exist (none runs under it), found without starting one."""
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 2**22
    for pid in range(pid_max - 1, 1, -1):
        if not io.pid_alive(pid):
            return pid
    raise AssertionError("every process id is in use")


def temporary(folder, name, pid, host=None):
    path = folder / f".{name}~{host or io.host_name()}~{pid}~0123abcd.tmp"
    path.write_bytes(b"x" * 1000)
    return path


def killed_writer(target) -> None:
    """Run atomic_write in a child process that is SIGKILLed half-way through writing ``target``."""
    code = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from jaxassoc.io import atomic_write
        def write(tmp):
            tmp.write_bytes(b"half of a big file")
            os.kill(os.getpid(), signal.SIGKILL)
        atomic_write(Path({str(target)!r}), write)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


@pytest.mark.process  # a writer process killed half-way
def test_killed_writer_leaves_a_temporary_that_the_next_cleanup_removes(tmp_path):
    killed_writer(tmp_path / "items.parquet")
    left = list(tmp_path.iterdir())
    assert len(left) == 1 and left[0].name.startswith(".items.parquet~") and left[0].suffix == ".tmp"
    live = temporary(tmp_path, "aggregates.csv", os.getpid())  # a writer still at work
    elsewhere = temporary(tmp_path, "items.csv", dead_pid(), host="another-host")  # shared file system
    assert io.remove_stale_temporaries(tmp_path) == left
    assert sorted(tmp_path.iterdir()) == sorted([live, elsewhere])


def test_job_start_removes_dead_writers_temporaries_in_output_and_cache(tmp_path):
    out, cache_dir = tmp_path / "job", tmp_path / "cache"
    (cache_dir / "rpam_inputs").mkdir(parents=True)
    out.mkdir()
    stale = [temporary(out, "items.parquet", dead_pid()), temporary(cache_dir / "rpam_inputs", "ab.npz", dead_pid())]
    live = temporary(cache_dir / "rpam_inputs", "cd.npz", os.getpid())
    with app_config("toy_metric") as compose:
        cfg = compose("metric=toy", "model=glove-6b-50d", f"cache_dir={cache_dir}")
    run_job(cfg, out)
    assert not any(p.exists() for p in stale)
    assert live.exists()


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_written_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        table = pd.DataFrame({"test": ["W1"], "d": [0.5]})
        store.write_results(tmp_path, table, table, {"seed": 0}, {})
    finally:
        os.umask(old)
    for name in ("items.parquet", "aggregates.csv", "results.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_results_json_writes_undefined_numbers_as_null(tmp_path):
    aggregates = pd.DataFrame(
        {
            "test": ["W1", "W2", "W3", "W4"],
            "d": [np.nan, np.inf, -np.inf, 0.25],
            "p": np.array([np.nan, 0.1, 0.2, 0.3], dtype=np.float32),
        }
    )
    store.write_results(
        tmp_path, aggregates, aggregates, {"seed": 0, "s": np.float32("nan")}, {"seconds": float("inf")}
    )

    def refuse(constant):
        raise AssertionError(f"results.json holds {constant}, which is not JSON")

    record = json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
    assert [row["d"] for row in record["aggregates"]] == [None, None, None, 0.25]
    # 0.1 written as float32 and read back from JSON: 1.5e-9 off, inside approx's default rel 1e-6
    assert record["aggregates"][0]["p"] is None and record["aggregates"][1]["p"] == pytest.approx(0.1)
    assert record["provenance"]["s"] is None and record["summary"]["seconds"] is None


def test_save_zca_is_atomic(tmp_path, monkeypatch):
    stats = ZcaStats(np.zeros(3, np.float32), np.eye(3, dtype=np.float32), np.ones(3, np.float32))
    path = save_zca(stats, tmp_path / "zca.npz", metadata={"eps": 0.001})
    before = path.read_bytes()

    def dies_half_way(file, **arrays):
        file.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(whitening.np, "savez", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_zca(stats, path, metadata={"eps": 0.002})
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["zca.npz"]
    monkeypatch.undo()
    assert load_zca(path)[1] == {"eps": 0.001}


def test_pipeline_figures_are_atomic(tmp_path, monkeypatch):
    path = tmp_path / "weat_heatmap.png"
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    weat_task._save(fig, path)
    before = path.read_bytes()
    assert before.startswith(b"\x89PNG")
    fig, ax = plt.subplots()

    def dies_half_way(target, **options):
        with open(target, "wb") as f:
            f.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fig, "savefig", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        weat_task._save(fig, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [path.name]
