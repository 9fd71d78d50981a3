"""``jaxassoc distributed=true`` with two processes on localhost (2 simulated CPU devices each, gloo
collectives): both compute, only process 0 writes, and its results equal a one-process run's."""

import os
import socket
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # three CLI runs, two of them at once: ~60 s on 2 cores
@pytest.mark.process  # jax.distributed: two processes, and a one-process (one-device) run as the reference
def test_two_process_cli_run_writes_once_and_matches_one_process(tmp_path, tiny_checkpoint):
    folder = tiny_checkpoint("gpt2")
    common = [
        sys.executable,
        "-m",
        "jaxassoc",
        "metric=rpam",
        "dataset=wordsim353",
        "dataset.sample=6",
        "template=tp1",
        "model.name=tiny",
        f"model.source={folder}",
        "model.shard=true",
        "model.batch_size=4",
        "cache_dir=null",
    ]
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
        HYDRA_FULL_ERROR="0",
        JAX_COORDINATOR_ADDRESS=f"localhost:{_free_port()}",
        JAX_NUM_PROCESSES="2",
    )
    procs = [
        subprocess.Popen(
            [*common, "distributed=true", "hydra.run.dir=multi"],
            cwd=tmp_path,
            env={**env, "JAX_PROCESS_ID": str(pid)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in (0, 1)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=400)
            outputs.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for pid, (returncode, out, err) in enumerate(outputs):
        assert returncode == 0, err[-3000:]
        assert f"distributed: process {pid} of 2, 4 global devices (2 local)" in out + err
    assert "results:" in outputs[0][1] and "results:" not in outputs[1][1]  # only process 0 reports
    single = subprocess.run(
        [*common, "hydra.run.dir=single"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HYDRA_FULL_ERROR": "0"},
    )
    assert single.returncode == 0, single.stderr[-3000:]
    multi, one = (pd.read_parquet(tmp_path / d / "items.parquet") for d in ("multi", "single"))
    np.testing.assert_allclose(multi["score"], one["score"], rtol=1e-5, atol=1e-9)
