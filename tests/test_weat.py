"""WEAT / SC-WEAT kernels against independent references: WEFE's formula written out in float64
NumPy loops, itertools enumeration of the permutation p, and finite differences for the gradient."""

import dataclasses
import itertools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import f32_association, f32_cos, f32_effect_size, f32_sum

from jaxassoc.errors import InputError
from jaxassoc.metrics.weat import (
    association_test,
    associations,
    check_word_set,
    effect_size,
    sc_weat,
    sc_weat_effect_size,
    weat,
    weat_effect_size,
    weat_statistics,
)
from jaxassoc.stats import StatsOptions

SUITE = Path(__file__).resolve().parents[1] / "jaxassoc" / "data" / "files" / "weat" / "weat_caliskan2017.json"


def _cos(u, v):
    return float(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))


def _wefe_s(w, A, B):
    return np.mean([_cos(w, a) for a in A]) - np.mean([_cos(w, b) for b in B])


def _wefe(X, Y, A, B, ddof):
    """WEFE's WEAT._calc_weat / _calc_effect_size (np.std, i.e. ddof 0), re-typed independently."""
    sx = [_wefe_s(x, A, B) for x in X]
    sy = [_wefe_s(y, A, B) for y in Y]
    S = sum(sx) - sum(sy)
    d = (np.mean(sx) - np.mean(sy)) / np.std(sx + sy, ddof=ddof)
    return sx + sy, S, d


def _weat_tols(X, Y, A, B, s_ref, d_ref):
    """(each association, S, d) bounds of float32 WEAT statistics against float64 references: the
    associations within f32_association, S a sum of them (|s| ≤ 2), d by f32_effect_size."""
    s_tol = f32_association(X.shape[1], len(A), len(B))
    n = len(X) + len(Y)
    return s_tol, n * s_tol + f32_sum(n, 2.0), f32_effect_size(s_tol, s_ref, d_ref)


def _sets(seed, sizes=(6, 5, 4, 7), dim=8):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, dim)).astype(np.float32) for n in sizes]


@pytest.fixture(scope="module")
def glove_tests():
    from jaxassoc.embeddings.static import load_embedded_glove

    emb = load_embedded_glove()
    suite = json.loads(SUITE.read_text())
    return {tid: [emb.lookup(t[k]).vectors for k in "XYAB"] for tid, t in suite.items()}


@pytest.mark.parametrize("ddof", [0, 1])
def test_statistics_match_wefe_formula_on_random_sets(ddof):
    X, Y, A, B = _sets(0)  # |X| != |Y| on purpose
    s_ref, S_ref, d_ref = _wefe(*map(lambda a: a.astype(np.float64), (X, Y, A, B)), ddof)
    st = weat_statistics(X, Y, A, B, ddof=ddof)
    # the derived bounds (5e-6, 7e-5, 2e-4 relative here) had been above atol=2e-6, 1e-5, rtol=1e-5
    s_tol, S_tol, d_tol = _weat_tols(X, Y, A, B, s_ref, d_ref)
    np.testing.assert_allclose(st.associations, s_ref, rtol=0, atol=s_tol)
    np.testing.assert_allclose(st.S, S_ref, rtol=0, atol=S_tol)
    np.testing.assert_allclose(st.d, d_ref, rtol=0, atol=d_tol)


@pytest.mark.slow  # GloVe W1-W10: ~7 s (issue 38: the default suite's budget)
def test_statistics_match_wefe_on_glove_caliskan_suite(glove_tests):
    for tid, sets in glove_tests.items():
        s_ref, S_ref, d_ref = _wefe(*[v.astype(np.float64) for v in sets], ddof=0)
        st = weat_statistics(*sets, ddof=0)
        _, S_tol, d_tol = _weat_tols(*sets, s_ref, d_ref)
        np.testing.assert_allclose(st.S, S_ref, rtol=0, atol=S_tol, err_msg=tid)
        np.testing.assert_allclose(st.d, d_ref, rtol=0, atol=d_tol, err_msg=tid)
        # ddof 1 rescales d by sqrt((n-1)/n)
        n = sets[0].shape[0] + sets[1].shape[0]
        d1 = weat_statistics(*sets, ddof=1).d
        np.testing.assert_allclose(d1, d_ref * np.sqrt((n - 1) / n), rtol=0, atol=d_tol, err_msg=tid)


def test_glove_w10_raw_effect_size_matches_methods_md(glove_tests):
    # docs/methods.md §2: GloVe-50d W10 with `Billy` has d = 0.99 (0.68 with WEFE's `Bill`).
    assert float(weat_statistics(*glove_tests["W10"]).d) == pytest.approx(0.99, abs=0.005)


def test_sc_weat_matches_independent_formula():
    W, _, A, B = _sets(1)
    got = sc_weat_effect_size(W, A, B)
    for w, g in zip(W.astype(np.float64), np.asarray(got)):
        ca, cb = [_cos(w, a) for a in A], [_cos(w, b) for b in B]
        ref = (np.mean(ca) - np.mean(cb)) / np.std(ca + cb, ddof=1)
        # an effect size over the cosines, each within f32_cos(D)
        assert g == pytest.approx(ref, rel=0, abs=f32_effect_size(f32_cos(W.shape[1]), ca + cb, ref))


def _sc_weat_exact_p(w, A, B, alternative):
    """SC-WEAT's p by itertools enumeration of every re-partition of A ∪ B (float64, NumPy)."""
    c = np.array([_cos(w, v) for v in np.concatenate([A, B])])
    n_a = len(A)
    observed = c[:n_a].mean() - c[n_a:].mean()
    null = []
    for idx in itertools.combinations(range(len(c)), n_a):
        mask = np.zeros(len(c), bool)
        mask[list(idx)] = True
        null.append(c[mask].mean() - c[~mask].mean())
    null = np.array(null)
    greater, less = np.mean(null >= observed - 1e-12), np.mean(null <= observed + 1e-12)  # the observed one counts
    return {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}[alternative]


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
def test_sc_weat_p_matches_numpy_exact_enumeration(alternative):
    W, _, A, B = _sets(3, sizes=(5, 2, 4, 5))  # |A| != |B|: 126 partitions of A ∪ B
    got = sc_weat(jax.random.key(0), W, A, B, options=StatsOptions(alternative=alternative))
    assert bool(got.exact) and int(got.n_resamples) == 126
    # two float32 programs for the same effect sizes (|d| < 2): f32_effect_size over the cosines
    cosines = [[_cos(w, v) for v in np.concatenate([A, B])] for w in W.astype(np.float64)]
    tol = max(f32_effect_size(f32_cos(W.shape[1]), c, 2.0) for c in cosines)
    np.testing.assert_allclose(got.d, sc_weat_effect_size(W, A, B), rtol=0, atol=tol)
    ref = [_sc_weat_exact_p(w, A.astype(np.float64), B.astype(np.float64), alternative) for w in W.astype(np.float64)]
    # a share of 126 partitions: exact up to the float32 quotient (no re-partition ties the observed
    # difference within rounding here, which would move p by 1/126)
    np.testing.assert_allclose(got.p_value, ref, rtol=0, atol=f32_sum(1, 1.0))
    assert len(set(np.round(ref, 6))) > 1  # the words differ: not a constant p


def test_sc_weat_monte_carlo_p_estimates_the_exact_p():
    W, _, A, B = _sets(4, sizes=(3, 2, 5, 5))
    exact = sc_weat(jax.random.key(1), W, A, B)
    drawn = sc_weat(jax.random.key(1), W, A, B, options=StatsOptions(exact_bound=0, n_permutations=20_000))
    assert not bool(drawn.exact) and int(drawn.n_resamples) == 20_000
    # sampling, not rounding: 20,000 draws, p's binomial SD ≤ 0.5 / √20,000 = 0.0035; 0.015 is 4.2 SDs
    np.testing.assert_allclose(drawn.p_value, exact.p_value, atol=0.015)
    again = sc_weat(jax.random.key(1), W, A, B, options=StatsOptions(exact_bound=0, n_permutations=20_000))
    np.testing.assert_array_equal(drawn.p_value, again.p_value)  # explicit key: reproducible


def test_sc_weat_refuses_a_word_in_both_attribute_sets():
    W, _, A, B = _sets(5, sizes=(2, 2, 2, 2))
    with pytest.raises(InputError, match="'war' is in both 'A' and 'B'"):
        sc_weat(jax.random.key(0), W, A, B, words=(["x", "y"], ["war", "peace"], ["war", "hate"]))


def test_vmap_over_tests_of_equal_shape():
    tests = [_sets(s, sizes=(5, 5, 4, 4)) for s in range(3)]
    stacked = [jnp.stack([t[i] for t in tests]) for i in range(4)]
    batched = jax.vmap(weat_effect_size)(*stacked)
    looped = [weat_effect_size(*t) for t in tests]
    # vmapped vs looped float32 (another program): f32_effect_size of each test's associations (rtol=1e-6
    # had been below it)
    tol = max(
        f32_effect_size(f32_association(t[0].shape[1], len(t[2]), len(t[3])), associations(t[0], t[2], t[3]), 2.0)
        for t in tests
    )
    np.testing.assert_allclose(batched, looped, rtol=0, atol=tol)


def test_gradient_of_d_matches_finite_differences():
    with jax.enable_x64(True):
        X, Y, A, B = (jnp.asarray(v, dtype=jnp.float64) for v in _sets(2))
        grads = jax.grad(weat_effect_size, argnums=(0, 1, 2, 3))(X, Y, A, B)
        rng = np.random.default_rng(3)
        h = 1e-6
        for arg, grad in enumerate(grads):
            for _ in range(3):
                i, j = rng.integers(0, grad.shape[0]), rng.integers(0, grad.shape[1])
                plus, minus = [list((X, Y, A, B)) for _ in range(2)]
                plus[arg] = plus[arg].at[i, j].add(h)
                minus[arg] = minus[arg].at[i, j].add(-h)
                fd = (weat_effect_size(*plus) - weat_effect_size(*minus)) / (2 * h)
                # float64: the central difference's truncation h²·f‴/6 ~ 1e-12, its rounding eps64·|d|/h ~ 1e-10
                assert float(grad[i, j]) == pytest.approx(float(fd), rel=1e-5, abs=1e-8)


def test_associations_are_invariant_to_vector_scale():
    X, _, A, B = _sets(4)
    # X * 3 rounds (B * 0.5 is exact): other float32 cosines, each association within f32_association
    tol = f32_association(X.shape[1], len(A), len(B))
    np.testing.assert_allclose(associations(X * 3.0, A, B * 0.5), associations(X, A, B), rtol=0, atol=tol)


@pytest.mark.parametrize(
    "vectors, words, match",
    [
        (np.zeros((0, 4)), [], "'X' has 0 word"),
        (np.ones((1, 4)), ["solo"], "'X' has 1 word"),
        (np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]]), ["ok", "broken"], r"NaN.*'broken'"),
        (np.array([[1.0, 0, 0, 0], [0.0, 0, 0, 0]]), ["ok", "empty"], r"zero vectors.*'empty'"),
        (np.ones(4), None, "matrix"),
    ],
)
def test_check_word_set_rejects_bad_sets(vectors, words, match):
    with pytest.raises(InputError, match=match):
        check_word_set("X", vectors, words)


def test_mismatched_dimensions_are_refused():
    X, Y, A, B = _sets(5)
    with pytest.raises(InputError, match=r"'B' has 5-d vectors but the other sets have 8-d"):
        weat(jax.random.key(0), X, Y, A, B[:, :5])


def test_single_word_set_is_refused_by_weat_with_its_name():
    X, Y, A, B = _sets(6)
    with pytest.raises(InputError, match="'Pleasant' has 1 word"):
        weat(jax.random.key(0), X, Y, A[:1], B, names=("X", "Y", "Pleasant", "Unpleasant"))


def _itertools_p(s, n_x):
    """One-sided exact permutation p: share of equal-size re-partitions with S_i >= S (the observed one counted)."""
    s = np.asarray(s, dtype=np.float64)
    observed = s[:n_x].sum() - s[n_x:].sum()
    total = s.sum()
    count = n = 0
    for idx in itertools.combinations(range(len(s)), n_x):
        sx = s[list(idx)].sum()
        count += (sx - (total - sx)) >= observed - 1e-9
        n += 1
    return count / n, n


@pytest.mark.parametrize("sizes", [(5, 5, 4, 4), (6, 4, 3, 5)])
def test_exact_permutation_p_matches_itertools(sizes):
    X, Y, A, B = _sets(7, sizes=sizes)
    # shift X towards A so the p-value is not trivially 0.5
    X = X + 0.3 * (A.mean(axis=0) - B.mean(axis=0))
    res = weat(jax.random.key(1), X, Y, A, B, options=StatsOptions(n_bootstrap=200, alternative="greater"))
    st = weat_statistics(X, Y, A, B)
    p_ref, n_ref = _itertools_p(st.associations, sizes[0])
    assert bool(res.exact)
    assert int(res.n_resamples) == n_ref
    assert float(res.p_value) == pytest.approx(p_ref, abs=1e-6)  # a float32 share of the partitions: ~u
    tol = f32_effect_size(f32_association(X.shape[1], len(A), len(B)), st.associations, float(st.d))
    assert float(res.d) == pytest.approx(float(st.d), rel=0, abs=tol)  # another program
    assert float(res.ci_low) <= float(res.d) <= float(res.ci_high)


def test_monte_carlo_p_is_reported_and_close_to_exact():
    X, Y, A, B = _sets(8, sizes=(7, 7, 5, 5))
    X = X + 0.2 * A.mean(axis=0)
    exact = weat(jax.random.key(2), X, Y, A, B, options=StatsOptions(n_bootstrap=200))
    mc = weat(
        jax.random.key(2), X, Y, A, B, options=StatsOptions(exact_bound=10, n_permutations=20_000, n_bootstrap=200)
    )
    assert bool(exact.exact) and not bool(mc.exact)
    assert int(mc.n_resamples) == 20_000
    # 20,000 draws: the MC p is within 4 binomial SDs of the exact one
    sd = np.sqrt(float(exact.p_value) * (1 - float(exact.p_value)) / 20_000)
    assert abs(float(mc.p_value) - float(exact.p_value)) <= 4 * sd + 1e-4


def test_change_classes():
    from jaxassoc.suites.weat import change_class

    assert change_class(0.01, 0.02) == "Stable"
    assert change_class(0.01, 0.2) == "Disappearing"
    assert change_class(0.2, 0.01) == "Emerging"
    assert change_class(0.2, 0.3) == "Not significant"
    assert change_class(0.05, 0.049) == "Emerging"  # p < alpha, strictly


@pytest.mark.slow  # GloVe W1-W10 with whitening and figures: ~11 s (issue 38: the default suite's budget)
def test_weat_experiment_on_glove_with_whitening_and_figures(tmp_path, glove_tests):
    from jaxassoc.app.tasks.weat import plot_cosine_heatmaps, plot_effect_size_heatmap, plot_raw_vs_whitened
    from jaxassoc.data import load_weat_suite
    from jaxassoc.embeddings.static import load_embedded_glove
    from jaxassoc.embeddings.whitening import fit_zca, reference_sample
    from jaxassoc.suites.weat import run_anisotropy, run_weat_experiment

    emb = load_embedded_glove()
    ref = reference_sample(emb, max_items=3000, seed=0)
    zca = fit_zca(ref.vectors)
    full = load_weat_suite("weat_caliskan2017")
    suite = dataclasses.replace(full, tests=tuple(full.test(t) for t in ("W1", "W4", "W6", "W9")))
    frame = run_weat_experiment(
        emb, suite, key=jax.random.key(0), whitening=zca, whitening_description=ref.description,
        options=StatsOptions(n_permutations=2000, n_bootstrap=200),
    )  # fmt: skip
    assert list(frame.test) == ["W1", "W4", "W6", "W9"]
    # W1 loses `gladiola` (not in GloVe 6B): reported, not silently dropped
    assert frame.loc[0, "lost_words"] == "gladiola" and frame.loc[0, "n_x"] == 24
    assert frame.loc[0, "coverage"] == pytest.approx(99 / 100)
    for i, tid in enumerate(frame.test):
        st = weat_statistics(*glove_tests[tid])
        X, Y, A, B = glove_tests[tid]  # the same float32 kernel through the app (another program)
        tol = f32_effect_size(f32_association(X.shape[1], len(A), len(B)), st.associations, float(st.d))
        assert frame.loc[i, "d_raw"] == pytest.approx(float(st.d), rel=0, abs=tol)
    # 8 + 8 targets: C(16, 8) = 12,870 partitions, enumerated (also 6 + 6); 24 + 25 and 16 + 16: Monte Carlo
    assert frame.p_exact_raw.tolist() == [False, False, True, True]
    assert frame.p_resamples_raw.tolist() == [2000, 2000, 12_870, 924]
    assert set(frame.change) <= {"Stable", "Disappearing", "Emerging", "Not significant"}
    assert (frame.whitening == ref.description).all()
    aniso = run_anisotropy(jax.random.key(1), ref.vectors, zca, n_samples=500)
    assert aniso["mean_raw"] > aniso["mean_whitened"] and abs(aniso["mean_whitened"]) < 0.05
    results = {"GloVe-50d": frame, "GloVe-50d (copy)": frame}
    for path in (
        plot_effect_size_heatmap(results, tmp_path / "fig3.png"),
        plot_raw_vs_whitened(results, tmp_path / "fig4.png"),
        plot_cosine_heatmaps(jax.random.key(2), ref.vectors, zca, tmp_path / "fig1.png", n_samples=300),
    ):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- issue 25 item 14: extreme but valid float32 magnitudes, the older PRNG key -----------------------------


def _four_sets(seed=0, n=5, dim=8):
    rng = np.random.default_rng(seed)
    x, y, a, b = (rng.normal(size=(n, dim)).astype(np.float32) for _ in range(4))
    return x + 0.5 * (a.mean(0) - b.mean(0)), y, a, b


@pytest.mark.parametrize("scale", [1e20, 3e37, 1e-20, 1e-30])
def test_weat_and_sc_weat_are_scale_invariant_at_extreme_magnitudes(scale):
    """Cosine is scale-invariant: ||x||^2 overflowing (1e20) or underflowing (1e-20) float32 must not turn
    d into NaN ("constant s"), a wrong sign, or a "zero vectors" refusal of non-zero vectors."""
    x, y, a, b = _four_sets()
    kw = dict(options=StatsOptions(exact_bound=10**6, n_bootstrap=50))
    base = weat(jax.random.key(0), x, y, a, b, **kw)
    scaled = (np.float32(scale) * v for v in (x, y, a, b))
    every = weat(jax.random.key(0), *scaled, **kw)
    one = weat(jax.random.key(0), np.float32(scale) * x, y, a, b, **kw)  # one set rescaled, the others not
    # the rescaled vectors round (relative u): other float32 cosines, so _weat_tols for d and S; p is a
    # share of the partitions, exact up to the quotient (a tie within rounding would move it by 1/252)
    s = weat_statistics(x, y, a, b).associations
    _, S_tol, d_tol = _weat_tols(x, y, a, b, s, float(base.d))
    for res in (every, one):
        assert bool(res.defined)
        np.testing.assert_allclose(res.d, base.d, rtol=0, atol=d_tol)
        np.testing.assert_allclose(res.S, base.S, rtol=0, atol=S_tol)
        np.testing.assert_allclose(res.p_value, base.p_value, rtol=0, atol=f32_sum(1, 1.0))
    d_w = sc_weat(jax.random.key(0), np.float32(scale) * x, a, b).d
    cosines = [[float(v @ u / np.linalg.norm(v) / np.linalg.norm(u)) for u in np.concatenate([a, b])] for v in x]
    tol = max(f32_effect_size(f32_cos(x.shape[1]), c, 2.0) for c in cosines)  # |d| < 2
    np.testing.assert_allclose(d_w, sc_weat(jax.random.key(0), x, a, b).d, rtol=0, atol=tol)


def test_weat_refuses_float64_beyond_float32_and_subnormal_vectors_by_word():
    x, y, a, b = _four_sets()
    words = (list("abcde"), list("fghij"), list("klmno"), list("pqrst"))
    with pytest.raises(InputError, match=r"word set 'X': NaN or infinite \(beyond ±3.4e\+38\) vectors for \['a'\]"):
        weat(jax.random.key(0), np.vstack([x[:1].astype(np.float64) * 1e39, x[1:]]), y, a, b, words=words)
    with pytest.raises(InputError, match=r"word set 'A': zero vectors .*below 1.18e-38 count as 0\) for \['k'\]"):
        weat(jax.random.key(0), x, y, np.vstack([a[:1] * 1e-40, a[1:]]), b, words=words)


@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_association_test_is_scale_invariant_in_its_scores(scale):
    """A user metric's scores s of any finite magnitude: d's std must neither overflow (CI [0, 0]) nor
    underflow (s called constant, p NaN)."""
    s = np.random.default_rng(0).normal(size=12).astype(np.float32) + np.r_[np.ones(6), np.zeros(6)]
    base = association_test(jax.random.key(0), s, 6, options=StatsOptions(n_bootstrap=200))
    res = association_test(jax.random.key(0), np.float32(scale) * s, 6, options=StatsOptions(n_bootstrap=200))
    assert bool(res.defined)
    # the rescaled scores round (relative u each: f32_sum(1, max|s|) in the base's units); p is a share of
    # the permutations, exact up to the quotient; the CI ends are resampled effect sizes, each within
    # (2 + |d|)·s_tol / sd of its resample: ~1e-6 relative for resample SDs ≥ half the sample's, rtol=1e-5
    s_tol = f32_sum(1, float(np.abs(s).max()))
    np.testing.assert_allclose(res.p_value, base.p_value, rtol=0, atol=f32_sum(1, 1.0))
    np.testing.assert_array_equal(res[1:3], base[1:3])
    np.testing.assert_allclose(res[3:5], base[3:5], rtol=1e-5)
    d = float(effect_size(s[:6], s[6:]))
    assert float(effect_size(s[:6] * np.float32(scale), s[6:] * np.float32(scale))) == pytest.approx(
        d, rel=0, abs=f32_effect_size(s_tol, s, d)
    )


def test_weat_takes_the_older_prng_key_with_the_same_result():
    x, y, a, b = _four_sets(n=8)  # 12,870 partitions: Monte Carlo below, so the key matters
    kw = dict(options=StatsOptions(exact_bound=100, n_permutations=200, n_bootstrap=100))
    typed = weat(jax.random.key(3), x, y, a, b, **kw)
    raw = weat(jax.random.PRNGKey(3), x, y, a, b, **kw)
    np.testing.assert_array_equal(raw, typed)
    with pytest.raises(
        InputError, match=r"weat: key must be one PRNG key.*got an array of shape \(2,\) and dtype int32"
    ):
        weat(np.zeros(2, np.int32), x, y, a, b, **kw)
