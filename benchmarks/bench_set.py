"""SeT on a Cao-sized suite: jaxassoc's exact solver (vmapped) and optax solver (batched) vs the original
per-problem NumPy algorithm (``tests/reference_set_numpy.py``: A and x̃ built per call, sort, Python
column-squishing loop, full B = A + δ x̃ᵀ formed, ‖B − A‖_F), in the same process on the same CPUs.

Suite: one template, the 51 ABC groups plus the prior noun, every synonym of the 32 trait poles, one
problem per subword (subwords counted with the embedded all-MiniLM-L6-v2 WordPiece tokenizer). The head
and head inputs are RANDOM with RoBERTa-large's sizes (V = 50,265, D = 1,024, with bias): logits of a few
units and LayerNorm-like inputs; the real models are not wired in here. SeT's cost depends mainly on the
sizes, and the exact solver is checked against the baseline on the sampled problems.

A second, leaner NumPy loop (same projection, but ‖ΔA‖_F = ‖δ‖ ‖x̃‖ without building A and B) shows
how much of the original's time is the O(V·D) matrix update rather than the projection itself.

The baselines are linear in the number of problems (the original-style one takes over a second per
problem at these sizes), so they run on ``--baseline-sample`` problems and their time is scaled to the
whole suite (the printout says so); ``--baseline-sample 0`` runs them on every problem.

Run: ``python benchmarks/bench_set.py [--threads 2] [--vocab 50265 --dim 1024] [--baseline-sample 12]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from _matmul_rate import pin_threads


def suite_problem_count() -> tuple[int, int, int]:
    """(problems, words, subwords) of one template over all groups and the prior noun."""
    import transformers

    from jaxassoc.data import load_abc
    from jaxassoc.resources import minilm_dir

    abc = load_abc()
    tok = transformers.AutoTokenizer.from_pretrained(minilm_dir())
    words = [w for syns in abc.traits.values() for w in syns]
    subwords = sum(len(tok.tokenize(w)) for w in words)
    groups = len(abc.groups["<sgroup>"]) + 1  # + the prior noun
    return groups * subwords, len(words), subwords


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=50_265)
    parser.add_argument("--dim", type=int, default=1_024)
    parser.add_argument("--baseline-sample", type=int, default=12)
    parser.add_argument("--chunk", type=int, default=64, help="exact solver: contexts per vmapped block")
    parser.add_argument("--optax-block", type=int, default=1024, help="optax solver: problems per compiled call")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cpus = pin_threads(args.threads)["cpus"]

    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from reference_set_numpy import set_distance, set_distance_lean

    from jaxassoc.metrics.set_exact import set_exact_kernel
    from jaxassoc.metrics.set_optax import set_optax

    n_problems, n_words, n_subwords = suite_problem_count()
    V, D = args.vocab, args.dim
    print(f"CPUs: {cpus} ({len(cpus)} threads for XLA and BLAS); jax {jax.__version__}, numpy {np.__version__}")
    print(f"suite: 52 groups (51 + prior) x {n_words} trait words = {n_subwords} subwords -> {n_problems} SeT problems")
    print(f"head: RANDOM, V={V}, D={D} (+ bias column), float32")

    rng = np.random.default_rng(args.seed)
    W = (rng.standard_normal((V, D), dtype=np.float32) * (3 / np.sqrt(D))).astype(np.float32)
    b = rng.standard_normal(V, dtype=np.float32)
    X = rng.standard_normal((n_problems, D), dtype=np.float32)
    gold = rng.integers(0, V, n_problems).astype(np.int32)
    Wj, bj, Xj, gj = jnp.asarray(W), jnp.asarray(b), jnp.asarray(X), jnp.asarray(gold)

    def timed(fn):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        return out, time.perf_counter() - start

    exact_fn, t_compile_exact = timed(
        lambda: set_exact_kernel.lower(Wj, bj, Xj, gj, chunk=args.chunk).compile()
    )
    exact, t_exact = timed(lambda: exact_fn(Wj, bj, Xj, gj))
    block = min(args.optax_block, n_problems)
    _, t_compile_optax = timed(lambda: set_optax(W, b, X[:block, None], gold[:block, None], block=block).distance)
    opt, t_optax = timed(lambda: set_optax(W, b, X[:, None], gold[:, None], block=block))

    sample = n_problems if args.baseline_sample <= 0 else min(args.baseline_sample, n_problems)
    picks = np.linspace(0, n_problems - 1, sample).astype(int)
    start = time.perf_counter()
    base = np.array([set_distance(W, b, X[i], int(gold[i])) for i in picks])
    t_base_sample = time.perf_counter() - start
    t_base = t_base_sample * n_problems / sample
    start = time.perf_counter()
    lean = np.array([set_distance_lean(W, b, X[i], int(gold[i])) for i in picks])
    t_lean = (time.perf_counter() - start) * n_problems / sample

    d_exact, d_opt = np.asarray(exact.distance), np.asarray(opt.distance)
    print(f"exact vs baseline on {sample} sampled problems: max rel. diff {np.max(np.abs(d_exact[picks] / base - 1)):.2e}"
          f" (lean loop vs baseline {np.max(np.abs(lean / base - 1)):.2e})")
    moved = d_exact > 0  # a gold token that already wins costs 0 in both
    print(f"exact: {int((~moved).sum())} problems already satisfied; pool sizes mean "
          f"{float(np.mean(np.asarray(exact.pool_size))):.1f}, max {int(np.max(np.asarray(exact.pool_size)))}")
    print(f"optax vs exact: max rel. diff {np.max(np.abs(d_opt[moved] / d_exact[moved] - 1)):.2e}, "
          f"max |diff| where exact = 0: {np.max(np.abs(d_opt[~moved]), initial=0.0):.1e}, "
          f"max constraint violation {float(np.max(np.asarray(opt.max_violation))):.2e}, "
          f"working sets verified: {bool(np.all(np.asarray(opt.working_set_ok)))}")
    note = "" if sample == n_problems else f" (measured on {sample} problems, scaled x{n_problems / sample:.0f})"
    print(f"{'solver':<34}{'seconds':>12}{'problems/s':>14}{'speed-up':>10}")
    rows = [
        ("original-style NumPy loop" + ("" if not note else "*"), t_base),
        ("lean NumPy loop, logits only" + ("" if not note else "*"), t_lean),
        ("jaxassoc exact (vmapped)", t_exact),
        ("jaxassoc optax AL+L-BFGS (batched)", t_optax),
    ]
    for name, t in rows:
        print(f"{name:<34}{t:>12.2f}{n_problems / t:>14.1f}{t_base / t:>9.1f}x")
    if note:
        print(f"* {note.strip()}")
    print(f"not included above: exact compile {t_compile_exact:.1f} s; optax compile + warm-up on {block} problems "
          f"{t_compile_optax:.1f} s (the timed optax run includes its retries)")


if __name__ == "__main__":
    main()
