"""Real multi-process sweeps through Hydra's launchers that run here: joblib (``local_parallel``) and
submitit's local executor. Each job runs in a worker process that never ran the app's ``main``, so the
metrics, plugins and configs must register themselves there; and the workers of a sweep killed with
SIGKILL must not go on running and writing. (A sweep takes about 40 s here: each worker imports JAX and
compiles the WEAT kernels.)"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jaxassoc import data

pytestmark = pytest.mark.process  # the launchers start worker processes; a sweep process is killed

PLUGINS = Path(__file__).parent / "plugins"
LAUNCHERS = [  # both slow (issue 38: the default suite's budget): ~25 s each
    pytest.param("hydra/launcher=local_parallel", marks=pytest.mark.slow),
    pytest.param("hydra/launcher=submitit_local", marks=pytest.mark.slow),
]


def env(plugins: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "JAXASSOC_PLUGINS": plugins, "HYDRA_FULL_ERROR": "0"}


def sweep(cwd: Path, *overrides: str) -> dict[str, dict]:
    """Run ``jaxassoc -m ...`` into ``cwd/sweep``; its two jobs' results.json records by model source."""
    proc = subprocess.run(
        [sys.executable, "-m", "jaxassoc", "-m", *overrides, "hydra.sweep.dir=sweep"],
        cwd=cwd,
        env=env(""),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (cwd / "sweep").rglob("results.json")]
    assert len(records) == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(list((cwd / "sweep").glob("*/results.json"))) == 2  # path-valued overrides: flat job folders
    return {r["provenance"]["model_source"]: r for r in records}


def weat_d(vectors: dict[str, np.ndarray], test) -> float:
    """The WEAT effect size (Caliskan et al. 2017) in float64 NumPy: the reference for the app's d."""

    def unit(words):
        m = np.stack([vectors[w.lower()] for w in words]).astype(np.float64)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    x, y, a, b = map(unit, (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b))
    sx, sy = ((w @ a.T).mean(1) - (w @ b.T).mean(1) for w in (x, y))
    return (sx.mean() - sy.mean()) / np.concatenate([sx, sy]).std(ddof=1)


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_builtin_metric_sweep_gives_the_right_effect_sizes(tmp_path, launcher):
    suite = data.load_weat_suite("weat_caliskan2017")
    words = sorted(
        {w.lower() for t in suite.tests for s in (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b) for w in s}
    )
    sources = {}
    for seed in (0, 1):  # two small GloVe-format files with random 8-d vectors for every word of the suite
        path = tmp_path / f"vectors{seed}.txt"
        rows = np.random.default_rng(seed).normal(size=(len(words), 8))
        path.write_text("".join(f"{w} {' '.join(f'{v:.6f}' for v in row)}\n" for w, row in zip(words, rows)))
        sources[str(path)] = dict(zip(words, np.loadtxt(path, usecols=range(1, 9), comments=None)))
    records = sweep(
        tmp_path,
        launcher,
        "metric=weat",
        "model=glove-6b-50d",
        "model.name=tiny",
        f"model.source={','.join(sources)}",
        "stats.n_permutations=1000",
        "stats.n_bootstrap=100",
    )
    assert sorted(records) == sorted(sources)
    for source, record in records.items():
        d = {row["test"]: row["d_raw"] for row in record["aggregates"]}
        assert list(d) == list(suite.ids)
        np.testing.assert_allclose(
            [d[t.id] for t in suite.tests], [weat_d(sources[source], t) for t in suite.tests], rtol=1e-4, atol=1e-6
        )


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X")


def wait_for(condition, seconds: float) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (a bound, not a timing measurement)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.slow  # a launcher's workers in other processes: ~9 s (issue 38: the default suite's budget)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from Linux /proc")
def test_workers_exit_when_the_sweep_process_is_killed(tmp_path):
    log = (tmp_path / "sweep.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxassoc",
            "-m",
            "hydra/launcher=local_parallel",
            "metric=sleepy",
            "model=glove-6b-50d",
            "metric.seconds=300",
            "seed=1,2",
            "hydra.sweep.dir=sweep",
        ],
        cwd=tmp_path,
        env=env("sleepy_metric"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    workers: list[int] = []
    try:
        pid_files = lambda: sorted((tmp_path / "sweep").rglob("worker.pid"))  # noqa: E731
        assert wait_for(lambda: len(pid_files()) == 2, 300), (tmp_path / "sweep.log").read_text()[-3000:]
        workers = [int(p.read_text()) for p in pid_files()]
        assert proc.pid not in workers and all(map(running, workers))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert wait_for(lambda: not any(map(running, workers)), 30), (tmp_path / "sweep.log").read_text()[-3000:]
    finally:
        proc.kill()
        for pid in filter(running, workers):
            os.kill(pid, signal.SIGKILL)
        log.close()
