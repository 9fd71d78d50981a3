"""Data-parallel feeding across processes (jaxassoc.models.multihost): which rows each process feeds (a pure
function, checked against an itertools enumeration), the single-host path on the 8 simulated CPU devices (in
process), and a real two-process run (jax.distributed on localhost, gloo CPU collectives) whose every process
gets all rows back, equal to an unsharded run."""

import itertools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from jaxassoc.errors import ConfigError
from jaxassoc.models.multihost import process_rows


@pytest.mark.parametrize("n_processes,devices_each,per_device", [(1, 8, 2), (2, 4, 1), (4, 2, 3), (3, 1, 5)])
def test_process_rows_tile_the_global_batch(n_processes, devices_each, per_device):
    owners = [p for p in range(n_processes) for _ in range(devices_each)]
    batch = len(owners) * per_device
    slices = [process_rows(owners, batch, p) for p in range(n_processes)]
    # reference: row r sits on device r // per_device, owned by owners[that device]
    for p, rows in enumerate(slices):
        expected = [r for r in range(batch) if owners[r // per_device] == p]
        assert list(range(batch))[rows] == expected
    assert sorted(itertools.chain.from_iterable(range(batch)[s] for s in slices)) == list(range(batch))


def test_process_rows_refuses_what_cannot_be_one_slice():
    with pytest.raises(ConfigError, match="does not split evenly over 4 devices"):
        process_rows([0, 0, 1, 1], 6, 0)
    with pytest.raises(ConfigError, match="not contiguous"):
        process_rows([0, 1, 0, 1], 8, 0)
    with pytest.raises(ConfigError, match="owns no device"):
        process_rows([0, 0, 1, 1], 8, 2)


def test_single_host_rpam_on_8_simulated_devices_equals_one_device(tiny_checkpoint):
    import jax
    import numpy as np

    from jaxassoc.models import load_model
    from jaxassoc.models.multihost import data_mesh, replicate, shard_batch, to_host
    from jaxassoc.readouts.rpam_prompts import PromptTemplate, rpam_inputs, tokenize_attributes

    assert jax.process_count() == 1 and len(jax.devices()) == 8
    mesh = data_mesh()
    assert [d.id for d in mesh.devices.flat] == sorted(d.id for d in jax.devices())
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    placed = shard_batch(x, mesh)
    assert placed.sharding.shard_shape(placed.shape) == (2, 3)
    assert np.array_equal(to_host(placed), x)
    assert replicate(x, mesh).sharding.is_fully_replicated
    model = load_model(tiny_checkpoint("gpt2"))
    tp1 = PromptTemplate("tp1", "These words are associated: {target} and")
    attrs = tokenize_attributes(model.tokenizer, ["he", "music", "math", "xylophone"], tp1)
    targets = ["doctor", "nurse", "a test of words", "music", "art"]
    one = rpam_inputs(model, targets, attrs, tp1, batch_size=4)
    many = rpam_inputs(model, targets, attrs, tp1, batch_size=4, mesh=data_mesh())
    diff = max(
        float(np.abs(getattr(one, f) - getattr(many, f)).max())
        for f in ("first_logits", "continuation", "log_partition")
    )
    assert diff <= 1e-5


TWO_PROCESSES = textwrap.dedent(
    """
    import sys
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_default_matmul_precision", "highest")
    port, pid, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=pid)
    import numpy as np
    from jaxassoc.models import load_model, run_batched
    from jaxassoc.models.multihost import data_mesh
    assert jax.process_count() == 2 and jax.device_count() == 4 and jax.local_device_count() == 2
    model = load_model(folder)
    fn = jax.jit(lambda p, ids, mask: model.forward(p["body"], ids, mask).hidden)
    rng = np.random.default_rng(1)
    seqs = [rng.integers(1, 300, rng.integers(1, 30)).tolist() for _ in range(21)]
    one = run_batched(fn, model.params, seqs, batch_size=6, pad_id=0)
    many = run_batched(fn, model.params, seqs, batch_size=6, pad_id=0, mesh=data_mesh())
    assert len(many) == len(seqs) and all(m.shape == o.shape for m, o in zip(many, one))
    print("maxdiff", max(float(np.abs(a - b).max()) for a, b in zip(one, many)))
    from jaxassoc.models.multihost import all_processes
    assert all_processes(True) and not all_processes(pid == 0) and not all_processes(pid == 1)
    print("agreed")
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.process  # jax.distributed: two processes
def test_two_processes_each_feed_their_rows_and_get_all_outputs(tiny_checkpoint):
    folder = tiny_checkpoint("gpt2")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    port = _free_port()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_PROCESSES, str(port), str(pid), str(folder)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in (0, 1)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            outputs.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for returncode, out, err in outputs:
        assert returncode == 0, err[-3000:]
        line = [x for x in out.splitlines() if x.startswith("maxdiff")][-1]
        assert float(line.split()[1]) <= 1e-5
        assert "agreed" in out


def test_distributed_options_from_the_environment():
    from jaxassoc.app.main import distributed_options

    assert distributed_options({}) == {}  # JAX auto-detects SLURM, Open MPI, Cloud TPU, Kubernetes
    env = {"JAX_COORDINATOR_ADDRESS": "node0:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    assert distributed_options(env) == {"coordinator_address": "node0:1234", "num_processes": 4, "process_id": 3}
    with pytest.raises(ConfigError, match="JAX_NUM_PROCESSES, JAX_PROCESS_ID not"):
        distributed_options({"JAX_COORDINATOR_ADDRESS": "node0:1234"})
    with pytest.raises(ConfigError, match="JAX_PROCESS_ID='one' is not an integer"):
        distributed_options({**env, "JAX_PROCESS_ID": "one"})
    with pytest.raises(ConfigError, match=r"JAX_PROCESS_ID=4 must lie in 0..JAX_NUM_PROCESSES-1 \(3\)"):
        distributed_options({**env, "JAX_PROCESS_ID": "4"})
    with pytest.raises(ConfigError, match=r"JAX_COORDINATOR_ADDRESS='node0' is not host:port \(e\.g\. node0:8476\)"):
        distributed_options({**env, "JAX_COORDINATOR_ADDRESS": "node0"})


@pytest.mark.parametrize("value", [0, -5, 86_401])
def test_distributed_timeout_is_range_checked_before_any_wait(value):
    from jaxassoc.app.main import start_distributed

    with pytest.raises(
        ConfigError, match=rf"^distributed_timeout_s={value} is out of range: it must be >= 1 and <= 86,400"
    ):
        start_distributed({}, value)


def test_a_process_waits_for_its_coordinator_only_as_long_as_asked():
    from jaxassoc.app.main import wait_for_coordinator

    with socket.socket() as listening:
        listening.bind(("localhost", 0))
        listening.listen()
        wait_for_coordinator(f"localhost:{listening.getsockname()[1]}", 1)  # it answers: no wait
    port = _free_port()
    start = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=rf"^distributed=true: no coordinator answered at localhost:{port} \(JAX_COORDINATOR_ADDRESS\) within "
        r"0\.5 s \(.*\); start process 0 \(JAX_PROCESS_ID=0\) .* or raise distributed_timeout_s$",
    ):
        wait_for_coordinator(f"localhost:{port}", 0.5)
    assert 0.5 <= time.monotonic() - start < 3


@pytest.mark.slow  # waits for peers as long as asked: ~13 s (issue 38: the default suite's budget)
@pytest.mark.process  # two CLI processes (process 0 and process 1 of 2), each with a coordinator address of its own
def test_distributed_without_peers_waits_as_long_as_asked_and_says_what_then(tmp_path):
    with socket.socket() as a, socket.socket() as b:  # two distinct free ports: the processes must not meet
        a.bind(("localhost", 0))
        b.bind(("localhost", 0))
        ports = a.getsockname()[1], b.getsockname()[1]
    args = [sys.executable, "-m", "jaxassoc", "distributed=true", "distributed_timeout_s=2", "metric=weat"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", HYDRA_FULL_ERROR="0", JAX_NUM_PROCESSES="2")
    procs = [
        subprocess.Popen(
            [*args, "model=glove-6b-50d", "cache_dir=null", f"hydra.run.dir=run{pid}"],
            cwd=tmp_path,
            env={**env, "JAX_PROCESS_ID": str(pid), "JAX_COORDINATOR_ADDRESS": f"localhost:{ports[pid]}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in (0, 1)
    ]
    try:
        (out0, err0), (out1, err1) = (proc.communicate(timeout=120) for proc in procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    # process 1 finds no coordinator: one error line and rc 1, never JAX's abort
    errors = [line for line in err1.splitlines() if line.startswith("jaxassoc: error:")]
    assert procs[1].returncode == 1 and len(errors) == 1, err1[-3000:]
    assert f"no coordinator answered at localhost:{ports[1]} (JAX_COORDINATOR_ADDRESS) within 2 s" in errors[0]
    assert "raise distributed_timeout_s" in errors[0] and "another task died" not in err1
    assert "process 1 of 2 waiting up to 2 s (distributed_timeout_s) for the coordinator (process 0)" in out1
    # process 0, the coordinator, waits inside JAX, whose timeout is a native abort: the log line announces it
    assert procs[0].returncode == -signal.SIGABRT, err0[-3000:]
    assert (
        f"process 0 of 2 waiting up to 2 s (distributed_timeout_s) for the 1 other process(es) to connect to "
        f"localhost:{ports[0]}; if they have not all connected by " in out0
    )
    assert "JAX aborts this process a few seconds later (rc 134)" in out0 and "another task died" in err0
