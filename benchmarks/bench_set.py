"""SeT on the Cao et al. (2022) suite: jaxassoc's exact and optax solvers vs the original per-problem algorithm.

Ours: the exact solver (vmapped) and the optax solver (batched). The original: per problem, the NumPy
algorithm of ``tests/reference_set_numpy.py`` (A and x̃ built per call, sort, Python column-squishing
loop, full B = A + δ x̃ᵀ formed, ‖B − A‖_F). Same process, same CPUs.

``--model random`` (default): one template, the 51 ABC groups plus the prior noun, every synonym of the
32 trait poles, one problem per subword (subwords counted with the embedded all-MiniLM-L6-v2 WordPiece
tokenizer). The head and head inputs are RANDOM with RoBERTa-large's sizes (V = 50,265, D = 1,024, with
bias): logits of a few units and LayerNorm-like inputs. SeT's cost depends mainly on the sizes, and the
exact solver is checked against the baseline on the sampled problems. A second, leaner NumPy loop (same
projection, but ‖ΔA‖_F = ‖δ‖ ‖x̃‖ without building A and B) shows how much of the original's time is the
O(V·D) matrix update rather than the projection itself.

``--model smollm2``: the real suite on the embedded SmolLM2-135M (V = 49,152, D = 576, no bias), built as
``experiments/set_cao2022/optax_vs_exact.py`` builds it (default template, or ``--templates all``; one
problem per trait token). Ours: the batched teacher-forced forward passes (one per (filler, word)) for the
head inputs, then the exact solver, or the optax solver, over all problems; compilation included. The
baseline is the original algorithm problem by problem: a PyTorch forward pass per subword
(transformers ``LlamaForCausalLM`` with the same GGUF weights, ``benchmarks/_reference.py``; the prompt up
to that subword, the last hidden state after the final norm) and the original-style NumPy projection.

The baselines are linear in the number of problems, so they run on ``--baseline-sample`` evenly spaced
problems and their time is scaled to the whole suite (the printout says so); ``--baseline-sample 0`` runs
them on every problem. XLA, BLAS and torch are pinned to the same ``--threads`` CPUs; the matmul rates of
numpy, JAX and torch there are printed. Run it on a quiet machine: where other processes share the pinned
CPUs, torch's per-operator thread barriers make its small forward passes very slow with 2 threads (we saw
3.6 s instead of 0.08 s per pass with 1 thread), which would inflate the ratio; ``--threads 1`` is the
fair setting on a busy machine.

Run: ``python benchmarks/bench_set.py [--threads 2] [--vocab 50265 --dim 1024] [--baseline-sample 12]``
or ``python benchmarks/bench_set.py --model smollm2 [--templates default|all] [--max-problems N]
[--baseline-sample 200]``.
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


def random_head(args, cpus) -> None:
    """The random-head mode (RoBERTa-large sizes)."""
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

    exact_fn, t_compile_exact = timed(lambda: set_exact_kernel.lower(Wj, bj, Xj, gj, chunk=args.chunk).compile())
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
    print(
        f"exact vs baseline on {sample} sampled problems: max rel. diff {np.max(np.abs(d_exact[picks] / base - 1)):.2e}"
        f" (lean loop vs baseline {np.max(np.abs(lean / base - 1)):.2e})"
    )
    moved = d_exact > 0  # a gold token that already wins costs 0 in both
    print(
        f"exact: {int((~moved).sum())} problems already satisfied; pool sizes mean "
        f"{float(np.mean(np.asarray(exact.pool_size))):.1f}, max {int(np.max(np.asarray(exact.pool_size)))}"
    )
    print(
        f"optax vs exact: max rel. diff {np.max(np.abs(d_opt[moved] / d_exact[moved] - 1)):.2e}, "
        f"max |diff| where exact = 0: {np.max(np.abs(d_opt[~moved]), initial=0.0):.1e}, "
        f"max constraint violation {float(np.max(np.asarray(opt.max_violation))):.2e}, "
        f"working sets verified: {bool(np.all(np.asarray(opt.working_set_ok)))}"
    )
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
    print(
        f"not included above: exact compile {t_compile_exact:.1f} s; optax compile + warm-up on {block} problems "
        f"{t_compile_optax:.1f} s (the timed optax run includes its retries)"
    )


def smollm2_suite(args, cpus) -> None:
    """The real suite on the embedded SmolLM2: ours (batched passes + exact / optax) vs the original per problem."""
    import torch

    torch.set_num_threads(args.threads)
    import jax
    import numpy as np

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "tests"), str(root / "experiments" / "set_cao2022")]
    from _matmul_rate import matmul_rates
    from _reference import torch_llama_from_gguf
    from optax_vs_exact import agreement, head_inputs, solve_exact, solve_optax, suite_problems, templates_for, timed
    from reference_set_numpy import set_distance

    from jaxassoc.models import load_model
    from jaxassoc.resources import smollm2_gguf

    rates = matmul_rates()
    print(
        f"CPUs: {cpus} ({len(cpus)} threads for XLA, BLAS and torch); jax {jax.__version__}, numpy {np.__version__}, "
        f"torch {torch.__version__}"
    )
    print("fp32 1024x1024 matmul GFLOP/s on these CPUs: " + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()))
    model = load_model("smollm2-135m")
    templates = templates_for(args.templates)
    suite = suite_problems(model, templates, max_problems=args.max_problems)
    n = len(suite.gold)
    W, b = model.head.W, model.head.b
    scope = "" if args.max_problems is None else f" (--max-problems {args.max_problems}: evenly spaced prompts)"
    print(
        f"suite: SmolLM2-135M (V={W.shape[0]}, D={W.shape[1]}, no bias), {len(templates)} template(s), "
        f"{len(suite.sequences)} prompts (group or prior noun x trait word), "
        f"{n} SeT problems (one per trait token){scope}"
    )

    x, t_forward = timed(lambda: head_inputs(model, suite, batch_size=args.batch_size))
    (d_exact, _), t_exact = timed(lambda: solve_exact(W, b, x, suite.gold, block=args.exact_block))
    (d_optax, violation, _), t_optax = timed(lambda: solve_optax(W, b, x, suite.gold, block=args.optax_block))

    reference, _, _ = torch_llama_from_gguf(smollm2_gguf())
    W_np = reference.lm_head.weight.detach().numpy()
    sample = n if args.baseline_sample <= 0 else min(args.baseline_sample, n)
    picks = np.unique(np.linspace(0, n - 1, sample).round().astype(int))
    base, t_torch, t_numpy = np.zeros(len(picks)), 0.0, 0.0
    with torch.inference_mode():
        for k, i in enumerate(picks):
            ids = suite.sequences[suite.problem_prompt[i]][: suite.problem_position[i] + 1]
            start = time.perf_counter()
            x_i = reference.model(torch.tensor([ids])).last_hidden_state[0, -1].numpy()
            t_torch += time.perf_counter() - start
            start = time.perf_counter()
            base[k] = set_distance(W_np, None, x_i, int(suite.gold[i]))
            t_numpy += time.perf_counter() - start
    scale = n / len(picks)
    t_base = (t_torch + t_numpy) * scale

    stats = agreement(d_exact, d_optax, violation)
    moved = base > 0
    rel = np.abs(d_exact[picks][moved] / base[moved] - 1)
    print(
        f"ours (exact) vs baseline on {len(picks)} sampled problems: max rel. diff {rel.max(initial=0.0):.2e}, "
        f"max |ours| where baseline = 0: {np.abs(d_exact[picks][~moved]).max(initial=0.0):.1e}"
    )
    print(
        f"optax vs exact over all {n} problems: max rel. diff {stats['max_rel_diff']:.2e} (median "
        f"{stats['median_rel_diff']:.2e}; {stats['beyond_tolerance']} beyond 1e-3), max constraint violation "
        f"{stats['max_violation']:.2e}; {stats['already_satisfied']} problems already satisfied"
    )
    star = "" if len(picks) == n else "*"
    print(f"{'pipeline':<52}{'seconds':>10}{'problems/s':>12}{'speed-up':>10}")
    rows = [
        (f"original: torch pass per subword + NumPy projection{star}", t_base),
        (f"  of which torch forward passes{star}", t_torch * scale),
        (f"  of which NumPy projections{star}", t_numpy * scale),
        ("jaxassoc: batched passes + exact (vmapped)", t_forward + t_exact),
        ("jaxassoc: batched passes + optax (batched)", t_forward + t_optax),
        ("  of which batched forward passes", t_forward),
        ("  of which exact solver", t_exact),
        ("  of which optax solver", t_optax),
    ]
    for name, t in rows:
        print(f"{name:<52}{t:>10.1f}{n / t:>12.1f}{t_base / t:>9.1f}x")
    if star:
        print(
            f"* measured on {len(picks)} evenly spaced problems ({t_torch + t_numpy:.1f} s), "
            f"scaled x{scale:.1f} to the suite"
        )
    print("jaxassoc times include compilation (one per forward bucket and per solver block shape)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("random", "smollm2"), default="random")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--baseline-sample",
        type=int,
        default=None,
        help="problems the baselines run on, scaled to the suite (default 12 random, 200 smollm2; 0: all)",
    )
    parser.add_argument("--optax-block", type=int, default=1024, help="optax solver: problems per compiled call")
    random_group = parser.add_argument_group("--model random")
    random_group.add_argument("--vocab", type=int, default=50_265)
    random_group.add_argument("--dim", type=int, default=1_024)
    random_group.add_argument("--chunk", type=int, default=64, help="exact solver: contexts per vmapped block")
    random_group.add_argument("--seed", type=int, default=0)
    real_group = parser.add_argument_group("--model smollm2")
    real_group.add_argument("--templates", choices=("default", "all"), default="default")
    real_group.add_argument(
        "--max-problems", type=int, default=None, help="about N problems from evenly spaced prompts"
    )
    real_group.add_argument("--batch-size", type=int, default=64, help="prompts per forward pass")
    real_group.add_argument("--exact-block", type=int, default=2048, help="exact solver: problems per compiled call")
    args = parser.parse_args()
    if args.baseline_sample is None:
        args.baseline_sample = 12 if args.model == "random" else 200
    cpus = pin_threads(args.threads)["cpus"]
    (random_head if args.model == "random" else smollm2_suite)(args, cpus)


if __name__ == "__main__":
    main()
