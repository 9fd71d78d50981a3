"""RPAM kernels vs a plain NumPy transcription of Hodel et al. 2026 (§4 Eq. 1-2, App. E), plus gradients.

The reference computes each quantity with explicit loops in float64: softmax over C of the first-token
logits, times the App. E continuation factor; s(t, A, B) = mean_A p - mean_B p; d = (mean_X s - mean_Y s)
/ std_{X∪Y} s with the given ddof; Valence = s(t, P, U).
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import f32_effect_size, f32_sum

from jaxassoc.metrics import rpam
from jaxassoc.stats import StatsOptions

T_X, T_Y, N_A, N_B = 5, 4, 3, 4


def _data(seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, (T_X + T_Y, N_A + N_B))
    continuation = np.where(rng.random(logits.shape) < 0.3, rng.uniform(0.05, 1, logits.shape), 1.0)
    log_partition = np.log(np.exp(logits).sum(1) + rng.uniform(1, 50, T_X + T_Y))  # the rest of V
    return logits, continuation, log_partition


def _p_rtol(logits, log_partition=None):
    """Relative float32 error of p: the logit's (or log-partition's) own rounding through exp, f32_sum(1,
    max|z|), the sum over the C candidates (f32_sum(C, 1 / C), positive terms), and ~3 more roundings (exp,
    the division, the continuation factor)."""
    z = np.abs(logits).max() if log_partition is None else max(np.abs(logits).max(), np.abs(log_partition).max())
    return f32_sum(1, float(z)) + f32_sum(logits.shape[1], 1 / logits.shape[1]) + f32_sum(3, 1.0)


def _s_tol(p, n_a, p_rtol=0.0):
    """Absolute error of s = mean_A p - mean_B p: each p within p_rtol (plus its float32 copy, u), then two
    means of values ≤ max p and the subtraction."""
    top = float(np.abs(p).max())
    n_b = p.shape[1] - n_a
    return (p_rtol + f32_sum(1, 1.0)) * top + f32_sum(n_a, top / n_a) + f32_sum(n_b, top / n_b)


def _p_ref(logits, continuation, log_partition=None):
    p = np.zeros_like(logits)
    for t in range(logits.shape[0]):
        for v in range(logits.shape[1]):
            if log_partition is None:
                first = np.exp(logits[t, v]) / sum(np.exp(z) for z in logits[t])
            else:
                first = np.exp(logits[t, v]) / np.exp(log_partition[t])
            p[t, v] = first * continuation[t, v]
    return p


def _s_ref(p, n_a):
    return np.array([np.mean(row[:n_a]) - np.mean(row[n_a:]) for row in p])


def _d_ref(s, n_x, ddof):
    return (np.mean(s[:n_x]) - np.mean(s[n_x:])) / np.std(s, ddof=ddof)


def test_relative_probabilities_softmax_over_c():
    logits, cont, _ = _data()
    got = rpam.relative_probabilities(jnp.asarray(logits), jnp.asarray(cont))
    # _p_rtol = 2.5e-6 here (rtol=1e-5 had been 4x that)
    np.testing.assert_allclose(got, _p_ref(logits, cont), rtol=_p_rtol(logits))
    single = rpam.relative_probabilities(jnp.asarray(logits))
    # each p within _p_rtol, then a float32 sum of C of them
    tol = _p_rtol(logits) + f32_sum(logits.shape[1], 1 / logits.shape[1])
    np.testing.assert_allclose(np.asarray(single).sum(1), 1.0, rtol=tol)


def test_continuation_factor_is_the_mean_of_subword_probabilities():
    """App. E: p(v) = softmax_C first-token prob x mean over subwords 2..k of their vocabulary probs."""
    logits, _, _ = _data(1)
    sub_probs = {(0, 2): [0.5, 0.1], (3, 5): [0.9, 0.3, 0.6]}  # (target, attribute) -> subwords 2..k
    cont = np.ones_like(logits)
    for key, probs in sub_probs.items():
        cont[key] = sum(probs) / len(probs)
    p = np.asarray(rpam.relative_probabilities(jnp.asarray(logits), jnp.asarray(cont)))
    for (t, v), probs in sub_probs.items():
        softmax = np.exp(logits[t, v]) / np.exp(logits[t]).sum()
        assert p[t, v] == pytest.approx(softmax * np.mean(probs), rel=_p_rtol(logits))


def test_ablation_without_normalisation():
    logits, cont, lse = _data(2)
    got = rpam.relative_probabilities(jnp.asarray(logits), jnp.asarray(cont), jnp.asarray(lse), normalise=False)
    np.testing.assert_allclose(got, _p_ref(logits, cont, lse), rtol=_p_rtol(logits, lse))
    assert np.asarray(got).sum(1).max() < 1  # not normalised over C
    with pytest.raises(ValueError, match="log_partition"):
        rpam.relative_probabilities(jnp.asarray(logits), normalise=False)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("normalise", [True, False])
def test_association_scores_and_effect_size(ddof, normalise):
    logits, cont, lse = _data(3)
    p_ref = _p_ref(logits, cont, None if normalise else lse)
    s_ref = _s_ref(p_ref, N_A)
    s = rpam.association_scores(jnp.asarray(p_ref), n_a=N_A)
    # absolute: s cancels (rtol=1e-5 with atol=1e-9 would not hold for an s near 0)
    np.testing.assert_allclose(s, s_ref, rtol=0, atol=_s_tol(p_ref, N_A))
    d = rpam.rpam_effect_size(
        jnp.asarray(logits), jnp.asarray(cont), jnp.asarray(lse), n_x=T_X, n_a=N_A, ddof=ddof, normalise=normalise
    )
    # from the logits: p within _p_rtol, s within _s_tol, d by f32_effect_size (rel=1e-4 had been just
    # below the derived 1.1e-4 relative)
    s_tol = _s_tol(p_ref, N_A, _p_rtol(logits, None if normalise else lse))
    d_ref = _d_ref(s_ref, T_X, ddof)
    assert float(d) == pytest.approx(d_ref, rel=0, abs=f32_effect_size(s_tol, s_ref, d_ref))


def test_unequal_attribute_and_target_sizes():
    logits, cont, _ = _data(4)
    for n_a in (1, 2, 6):
        p = _p_ref(logits, cont)
        np.testing.assert_allclose(
            rpam.association_scores(jnp.asarray(p), n_a=n_a), _s_ref(p, n_a), rtol=0, atol=_s_tol(p, n_a)
        )


def test_valence_is_s_with_pleasant_first():
    logits, cont, _ = _data(5)
    p = _p_ref(logits, cont)
    np.testing.assert_allclose(
        rpam.rpam_valence(jnp.asarray(p), n_pleasant=N_A), _s_ref(p, N_A), rtol=0, atol=_s_tol(p, N_A)
    )


def test_rpam_test_exact_p_by_enumeration():
    """The permutation p-value over all equal-size splits of X ∪ Y (itertools), one-sided, >= (the observed
    split counted)."""
    logits, cont, _ = _data(6)
    p = _p_ref(logits, cont)
    s = _s_ref(p, N_A)
    res = rpam.rpam_test(
        jax.random.key(0),
        jnp.asarray(p),
        n_x=T_X,
        n_a=N_A,
        options=StatsOptions(n_bootstrap=200, alternative="greater"),
    )
    observed = s[:T_X].sum() - s[T_X:].sum()
    stats_ = [s[list(idx)].sum() - (s.sum() - s[list(idx)].sum()) for idx in itertools.combinations(range(len(s)), T_X)]
    assert bool(res.exact)
    # a share of the 126 splits, exact up to the float32 quotient (no split ties the observed one here)
    assert float(res.p_value) == pytest.approx(np.mean(np.array(stats_) >= observed - 1e-12), rel=1e-6)
    s_tol = _s_tol(p, N_A)
    assert float(res.d) == pytest.approx(_d_ref(s, T_X, 1), rel=0, abs=f32_effect_size(s_tol, s, _d_ref(s, T_X, 1)))
    assert float(res.ci_low) <= float(res.d) <= float(res.ci_high)
    np.testing.assert_allclose(res.associations, s, rtol=0, atol=s_tol)


def _finite_difference(f, x, eps=1e-3):
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        grad[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


@pytest.mark.parametrize("normalise", [True, False])
def test_grad_wrt_first_token_logits(normalise):
    logits, cont, lse = _data(7)

    def d_numpy(z):
        return _d_ref(_s_ref(_p_ref(z, cont, None if normalise else lse), N_A), T_X, 1)

    with jax.enable_x64():
        grad = jax.grad(
            lambda z: rpam.rpam_effect_size(
                z, jnp.asarray(cont), jnp.asarray(lse), n_x=T_X, n_a=N_A, normalise=normalise
            )
        )(jnp.asarray(logits))
    # float64: the central difference (eps 1e-3) is off by eps²/6·|d‴| ~ 1e-7 relative and its rounding
    # by eps64·|d|/eps ~ 1e-13: rtol=1e-5, atol=1e-7
    np.testing.assert_allclose(grad, _finite_difference(d_numpy, logits), rtol=1e-5, atol=1e-7)


def test_grad_wrt_head_matrix():
    """d through a tiny linear model: first-token logits = h_t @ W[c].T for the attributes' first tokens."""
    rng = np.random.default_rng(8)
    D, V = 6, 20
    hidden = rng.normal(size=(T_X + T_Y, D))
    W = rng.normal(size=(V, D))
    first_ids = np.array([3, 7, 1, 12, 5, 19, 8])
    cont = _data(8)[1]

    def d_numpy(w):
        return _d_ref(_s_ref(_p_ref(hidden @ w[first_ids].T, cont), N_A), T_X, 1)

    def d_jax(w):
        logits = (jnp.asarray(hidden) @ w.T)[:, first_ids]
        return rpam.rpam_effect_size(logits, jnp.asarray(cont), n_x=T_X, n_a=N_A)

    with jax.enable_x64():
        grad = np.asarray(jax.grad(d_jax)(jnp.asarray(W)))
    np.testing.assert_allclose(grad, _finite_difference(d_numpy, W), rtol=1e-5, atol=1e-7)  # as above
    unused = np.setdiff1d(np.arange(V), first_ids)
    assert np.all(grad[unused] == 0) and np.abs(grad[first_ids]).min() > 0
