"""Holm and Benjamini–Hochberg adjustments against NumPy loops written from the papers' definitions."""

import itertools

import numpy as np
import pytest

from jaxassoc.stats import multiple


def holm_loop(p):
    """Holm (1979): reject H_(i) while p_(i) <= alpha / (m - i + 1); the adjusted p is the smallest alpha
    at which H_i is rejected, max over j <= i of (m - j + 1) p_(j)."""
    m, order = len(p), np.argsort(p, kind="stable")
    out = np.empty(m)
    for i, k in enumerate(order):
        out[k] = min(1.0, max((m - j) * p[order[j]] for j in range(i + 1)))
    return out


def bh_loop(p):
    """Benjamini & Hochberg (1995): q_(i) = min over j >= i of m p_(j) / j."""
    m, order = len(p), np.argsort(p, kind="stable")
    out = np.empty(m)
    for i, k in enumerate(order):
        out[k] = min(1.0, min(m * p[order[j]] / (j + 1) for j in range(i, m)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_holm_and_bh_match_the_definitions(seed):
    p = np.random.default_rng(seed).uniform(0, 0.2, size=12) ** 2
    np.testing.assert_allclose(multiple.holm(p), holm_loop(p), rtol=1e-12)
    np.testing.assert_allclose(multiple.benjamini_hochberg(p), bh_loop(p), rtol=1e-12)


def test_a_worked_example():
    p = [0.01, 0.04, 0.03, 0.005]
    np.testing.assert_allclose(multiple.holm(p), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(multiple.benjamini_hochberg(p), [0.02, 0.04, 0.04, 0.02])


def test_adjusted_p_never_falls_below_p_and_keeps_the_order():
    p = np.array([0.2, 0.001, 0.5, 0.049, 0.049, 1.0])
    for method in ("holm", "bh"):
        q = multiple.adjust(p, method)
        assert (q >= p - 1e-15).all() and (q <= 1).all()
        for i, j in itertools.permutations(range(len(p)), 2):
            if p[i] < p[j]:
                assert q[i] <= q[j]


def test_undefined_tests_stay_undefined_and_do_not_count():
    p = np.array([0.01, np.nan, 0.02])
    np.testing.assert_allclose(multiple.holm(p), [0.02, np.nan, 0.02])
    np.testing.assert_allclose(multiple.benjamini_hochberg(p), [0.02, np.nan, 0.02])
    assert np.isnan(multiple.holm([np.nan])).all()


def test_unknown_method_is_named():
    with pytest.raises(ValueError, match="'sidak'"):
        multiple.adjust([0.1], "sidak")
