"""CEAT against a plain NumPy/SciPy loop written like the original (scipy cosine, np.std ddof 1, the
DerSimonian–Laird formulas with Q = Σw e² − (Σw e)²/Σw) fed the same random draws, and DL by hand."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from scipy.spatial import distance
from tolerances import f32_association, f32_cos, f32_effect_size, f32_sum

from jaxassoc.errors import InputError
from jaxassoc.metrics.ceat import (
    ContextualSet,
    ceat,
    ceat_single_group,
    draw_indices,
    pad_contexts,
    random_effects,
)


def _sets(seed, sizes=(5, 6, 4, 4), dim=8, max_ctx=7):
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        per_word = [rng.normal(size=(int(rng.integers(1, max_ctx + 1)), dim)) + 0.5 for _ in range(n)]
        out.append(per_word)
    return out


def _ref_dl(es, v):
    es, v = np.asarray(es, np.float64), np.asarray(v, np.float64)
    w = 1 / v
    q = np.sum(w * es**2) - np.sum(w * es) ** 2 / np.sum(w)
    df = len(es) - 1
    tau2 = (q - df) / (np.sum(w) - np.sum(w**2) / np.sum(w)) if q > df else 0.0
    ws = 1 / (v + tau2)
    ces = np.sum(ws * es) / np.sum(ws)
    var = 1 / np.sum(ws)
    return ces, var, tau2, scipy.stats.norm.sf(ces / np.sqrt(var))


def _assoc(w, A, B):
    return np.mean([1 - distance.cosine(w, a) for a in A]) - np.mean([1 - distance.cosine(w, b) for b in B])


def test_ceat_matches_the_original_style_loop_on_the_same_draws():
    raw = _sets(0)
    sets = [pad_contexts(s) for s in raw]
    key = jax.random.key(3)
    n = 300
    res = ceat(key, *sets, n_draws=n, chunk=128, alternative="greater")
    keys = jax.random.split(key, 4)  # the draws ceat made
    idx = [np.asarray(draw_indices(k, s.counts, n)) for k, s in zip(keys, sets)]
    es_ref, v_ref, es_tol, v_tol = [], [], [], []
    s_tol = f32_association(raw[0][0].shape[1], len(raw[2]), len(raw[3]))
    for d in range(n):
        X, Y, A, B = ([words[w][idx[s][d, w]] for w in range(len(words))] for s, words in enumerate(raw))
        sx = [_assoc(w, A, B) for w in X]
        sy = [_assoc(w, A, B) for w in Y]
        std = np.std(sx + sy, ddof=1)
        es_ref.append((np.mean(sx) - np.mean(sy)) / std)
        v_ref.append(std**2)
        # each draw is a WEAT on float32 vectors: f32_effect_size; its variance std² moves by 2·std·δstd
        m = len(sx) + len(sy)
        es_tol.append(f32_effect_size(s_tol, sx + sy, es_ref[-1]))
        v_tol.append(2 * std * (s_tol * np.sqrt(m / (m - 1)) + std * f32_sum(m, 1 / m)))
    # (rtol=1e-4 with atol=1e-5 had been close to these, ~1e-5 to 1e-4; per draw now)
    assert np.all(np.abs(np.asarray(res.effect_sizes) - es_ref) <= es_tol)
    assert np.all(np.abs(np.asarray(res.variances) - v_ref) <= v_tol)
    ces, var, tau2, p = _ref_dl(es_ref, v_ref)
    c = res.combined
    # DerSimonian–Laird from those: CES is a weighted mean of the draws' e (within es_tol) with weights
    # 1 / (v + τ²) (within ~v_tol / v relative), plus a float32 sum of 300; it cancels (CES = -0.03 from
    # e in [-1.4, 1.6]), so absolute (rel=1e-4 had asked 2.7e-6). Q ~ 15·df: τ² = (Q - df) / c barely
    # cancels, its and the variance's ~1e-5 relative errors sit well inside rel=1e-3 and 1e-4; p = Φ(-z)
    # with z = CES / sd ~ -0.75 moves by φ(z)·δCES / sd ~ 1e-4 relative: rel=1e-3
    e_max = float(np.abs(es_ref).max())
    ces_tol = max(es_tol) + 2 * e_max * max(np.asarray(v_tol) / np.asarray(v_ref)) + f32_sum(n, e_max / n)
    assert float(c.ces) == pytest.approx(ces, rel=0, abs=ces_tol)
    assert float(c.variance) == pytest.approx(var, rel=1e-4)
    assert float(c.tau_squared) == pytest.approx(tau2, rel=1e-3, abs=1e-7)
    assert float(c.p_value) == pytest.approx(p, rel=1e-3, abs=1e-7)
    again = ceat(key, *sets, n_draws=n, chunk=7, alternative="greater")  # same key, other chunking: same numbers
    # other chunks are other programs: within es_tol of each other twice over (rtol=1e-5 had been below it)
    assert np.all(np.abs(np.asarray(again.effect_sizes) - np.asarray(res.effect_sizes)) <= 2 * np.asarray(es_tol))


def test_dersimonian_laird_by_hand():
    es, v = [0.2, 0.9, 1.6], [0.04, 0.05, 0.08]
    w = [25.0, 20.0, 12.5]
    sw = 57.5
    fixed = (25 * 0.2 + 20 * 0.9 + 12.5 * 1.6) / sw
    q = sum(wi * (e - fixed) ** 2 for wi, e in zip(w, es))
    c = sw - (625 + 400 + 156.25) / sw
    tau2 = (q - 2) / c
    ws = [1 / (vi + tau2) for vi in v]
    ces = sum(a * e for a, e in zip(ws, es)) / sum(ws)
    var = 1 / sum(ws)
    p = 0.5 * math.erfc(ces / math.sqrt(var) / math.sqrt(2))
    got = random_effects(jnp.array(es), jnp.array(v), alternative="greater")
    assert q > 2  # heterogeneous: τ² > 0
    # float32 on 3 draws: ~30 roundings of values ≤ 60 whose relative errors add (~4e-6), τ²'s Q - 2 cancels
    # (Q ~ 17: x1.13): rel=1e-5
    for ours, ref in zip(got, (ces, var, tau2, p)):
        assert float(ours) == pytest.approx(ref, rel=1e-5)
    # homogeneous draws: Q < df, τ² = 0 and CES is the fixed-effect mean
    homo = random_effects(jnp.array([0.5, 0.51, 0.49]), jnp.array([1.0, 1.0, 1.0]), alternative="greater")
    assert float(homo.tau_squared) == 0.0
    assert float(homo.ces) == pytest.approx(0.5, rel=1e-6)  # float32 0.51, 0.49 and a mean of 3: a few u
    assert float(homo.variance) == pytest.approx(1 / 3, rel=1e-6)  # 1 / 3 rounds once


def test_single_group_variant_matches_a_loop():
    raw = _sets(1, sizes=(1, 5, 6))
    sets = [pad_contexts(s) for s in raw]
    key = jax.random.key(0)
    res = ceat_single_group(key, *sets, n_draws=50)
    idx = [np.asarray(draw_indices(k, s.counts, 50)) for k, s in zip(jax.random.split(key, 3), sets)]
    es_ref, es_tol = [], 0.0
    for d in range(50):
        G, A, B = ([words[w][idx[s][d, w]] for w in range(len(words))] for s, words in enumerate(raw))
        g = G[0]
        ca = [1 - distance.cosine(g, a) for a in A]
        cb = [1 - distance.cosine(g, b) for b in B]
        es_ref.append((np.mean(ca) - np.mean(cb)) / np.std(ca + cb, ddof=1))
        es_tol = max(es_tol, f32_effect_size(f32_cos(g.shape[0]), ca + cb, es_ref[-1]))
    # an effect size over float32 cosines per draw (rtol=1e-4 and atol=1e-5 had been close to it)
    np.testing.assert_allclose(np.asarray(res.effect_sizes), es_ref, rtol=0, atol=es_tol)


def test_draws_are_uniform_over_each_words_contexts():
    counts = jnp.array([1, 3, 5])
    idx = np.asarray(draw_indices(jax.random.key(1), counts, 30_000))
    assert (idx[:, 0] == 0).all()
    for w, c in enumerate([3, 5]):
        freq = np.bincount(idx[:, w + 1], minlength=c) / 30_000
        assert freq.shape == (c,)
        # sampling: a share of 30,000 uniform draws has SD √(p(1 - p) / 30,000) ≤ 0.0029; 0.015 is 5 SDs
        np.testing.assert_allclose(freq, 1 / c, atol=0.015)


def test_bad_sets_raise_input_errors():
    good = pad_contexts([np.ones((2, 4)), np.ones((1, 4)) * 2])
    key = jax.random.key(0)
    with pytest.raises(InputError, match="counts"):
        ceat(key, ContextualSet(good.vectors, jnp.array([0, 1])), good, good, good)
    with pytest.raises(InputError, match="zero vectors"):
        ceat(key, ContextualSet(jnp.zeros((2, 2, 4)), jnp.array([1, 1])), good, good, good)
    with pytest.raises(InputError, match="3-d vectors, the other sets 4-d"):
        ceat(key, good, pad_contexts([np.ones((1, 3)), np.ones((1, 3))]), good, good)
    with pytest.raises(InputError, match="at least 2 draws"):
        ceat(key, good, good, good, good, n_draws=1)
    with pytest.raises(InputError, match="same dim"):
        pad_contexts([np.ones((1, 3)), np.ones((2, 4))])


@pytest.mark.parametrize("scale", [1e20, 1e-30])
def test_ceat_is_scale_invariant_and_named_keys_only(scale):
    """Issue 25 item 14: contexts at extreme float32 magnitudes were refused as "infinite or zero vectors"
    (their float32 norm overflows or underflows); the cosine is scale-invariant, so CEAT must not change."""
    sets = _sets(3)
    base = ceat(jax.random.key(0), *(pad_contexts(s) for s in sets), n_draws=50)
    scaled = ceat(jax.random.key(0), *(pad_contexts([v * scale for v in s]) for s in sets), n_draws=50)
    # the rescaled vectors round (u relative): other float32 cosines, each association within s_tol, each
    # draw's d = Δmean / sd by f32_effect_size's terms with its own sd = √variance (|s| ≤ 2, m scores);
    # CES, a weighted mean of the draws' d, by the largest plus its weights' errors (rtol=1e-4 had been
    # below it for the small d)
    s_tol = f32_association(sets[0][0].shape[1], len(sets[2]), len(sets[3]))
    m = len(sets[0]) + len(sets[1])
    sd, e = np.sqrt(np.asarray(base.variances)), np.abs(np.asarray(base.effect_sizes))
    e_tol = (2 * (s_tol + f32_sum(m, 2 / m)) + e * (s_tol * np.sqrt(m / (m - 1)) + sd * f32_sum(m, 1 / m))) / sd
    assert np.all(np.abs(np.asarray(scaled.effect_sizes) - np.asarray(base.effect_sizes)) <= e_tol)
    v_rtol = 2 * (s_tol * np.sqrt(m / (m - 1)) + sd * f32_sum(m, 1 / m)) / sd  # the weights' variances
    ces_tol = float(e_tol.max() + 2 * e.max() * v_rtol.max())
    np.testing.assert_allclose(scaled.combined.ces, base.combined.ces, rtol=0, atol=ces_tol)
    with pytest.raises(InputError, match=r"ceat: key must be one PRNG key.*got 0"):
        ceat(0, *(pad_contexts(s) for s in sets), n_draws=50)
