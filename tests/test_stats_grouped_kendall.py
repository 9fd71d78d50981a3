"""grouped_kendall against scipy's τ-b and a NumPy loop of the same within-group permutations / group
bootstrap (other RNG: Monte Carlo tolerances)."""

import jax
import numpy as np
import pytest
import scipy.stats as st

from jaxassoc.errors import InputError
from jaxassoc.stats.grouped_kendall import grouped_kendall

KEY = jax.random.key(0)


def numpy_reference(x, y, n, rng):
    tau = st.kendalltau(x.ravel(), y.ravel()).statistic
    null = [st.kendalltau(rng.permuted(x, axis=1).ravel(), y.ravel()).statistic for _ in range(n)]
    p = (1 + np.sum(np.abs(null) >= abs(tau) * (1 - 1e-6))) / (n + 1)
    rows = [rng.integers(0, len(x), len(x)) for _ in range(n)]
    boot = [st.kendalltau(x[r].ravel(), y[r].ravel()).statistic for r in rows]
    return tau, p, np.percentile(boot, [2.5, 97.5])


@pytest.mark.parametrize("signal", [0.0, 0.3])
def test_matches_a_numpy_loop(signal):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 100, size=(8, 6)).astype(np.float32)  # human ratings, with ties
    x = (signal * (y - 50) / 30 + rng.normal(size=y.shape)).astype(np.float32)
    ours = grouped_kendall(KEY, x, y, n_permutations=2000, n_resamples=2000)
    tau, p, (lo, hi) = numpy_reference(x, y, 2000, rng)
    # τ in float32 from exact pair counts: a few u (abs=1e-5). p and the CI: sampling, other draws than the
    # NumPy loop's: p's SE √(p(1 - p) / 2000) ≤ 0.011 each, and a CI end's SE ~0.1 x the bootstrap SD (~0.1):
    # 0.03 is ~2 SEs of the difference of p, ~3 of the CI ends'
    assert float(ours.tau) == pytest.approx(tau, abs=1e-5)
    assert float(ours.p_value) == pytest.approx(p, abs=0.03)
    assert float(ours.ci_low) == pytest.approx(lo, abs=0.03) and float(ours.ci_high) == pytest.approx(hi, abs=0.03)
    assert ours.n_permutations == 2000 and ours.n_resamples == 2000


def test_a_strong_alignment_reaches_the_p_floor_and_its_ci_excludes_zero():
    y = np.tile(np.arange(16, dtype=np.float32), (25, 1))
    x = y + np.random.default_rng(0).normal(scale=2.0, size=y.shape).astype(np.float32)
    res = grouped_kendall(KEY, x, y, n_permutations=999, n_resamples=500)
    assert float(res.p_value) == pytest.approx(1 / 1000)  # never below 1 / (n + 1); a float32 quotient: u
    assert 0 < float(res.ci_low) < float(res.tau) < float(res.ci_high)


def test_deterministic_given_the_key():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    a = grouped_kendall(KEY, x, y, n_permutations=100, n_resamples=100)
    b = grouped_kendall(KEY, x, y, n_permutations=100, n_resamples=100)
    assert tuple(map(float, a[:4])) == tuple(map(float, b[:4]))


@pytest.mark.parametrize(
    "x, y, kwargs, match",
    [
        (np.zeros((3, 4)), np.zeros((3, 5)), {}, r"\(3, 4\) and \(3, 5\)"),
        (np.zeros(4), np.zeros(4), {}, "groups, items"),
        (np.full((3, 4), np.nan), np.zeros((3, 4)), {}, "finite"),
        (np.zeros((3, 4)), np.zeros((3, 4)), {"n_permutations": 0}, "n_permutations"),
    ],
)
def test_bad_inputs_are_named(x, y, kwargs, match):
    with pytest.raises(InputError, match=match):
        grouped_kendall(KEY, x, y, **kwargs)
