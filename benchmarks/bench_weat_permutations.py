"""WEAT permutation p-values: jaxassoc vs a plain NumPy loop in the style of WEFE's ``WEAT._calc_p_value``.

Both run on GloVe 6B-50d and the 10 Caliskan tests, pinned to the same number of CPU threads, with
100,000 random permutations per test (Monte Carlo forced, ``exact_bound=0``). The NumPy loop recomputes
the WEAT statistic from the vectors for every permutation, as WEFE does; it is linear in the number of
permutations, so it runs ``--baseline-permutations`` per test and its time is scaled to 100,000 (the
printout says so). Run: ``python benchmarks/bench_weat_permutations.py [--threads 1]``.
"""

import argparse
import sys

from _matmul_rate import pin_threads


def _wefe_style_p(X, Y, A, B, n_permutations, rng):
    """WEFE's loop: for each random split of X ∪ Y, recompute S(Xi, Yi, A, B) word by word."""
    import numpy as np

    def cos_mean(w, M):
        return np.mean(M @ w / (np.linalg.norm(M, axis=1) * np.linalg.norm(w)))

    def s(w):
        return cos_mean(w, A) - cos_mean(w, B)

    def weat_stat(Xi, Yi):
        return np.sum([s(x) for x in Xi], dtype=np.float64) - np.sum([s(y) for y in Yi], dtype=np.float64)

    pool = np.concatenate([X, Y])
    observed = weat_stat(X, Y)
    count = 0
    for _ in range(n_permutations):
        perm = rng.permutation(len(pool))
        count += weat_stat(pool[perm[: len(X)]], pool[perm[len(X) :]]) > observed
    return count / n_permutations


def _precomputed_loop_p(X, Y, A, B, n_permutations, rng):
    """A fairer NumPy baseline: s(w, A, B) computed once, then a loop re-summing it per permutation."""
    import numpy as np

    def unit(M):
        return M / np.linalg.norm(M, axis=1, keepdims=True)

    pool = unit(np.concatenate([X, Y]).astype(np.float64))
    s = (pool @ unit(A).T).mean(axis=1) - (pool @ unit(B).T).mean(axis=1)
    observed = s[: len(X)].sum() - s[len(X) :].sum()
    count = 0
    for _ in range(n_permutations):
        perm = rng.permutation(len(s))
        count += s[perm[: len(X)]].sum() - s[perm[len(X) :]].sum() > observed
    return count / n_permutations


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--permutations", type=int, default=100_000)
    parser.add_argument("--baseline-permutations", type=int, default=2_000)
    args = parser.parse_args(argv)
    print(pin_threads(args.threads))

    import time

    import jax
    import numpy as np

    from jaxassoc.data import load_weat_suite
    from jaxassoc.embeddings.static import load_embedded_glove
    from jaxassoc.metrics.weat import weat
    from jaxassoc.stats import StatsOptions

    emb = load_embedded_glove()
    suite = load_weat_suite("weat_caliskan2017")
    tests = [
        [emb.lookup(list(words)).vectors for words in (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b)]
        for t in suite.tests
    ]
    print(f"threads: {args.threads}; jax {jax.__version__} on {jax.devices()[0].platform}; numpy {np.__version__}")

    def ours(key):
        return [
            weat(k, *sets, options=StatsOptions(exact_bound=0, n_permutations=args.permutations, n_bootstrap=1_000))
            for k, sets in zip(jax.random.split(key, len(tests)), tests)
        ]

    jax.block_until_ready(ours(jax.random.key(0)))  # compile
    start = time.perf_counter()
    results = jax.block_until_ready(ours(jax.random.key(1)))
    ours_s = time.perf_counter() - start

    rng = np.random.default_rng(0)
    start = time.perf_counter()
    baseline_p = [_wefe_style_p(*sets, args.baseline_permutations, rng) for sets in tests]
    baseline_measured = time.perf_counter() - start
    baseline_s = baseline_measured * args.permutations / args.baseline_permutations

    start = time.perf_counter()
    precomputed_p = [_precomputed_loop_p(*sets, args.permutations, rng) for sets in tests]
    precomputed_s = time.perf_counter() - start

    print(
        f"{'test':5} {'d':>6} {'p (ours, {0} perms)':>24} {'p (NumPy, {1} perms)':>24}".format(
            args.permutations, args.baseline_permutations
        )
    )
    for t, r, p in zip(suite.tests, results, baseline_p):
        print(f"{t.id:5} {float(r.d):6.2f} {float(r.p_value):24.5f} {p:24.5f}")
    print(
        f"jaxassoc: {ours_s:.2f} s for 10 tests x {args.permutations} permutations (+ 1,000 bootstrap resamples each)"
    )
    print(
        f"NumPy loop (WEFE style): {baseline_measured:.2f} s for 10 x {args.baseline_permutations} permutations"
        f" -> {baseline_s:.1f} s scaled to {args.permutations}"
    )
    print(f"NumPy loop over precomputed s(w,A,B): {precomputed_s:.2f} s for 10 x {args.permutations} permutations")
    print(
        f"speed-up vs WEFE-style loop: {baseline_s / ours_s:.0f}x; vs precomputed-s loop: {precomputed_s / ours_s:.0f}x"
    )
    print("p (precomputed-s loop):", " ".join(f"{p:.5f}" for p in precomputed_p))


if __name__ == "__main__":
    sys.exit(main())
