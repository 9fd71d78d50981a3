"""Permutation test: exact p against brute-force itertools enumeration and scipy; Monte Carlo against exact."""

import dataclasses
import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from tolerances import f32_sum

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.stats import (
    StatsOptions,
    difference_of_sums,
    permutation_test,
    permutation_test_batch,
    small_samples,
    smallest_p,
)
from jaxassoc.stats.permutation import _random_partition

KEY = jax.random.key(0)


def brute_force_p(values, n_x, alternative, ties, stat=lambda x, y: sum(x) - sum(y)):
    """Plain-Python reference: every re-partition of the items into groups of sizes n_x and n - n_x.

    Values are turned into exact rationals (Fractions pass through), so ties are exact ties.
    """
    vals = [v if isinstance(v, Fraction) else Fraction(float(v)) for v in values]
    n = len(vals)
    observed = stat(vals[:n_x], vals[n_x:])
    greater = less = total = 0
    for xs in itertools.combinations(range(n), n_x):
        chosen = set(xs)
        s = stat([vals[i] for i in xs], [vals[i] for i in range(n) if i not in chosen])
        total += 1
        greater += s > observed if ties == "strict" else s >= observed
        less += s < observed if ties == "strict" else s <= observed
    p = {"greater": greater / total, "less": less / total, "two-sided": min(1.0, 2 * min(greater, less) / total)}
    return float(observed), p[alternative], total


@pytest.mark.parametrize("n,n_x", [(8, 4), (9, 3), (11, 6)])
@pytest.mark.parametrize("ties", ["strict", "inclusive"])
def test_exact_matches_brute_force_with_ties(n, n_x, ties):
    rng = np.random.default_rng(n * 10 + n_x)
    values = rng.integers(-3, 4, n).astype(np.float32)  # small integers: many exactly tied partitions
    values[:n_x] += 1.0
    for alternative in ("greater", "less", "two-sided"):
        res = permutation_test(KEY, values, n_x, options=StatsOptions(alternative=alternative, ties=ties))
        observed, p, total = brute_force_p(values, n_x, alternative, ties)
        assert bool(res.exact) and int(res.n_resamples) == total == math.comb(n, n_x)
        assert float(res.statistic) == observed
        # p: a float32 quotient of exact counts, ≤ u·p ≤ 6e-8 (here and below)
        assert float(res.p_value) == pytest.approx(p, abs=1e-7), (alternative, ties)


def test_strict_ties_survive_float_rounding():
    # Decimals: sums that are equal in exact arithmetic (0.3 + 0.3 = 0.6) differ after float32 rounding.
    decimals = ["0.1", "0.7", "0.3", "0.2", "0.3", "0.1", "0.7", "0.2", "0.6", "0.3"]
    values = np.array([float(d) for d in decimals], np.float32)
    for ties in ("strict", "inclusive"):
        res = permutation_test(KEY, values, 5, options=StatsOptions(ties=ties, alternative="greater"))
        p = brute_force_p([Fraction(d) for d in decimals], 5, "greater", ties)[1]
        assert float(res.p_value) == pytest.approx(p, abs=1e-7), ties


def test_exact_inclusive_matches_scipy_permutation_test():
    rng = np.random.default_rng(7)
    x, y = rng.normal(0.3, 1.0, 6), rng.normal(0.0, 1.0, 7)
    values = np.concatenate([x, y]).astype(np.float32)
    for alternative in ("greater", "less", "two-sided"):
        ref = st.permutation_test(
            (values[:6].astype(np.float64), values[6:].astype(np.float64)),
            lambda a, b, axis: np.sum(a, axis=axis) - np.sum(b, axis=axis),
            permutation_type="independent",
            alternative=alternative,
            n_resamples=np.inf,
            vectorized=True,
        )
        res = permutation_test(KEY, values, 6, options=StatsOptions(alternative=alternative, ties="inclusive"))
        # a float32 difference of two sums of the 13 values: f32_sum(13, max|v|) (rel=1e-5 would not hold
        # for a statistic near 0)
        assert float(res.statistic) == pytest.approx(
            ref.statistic, rel=0, abs=f32_sum(len(values), float(np.abs(values).max()))
        )
        assert float(res.p_value) == pytest.approx(ref.pvalue, abs=1e-7)


def test_custom_statistic_unequal_groups():
    rng = np.random.default_rng(8)
    values = rng.normal(size=10).astype(np.float32)
    values[:3] += 0.8

    def mean_difference(v, in_x):
        return jnp.sum(jnp.where(in_x, v, 0.0)) / jnp.sum(in_x) - jnp.sum(jnp.where(in_x, 0.0, v)) / jnp.sum(~in_x)

    res = permutation_test(KEY, values, 3, statistic=mean_difference, options=StatsOptions(alternative="greater"))
    _, p, _ = brute_force_p(values, 3, "greater", "inclusive", stat=lambda a, b: sum(a) / len(a) - sum(b) / len(b))
    assert float(res.p_value) == pytest.approx(p, abs=1e-7)


def test_monte_carlo_within_binomial_tolerance_of_exact():
    rng = np.random.default_rng(9)
    values = rng.normal(size=(3, 14)).astype(np.float32)
    values[:, :7] += np.array([0.2, 0.5, 0.9])[:, None]
    exact = permutation_test_batch(KEY, values, 7, options=StatsOptions(alternative="greater"))
    n_perm = 20_000
    mc = permutation_test_batch(
        jax.random.key(1), values, 7, options=StatsOptions(exact_bound=0, n_permutations=n_perm, alternative="greater")
    )
    assert bool(exact.exact.all()) and not bool(mc.exact.any())
    assert (np.asarray(mc.n_resamples) == n_perm).all() and (np.asarray(exact.n_resamples) == math.comb(14, 7)).all()
    for p_exact, p_mc in zip(np.asarray(exact.p_value), np.asarray(mc.p_value)):
        sd = math.sqrt(p_exact * (1 - p_exact) / n_perm)
        assert abs(p_mc - p_exact) <= 4.5 * sd + 1e-6, (p_exact, p_mc)
    np.testing.assert_array_equal(np.asarray(exact.statistic), np.asarray(mc.statistic))


def test_monte_carlo_is_deterministic_per_key_and_batch_equals_single():
    rng = np.random.default_rng(10)
    values = rng.normal(size=(4, 40)).astype(np.float32)
    values[:, :20] += 0.15
    batch = permutation_test_batch(KEY, values, 20, options=StatsOptions(n_permutations=5_000))
    again = permutation_test_batch(KEY, values, 20, options=StatsOptions(n_permutations=5_000))
    other = permutation_test_batch(jax.random.key(2), values, 20, options=StatsOptions(n_permutations=5_000))
    np.testing.assert_array_equal(np.asarray(batch.p_value), np.asarray(again.p_value))
    assert not np.array_equal(np.asarray(batch.p_value), np.asarray(other.p_value))
    for t in range(4):
        single = permutation_test(KEY, values[t], 20, options=StatsOptions(n_permutations=5_000))
        assert float(single.p_value) == float(batch.p_value[t])
    vmapped = jax.jit(jax.vmap(lambda v: permutation_test(KEY, v, 20, options=StatsOptions(n_permutations=5_000))))(
        values
    )
    np.testing.assert_array_equal(np.asarray(vmapped.p_value), np.asarray(batch.p_value))


def test_random_partitions_are_uniform_and_keep_sizes():
    keys = jax.random.split(jax.random.key(3), 24_000)
    masks = np.asarray(jax.vmap(lambda k: _random_partition(k, 7, 3))(keys))
    assert (masks.sum(1) == 3).all()
    codes = masks @ (1 << np.arange(7))
    counts = np.array([np.sum(codes == sum(1 << i for i in c)) for c in itertools.combinations(range(7), 3)])
    assert counts.sum() == 24_000  # every draw is one of the C(7, 3) = 35 subsets
    assert st.chisquare(counts).pvalue > 1e-3
    big = np.asarray(jax.vmap(lambda k: _random_partition(k, 300, 120))(keys[:200]))
    assert (big.sum(1) == 120).all()
    assert abs(big.mean() - 0.4) < 0.01


def test_difference_of_sums_is_weat_s():
    v = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert float(difference_of_sums(v, jnp.array([True, True, False, False, False]))) == 3.0 - 12.0


def test_bad_inputs_raise_clear_errors():
    v = np.arange(6.0)
    with pytest.raises(InputError, match="both groups"):
        permutation_test(KEY, v, 0)
    with pytest.raises(InputError, match="both groups"):
        permutation_test(KEY, v, 6)
    with pytest.raises(InputError, match="NaN at positions \\[2\\]"):
        permutation_test(KEY, np.array([1.0, 2.0, np.nan, 4.0]), 2)
    with pytest.raises(InputError, match="1-D"):
        permutation_test(KEY, v.reshape(2, 3), 1)
    with pytest.raises(InputError, match="2-D"):
        permutation_test_batch(KEY, v, 3)
    with pytest.raises(InputError, match="NaN in tests \\(rows\\) \\[1\\]"):
        permutation_test_batch(KEY, np.array([[1.0, 2.0], [np.nan, 1.0]]), 1)
    with pytest.raises(ConfigError, match="alternative"):
        permutation_test(KEY, v, 3, options=StatsOptions(alternative="bigger"))
    with pytest.raises(ConfigError, match="ties"):
        permutation_test(KEY, v, 3, options=StatsOptions(ties="loose"))
    with pytest.raises(ConfigError, match="n_permutations"):
        permutation_test(KEY, v, 3, options=StatsOptions(exact_bound=0, n_permutations=0))


def test_the_default_counts_the_observed_arrangement_so_an_exact_p_never_reads_below_one_over_n():
    values = np.array([2.0, 1.9, -1.0, -1.1], np.float32)  # X = {2.0, 1.9} beats every other partition
    default = permutation_test(KEY, values, 2, options=StatsOptions(alternative="greater"))
    assert (
        float(default.p_value) == pytest.approx(1 / 6) == smallest_p(4, 2, options=StatsOptions(alternative="greater"))
    )  # not 0: 6 partitions
    assert (
        float(permutation_test(KEY, values, 2, options=StatsOptions(ties="strict", alternative="greater")).p_value)
        == 0.0
    )  # Eq. 4 as printed
    two_sided = permutation_test(KEY, values, 2, options=StatsOptions(alternative="two-sided"))
    assert (
        float(two_sided.p_value)
        == pytest.approx(2 / 6)
        == smallest_p(4, 2, options=StatsOptions(alternative="two-sided"))
    )
    assert float(permutation_test(KEY, values, 2).p_value) == float(two_sided.p_value)  # the default alternative


def test_the_default_monte_carlo_p_is_k_plus_one_over_n_plus_one():
    values = np.arange(40, 0, -1).astype(np.float32)  # the observed split is the unique extreme of C(40, 20)
    drawn = StatsOptions(exact_bound=0, n_permutations=100, alternative="greater")
    mc = permutation_test(KEY, values, 20, options=drawn)
    assert float(mc.p_value) == pytest.approx(1 / 101) == smallest_p(40, 20, options=drawn)
    strict = permutation_test(KEY, values, 20, options=dataclasses.replace(drawn, ties="strict"))
    assert float(strict.p_value) == 0.0
    # with draws beyond S: (k + 1) / (n + 1), k counted by the strict run on the same draws (no ties here)
    rng = np.random.default_rng(4)
    noisy = rng.normal(size=30).astype(np.float32)
    noisy[:15] += 0.3
    drawn = dataclasses.replace(drawn, n_permutations=999)
    k = float(permutation_test(KEY, noisy, 15, options=dataclasses.replace(drawn, ties="strict")).p_value) * 999
    p = float(permutation_test(KEY, noisy, 15, options=drawn).p_value)
    assert round(k) >= 1 and p == pytest.approx((round(k) + 1) / 1000)


def test_small_tests_are_named_with_the_smallest_p_they_can_reach():
    assert small_samples.caveat({"X": 8, "Y": 8, "A": 8, "B": 8}, (8, 8), 1 / 12870, ci=True) == ""
    text = small_samples.caveat({"X": 2, "Y": 2, "A": 2, "B": 2}, (2, 2), 1 / 6, ci=True)
    assert (
        text
        == "small test (words: X 2, Y 2, A 2, B 2; 6 partitions): p cannot go below 0.167; its bootstrap CI is unreliable"
    )
    assert small_samples.is_small({"A": 5, "B": 5}, (2, 3))  # C(5, 2) = 10 partitions < 20
    assert not small_samples.is_small({"A": 5, "B": 5}, (3, 3))  # C(6, 3) = 20, 5 words a set: not small
    assert small_samples.is_small({"X": 4, "Y": 9}, None)  # CEAT: set sizes only
    coarse = small_samples.caveat({"X": 8, "Y": 8, "A": 8, "B": 8}, (8, 8), 1 / 11, ci=True)  # 10 draws
    assert coarse == "too few permutations drawn: p cannot go below 0.0909; raise stats.n_permutations"
    assert small_samples.caveat({"X": 8, "Y": 8, "A": 8, "B": 8}, (8, 8), 1 / 21, ci=True) == ""


# --- issue 25 item 14: infinite scores, the older PRNG key -------------------------------------------------


def test_infinite_scores_are_refused_not_p_zero():
    """An infinite score ties every partition that holds it with the observed one: p read 0 (exact)."""
    with pytest.raises(InputError, match=r"values contain infinite values .* at positions \[0\]"):
        permutation_test(KEY, np.array([np.inf, 1.0, 2.0, 3.0, 0.5, 0.1]), 3)
    with pytest.raises(InputError, match=r"values contain infinite values .*float32.* in tests \(rows\) \[1\]"):
        permutation_test_batch(KEY, np.array([[1.0, 2, 3, 4], [1e39, 2, 3, 4]]), 2)  # float64 beyond float32


def test_the_older_prng_key_draws_the_same_partitions_and_bad_keys_are_named():
    values = np.random.default_rng(0).normal(size=30).astype(np.float32)
    drawn = StatsOptions(exact_bound=0, n_permutations=500)
    typed = permutation_test(jax.random.key(7), values, 12, options=drawn)
    raw = permutation_test(jax.random.PRNGKey(7), values, 12, options=drawn)
    assert float(raw.p_value) == float(typed.p_value)
    batch = permutation_test_batch(jax.random.PRNGKey(7), values[None], 12, options=drawn)
    assert float(batch.p_value[0]) == float(typed.p_value)
    for bad, got in [
        (0, "got 0"),
        (np.zeros(3, np.uint32), r"shape \(3,\) and dtype uint32"),
        (jax.random.split(KEY, 2), r"a batch of keys of shape \(2,\)"),
    ]:
        with pytest.raises(InputError, match=rf"permutation_test: key must be one PRNG key.*{got}"):
            permutation_test(bad, values, 12, options=drawn)
