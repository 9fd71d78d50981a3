"""Pin a benchmark to N CPU threads, and measure matmul GFLOP/s of numpy, JAX and torch there (fp32; JAX and
torch also bfloat16).

``pin_threads(n)`` must run before numpy, jax or torch is imported (this module imports none of them at
the top). What works in jax 0.10.2 on CPU: the XLA CPU client sizes its intra-op thread pool from the
process's CPU affinity, and we found no thread-count option in ``XLA_FLAGS`` or ``jax.config``: with
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"`` (accepted, not
rejected) a 2-CPU process still starts 2 ``tf_XLAEigen`` threads, while affinity to 1 CPU gives 1. So
we restrict the affinity to ``n`` cores (which also binds torch and BLAS to the same cores), set the
thread env variables for BLAS/OpenMP (and, for ``n = 1``, those XLA flags), and after import call
``torch.set_num_threads(n)``.

Run alone: ``python benchmarks/_matmul_rate.py --threads 2``.
"""

from __future__ import annotations

import argparse
import os
import time


def pin_threads(n: int) -> dict:
    """Bind this process to ``n`` CPUs and set the thread env variables; returns what was set."""
    cpus = sorted(os.sched_getaffinity(0))
    if n < 1 or n > len(cpus):
        raise SystemExit(f"--threads {n}: this process may use {len(cpus)} CPUs ({cpus})")
    os.sched_setaffinity(0, cpus[:n])
    env = {name: str(n) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if n == 1 else ""
    env["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS", ""), flags]))
    os.environ.update(env)
    return {"threads": n, "cpus": cpus[:n], **env}


def _best_rate(run, n: int, repeats: int) -> float:
    run()  # warm-up / compile
    best = min(_timed(run) for _ in range(repeats))
    return 2 * n**3 / best / 1e9


def _timed(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def numpy_gflops(n: int = 1024, repeats: int = 10) -> float:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    return _best_rate(lambda: a @ a, n, repeats)


def jax_gflops(n: int = 1024, repeats: int = 10, dtype: str = "float32") -> float:
    """JAX's matmul rate; ``dtype="bfloat16"``: bfloat16 inputs accumulated in float32 (``preferred_element_type``,
    the products of ``model.precision=mixed``)."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
    f = jax.jit(lambda x: jnp.matmul(x, x, preferred_element_type=jnp.float32))
    return _best_rate(lambda: f(a).block_until_ready(), n, repeats)


def torch_gflops(n: int = 1024, repeats: int = 10, dtype: str = "float32") -> float:
    """PyTorch's matmul rate in ``dtype`` (bfloat16: what ``torch.autocast`` runs; oneDNN accumulates in float32)."""
    import torch

    a = torch.randn(n, n, dtype=torch.float32).to(getattr(torch, dtype))
    with torch.inference_mode():
        return _best_rate(lambda: a @ a, n, repeats)


def matmul_rates(n: int = 1024, repeats: int = 10) -> dict[str, float]:
    return {"numpy": numpy_gflops(n, repeats), "jax": jax_gflops(n, repeats), "torch": torch_gflops(n, repeats)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=1024)
    args = parser.parse_args()
    print(pin_threads(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    for name, rate in matmul_rates(args.n).items():
        print(f"{name:6s} fp32 {args.n}x{args.n} matmul: {rate:7.1f} GFLOP/s")
