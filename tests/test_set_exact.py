"""SeT exact solver against a generic constrained solver (scipy SLSQP on the full ΔA), the NumPy
re-implementation of the original per-problem algorithm, and the constraints themselves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from reference_set_numpy import set_distance
from tolerances import f32_sum

from jaxassoc.errors import InputError
from jaxassoc.metrics.set_exact import project_logits, projection_delta, set_exact, set_from_logits, set_update


def _problem(seed, V, D, N, bias=True, scale=1.0):
    rng = np.random.default_rng(seed)
    W = (rng.normal(size=(V, D)) * scale).astype(np.float32)
    b = rng.normal(size=V).astype(np.float32) if bias else None
    X = rng.normal(size=(N, D)).astype(np.float32)
    gold = rng.integers(0, V, N)
    return W, b, X, gold


def _distance_tol(W, b, x, pool_size, distance):
    """Bounds on float32 SeT distances ‖δ‖ / ‖x̃‖: each logit z_i = A_i·x̃ is within f32_sum(D + 1,
    ‖A_i‖‖x̃‖ / (D + 1)) (Cauchy–Schwarz bounds its Σ|terms|); the shift δ = z - P(z) is 1-Lipschitz in z
    (P projects onto a convex set) and moves only the gold and the k pooled logits, ‖Δδ‖ ≤ √(k + 1)·max|Δz|,
    plus the pool mean's rounding (a mean of k + 1 logits); ‖x̃‖ rounds by f32_sum(D + 1, 1 / (D + 1))."""
    A = np.c_[W, b] if b is not None else W
    xt = np.c_[x, np.ones(len(x))] if b is not None else x
    n = A.shape[1]
    a_norm = float(np.linalg.norm(A.astype(np.float64), axis=1).max())
    x_norm = np.linalg.norm(xt.astype(np.float64), axis=1)
    k1 = np.asarray(pool_size) + 1
    z_max = a_norm * x_norm
    shift = np.sqrt(k1) * (f32_sum(n, a_norm * x_norm / n) + np.array([f32_sum(k, z / k) for k, z in zip(k1, z_max)]))
    return shift / x_norm + np.asarray(distance) * f32_sum(n, 1 / n)


def _slsqp_distance(W, b, x, gold, margin=1.0):
    """min ‖ΔA‖_F² over the whole V × (D+1) matrix, constraints written out one by one."""
    A = np.append(W, b[:, None], axis=1) if b is not None else W
    xt = np.append(x, 1.0) if b is not None else x
    V, Dt = A.shape
    others = [i for i in range(V) if i != gold]

    def logits(flat):
        return (A + flat.reshape(V, Dt)) @ xt

    def jac(i):
        g = np.zeros((V, Dt))
        g[gold], g[i] = xt, -xt
        return g.ravel()

    cons = [
        {"type": "ineq", "fun": lambda f, i=i: logits(f)[gold] - logits(f)[i] - margin, "jac": lambda f, i=i: jac(i)}
        for i in others
    ]
    res = scipy.optimize.minimize(
        lambda f: f @ f,
        np.zeros(V * Dt),
        jac=lambda f: 2 * f,
        constraints=cons,
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 500},
    )
    assert res.success, res.message
    return np.sqrt(res.fun)


@pytest.mark.parametrize("seed,bias", [(0, True), (1, True), (2, False), (3, False)])
def test_matches_generic_qp_solver_on_the_full_matrix(seed, bias):
    W, b, X, gold = _problem(seed, V=7, D=3, N=4, bias=bias, scale=2.0)
    ours = np.asarray(set_exact(W.astype(np.float64), None if b is None else b.astype(np.float64), X, gold).distance)
    ref = [
        _slsqp_distance(
            W.astype(np.float64), None if b is None else b.astype(np.float64), X[i].astype(np.float64), gold[i]
        )
        for i in range(4)
    ]
    # SLSQP (ftol 1e-12 on ‖ΔA‖², float64) is far more accurate than float32: _distance_tol (rtol=2e-4 had
    # been 100x looser); the pool of the optimum is at most V - 1
    res = set_exact(W, b, X, gold)
    assert np.all(np.abs(ours - ref) <= _distance_tol(W, b, X, res.pool_size, ref))


@pytest.mark.parametrize("seed,V,D,bias", [(0, 5000, 64, True), (1, 3000, 32, False), (2, 50, 8, True)])
def test_matches_the_original_per_problem_algorithm(seed, V, D, bias):
    W, b, X, gold = _problem(seed, V, D, N=24, bias=bias)
    ours = set_exact(W, b, X, gold, chunk=5)
    ref = [
        set_distance(
            W.astype(np.float64), None if b is None else b.astype(np.float64), X[i].astype(np.float64), int(gold[i])
        )
        for i in range(24)
    ]
    # float32 vs the float64 NumPy original
    assert np.all(np.abs(np.asarray(ours.distance) - ref) <= _distance_tol(W, b, X, ours.pool_size, ref))
    assert bool(ours.converged.all()) and bool(ours.feasible.all())
    assert int(ours.pool_size.min()) >= 1  # random gold tokens never win by the margin already


def test_update_satisfies_constraints_and_has_the_reported_norm():
    W, b, X, gold = _problem(4, V=800, D=16, N=3)
    res = set_exact(W, b, X, gold)
    # the updated logits in float64 from float32 W + ΔW: each within the rounding of A_i·x̃ and of ΔA's
    # entries (≤ u relative), 2·f32_sum(D + 1, ‖A_i‖‖x̃‖ / (D + 1)) (abs=1e-4 had been 50x that)
    n = W.shape[1] + 1
    a_norm = float(np.linalg.norm(np.c_[W, b], axis=1).max())
    for i in range(3):
        tol = 2 * f32_sum(n, a_norm * float(np.linalg.norm(np.r_[X[i], 1.0])) / n)
        dW, db = set_update(jnp.asarray(W), jnp.asarray(b), jnp.asarray(X[i]), int(gold[i]))
        z = np.asarray((W + dW) @ X[i] + (b + db), np.float64)
        others = np.delete(z, gold[i])
        assert z[gold[i]] - others.max() == pytest.approx(1.0, abs=tol)  # tight at the optimum
        # exactly pool_size competitors end on the boundary
        assert np.sum(np.isclose(z[gold[i]] - others, 1.0, rtol=0, atol=tol)) == int(res.pool_size[i])
        # the same δ: ‖δ x̃ᵀ‖ / ‖x̃‖² vs ‖δ‖ / ‖x̃‖, a few roundings per entry and two norms of ≤ V·(D + 1)
        # positive terms: ~1e-6 relative, rel=1e-5
        norm = np.sqrt(np.sum(np.asarray(dW, np.float64) ** 2) + np.sum(np.asarray(db, np.float64) ** 2))
        assert norm == pytest.approx(float(res.distance[i]), rel=1e-5)


def test_projection_is_optimal_against_projected_gradient():
    """KKT check by brute force: no feasible point near z is closer than the projection."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=30) * 3
    gold = 4
    delta = np.asarray(projection_delta(jnp.asarray(z), gold))
    zp = z + delta
    assert np.all(zp[gold] - np.delete(zp, gold) >= 1 - 1e-9)
    for _ in range(2000):  # random feasible points: never closer
        cand = zp + rng.normal(size=30) * 0.3
        cand[gold] = max(cand[gold], np.delete(cand, gold).max() + 1)
        assert np.linalg.norm(cand - z) >= np.linalg.norm(delta) - 1e-9


def test_gold_already_winning_costs_nothing_and_ties_pool_together():
    z = jnp.array([5.0, 1.0, 2.0, 3.5])
    p = project_logits(z, jnp.asarray(0))
    assert float(p.shift_norm) == 0.0 and int(p.pool_size) == 0
    # three competitors tied with the gold: all pool, mean (0 + 3·1)/4 = 0.75
    p = project_logits(jnp.zeros(4), jnp.asarray(2))
    assert int(p.pool_size) == 3
    assert float(p.pool_mean) == pytest.approx(0.75)
    assert float(p.shift_norm) == pytest.approx(np.sqrt(0.75**2 + 3 * 0.25**2))


def test_degenerate_zero_input_without_bias_is_infeasible():
    W, _, X, gold = _problem(6, V=20, D=4, N=3, bias=False)
    X[1] = 0.0
    res = jax.tree_util.tree_map(np.asarray, set_exact(W, None, X, gold))
    assert np.isinf(res.distance[1]) and not bool(res.feasible[1])
    assert np.isfinite(res.distance[[0, 2]]).all() and bool(res.feasible[[0, 2]].all())
    # with a bias column x̃ = [0; 1] ≠ 0: finite, equal to the bias-only problem's ‖δ‖
    b = np.random.default_rng(0).normal(size=20).astype(np.float32)
    res_b = set_exact(W, b, X, gold)
    assert bool(res_b.feasible[1]) and float(res_b.distance[1]) == pytest.approx(float(res_b.shift_norm[1]))
    # a one-token vocabulary has nothing to beat
    one = set_from_logits(jnp.zeros((1, 1)), jnp.zeros(1), jnp.zeros(1, int))
    assert float(one.distance[0]) == 0.0 and bool(one.feasible[0])


def test_gradient_matches_finite_differences_of_the_reference():
    W, b, X, gold = _problem(7, V=60, D=5, N=1)
    W64, b64, x64 = W.astype(np.float64), b.astype(np.float64), X[0].astype(np.float64)
    with jax.enable_x64(True):

        def f(x):
            return set_exact(jnp.asarray(W64), jnp.asarray(b64), x[None], jnp.asarray(gold)).distance[0]

        g = np.asarray(
            jax.grad(
                lambda x: set_from_logits(
                    (jnp.asarray(W64) @ x + jnp.asarray(b64))[None], (x @ x + 1.0)[None], jnp.asarray(gold)
                ).distance[0]
            )(jnp.asarray(x64))
        )
        assert float(f(jnp.asarray(x64))) == pytest.approx(set_distance(W64, b64, x64, int(gold[0])), rel=1e-10)
    eps = 1e-6
    fd = [
        (set_distance(W64, b64, x64 + eps * e, int(gold[0])) - set_distance(W64, b64, x64 - eps * e, int(gold[0])))
        / (2 * eps)
        for e in np.eye(5)
    ]
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


def test_chunking_does_not_change_results():
    W, b, X, gold = _problem(8, V=500, D=8, N=13)
    a, c = set_exact(W, b, X, gold, chunk=1), set_exact(W, b, X, gold, chunk=64)
    # chunks of 1 vs 64 are other programs: _distance_tol, absolute (rtol=1e-6 had been 1.5x the error of
    # a small distance here: the logits' rounding does not shrink with the distance)
    tol = _distance_tol(W, b, X, c.pool_size, c.distance)
    assert np.all(np.abs(np.asarray(a.distance) - np.asarray(c.distance)) <= tol)


def test_bad_inputs_raise_input_errors_naming_the_input():
    W, b, X, gold = _problem(9, V=10, D=4, N=2)
    with pytest.raises(InputError, match="outside the vocabulary of 10"):
        set_exact(W, b, X, np.array([3, 10]))
    with pytest.raises(InputError, match="bias b"):
        set_exact(W, b[:5], X, gold)
    with pytest.raises(InputError, match="head inputs x"):
        set_exact(W, b, X[:, :3], gold)
    with pytest.raises(InputError, match="one gold token id per context"):
        set_exact(W, b, X, gold[:1])
    with pytest.raises(InputError, match="integers"):
        set_exact(W, b, X, gold.astype(float))
    X[0, 0] = np.nan
    with pytest.raises(InputError, match="x has NaN"):
        set_exact(W, b, X, gold)
    with pytest.raises(InputError, match="margin"):
        set_exact(W, b, X[1:], gold[1:], margin=0.0)


# --- score transforms (jaxassoc.metrics.set_score) -------------------------------------------------
from reference_set_numpy import original_score, original_word_score  # noqa: E402

from jaxassoc.metrics.set_score import (  # noqa: E402
    median_over_synonyms,
    min_over_subwords,
    set_word_scores,
    transform_distance,
)


def test_log1m_transform_is_the_originals_including_nan_past_one():
    d = np.array([0.0, 0.3, 0.999, 1.0, 1.5])
    ours = np.asarray(transform_distance(jnp.asarray(d), "log1m"))
    ref = np.array([original_score(v) for v in d])
    # NaN and -inf in the same places; d rounds to float32 (u relative), which log(1 - d) amplifies by
    # d / (1 - d): f32_sum(1, 999) at 0.999 (rtol=1e-4 had allowed 6x that)
    below = d[d < 1]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=f32_sum(1, float(np.max(below / (1 - below)))))
    np.testing.assert_allclose(np.asarray(transform_distance(jnp.asarray(d))), -d, rtol=1e-6)  # d's rounding: u


def test_python_min_nan_quirk_matches_builtin_min_on_ragged_rows():
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(300):
        n = int(rng.integers(1, 5))
        vals = rng.normal(size=n)
        vals[rng.random(n) < 0.3] = np.nan
        rows.append(vals)
    S = 4
    scores = np.zeros((len(rows), S))
    valid = np.zeros((len(rows), S), bool)
    for i, r in enumerate(rows):
        scores[i, : len(r)], valid[i, : len(r)] = r, True
        scores[i, len(r) :] = -99.0  # padding must never win
    py = np.asarray(min_over_subwords(jnp.asarray(scores), jnp.asarray(valid), nan_policy="python"))
    ref = np.array([original_word_score(list(r)) for r in rows])
    np.testing.assert_array_equal(np.isnan(py), np.isnan(ref))
    np.testing.assert_allclose(py[~np.isnan(ref)], ref[~np.isnan(ref)], rtol=1e-6)  # float32 copies: u relative
    strict = np.asarray(min_over_subwords(jnp.asarray(scores), jnp.asarray(valid)))
    np.testing.assert_array_equal(np.isnan(strict), [bool(np.isnan(r).any()) for r in rows])
    # the two policies differ exactly where a later subword is NaN and the first is not
    later_nan = np.array([(not np.isnan(r[0])) and bool(np.isnan(r[1:]).any()) for r in rows])
    assert later_nan.any()
    np.testing.assert_array_equal(np.isnan(py) != np.isnan(strict), later_nan)


def test_median_over_ragged_synonyms_is_numpys():
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(200, 4))
    n = rng.integers(1, 5, 200)
    valid = np.arange(4)[None, :] < n[:, None]
    scores[rng.random((200, 4)) < 0.05] = np.nan
    ours = np.asarray(median_over_synonyms(jnp.asarray(scores), jnp.asarray(valid)))
    ref = np.array([np.median(scores[i, : n[i]]) for i in range(200)])
    # float32 copies (u relative) and a mean of the two middle values, whose sum can cancel: absolute
    # f32_sum(2, max|x|) (rtol=1e-6 would not hold for a median near 0)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=f32_sum(2, float(np.nanmax(np.abs(scores)))))
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))


def test_word_scores_take_the_largest_distance():
    d = jnp.array([[0.2, 0.7, 0.1], [0.4, 0.0, 0.0]])
    valid = jnp.array([[True, True, True], [True, False, False]])
    np.testing.assert_allclose(np.asarray(set_word_scores(d, valid)), [-0.7, -0.4])
    np.testing.assert_allclose(
        # float32 0.7 and 0.4 (u relative), 1 - d exact (Sterbenz), then the log: ~2e-7 relative
        np.asarray(set_word_scores(d, valid, transform="log1m", nan_policy="python")),
        np.log([0.3, 0.6]),
        rtol=1e-6,
    )
    with pytest.raises(Exception, match="transform"):
        set_word_scores(d, valid, transform="log")
