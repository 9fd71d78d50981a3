"""ZCA whitening against a float64 NumPy reference, its defining properties, save/load, anisotropy."""

import warnings

import jax
import numpy as np
import pytest
from tolerances import f32_cos, f32_sum

from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.embeddings.whitening import (
    apply_zca,
    corpus_word_types,
    fit_zca,
    load_zca,
    reference_sample,
    save_zca,
)
from jaxassoc.errors import DataError, InputError
from jaxassoc.metrics.anisotropy import anisotropy, explained_variance_ratio, pairwise_cosine


def _anisotropic(n=3000, dim=12, seed=0):
    rng = np.random.default_rng(seed)
    scales = np.geomspace(5.0, 0.05, dim)
    return (rng.normal(size=(n, dim)) * scales + 3.0).astype(np.float32)


def test_fit_matches_numpy_float64_reference():
    x = _anisotropic()
    stats = fit_zca(x, eps=1e-3)
    x64 = x.astype(np.float64)
    cov = np.cov(x64, rowvar=False, ddof=1)
    lam, U = np.linalg.eigh(cov)
    W = U @ np.diag((lam + 1e-3) ** -0.5) @ U.T
    n, dim = x.shape
    # a float32 mean of n values: f32_sum(n, mean|x|) / n (rtol=1e-5 had been below it)
    np.testing.assert_allclose(stats.mean, x64.mean(0), rtol=0, atol=f32_sum(n, float(np.abs(x64).mean(0).max())) / n)
    # the covariance's entries round relatively (centred sums of n products: f32_sum(n, 1 / n)), which moves
    # the eigenvalues of this graded, well-correlated sample relatively; float32 eigh adds an absolute
    # backward error ~ u·‖C‖ per sweep over dim: f32_sum(dim, λ_max / dim) (atol=1e-6 had been below it for
    # the smallest, 0.0025; rtol=1e-3 70x above the relative part)
    np.testing.assert_allclose(
        stats.eigenvalues, lam[::-1], rtol=f32_sum(n, 1 / n), atol=f32_sum(dim, float(lam.max()) / dim)
    )
    # W's entries along the smallest eigenvalue move by δλ / (2(λ + eps)) ~ 3e-3 relative, and eigenvectors
    # of neighbouring eigenvalues (ratio 2.3) rotate by ~u‖C‖ / gap ~ 5e-4: rtol and atol 2e-3
    np.testing.assert_allclose(stats.W, W, rtol=2e-3, atol=2e-3)
    # ZCA: symmetric; W_ij and W_ji add the same dim terms U_ik d_k U_jk in other orders, Σ_k|terms| ≤
    # √(W_ii W_jj) (Cauchy–Schwarz, d_k > 0)
    tol = f32_sum(dim, float(np.abs(np.diag(stats.W)).max()) / dim)
    np.testing.assert_allclose(stats.W, np.asarray(stats.W).T, rtol=0, atol=tol)


def test_whitened_sample_has_near_identity_covariance():
    x = _anisotropic()
    stats = fit_zca(x, eps=0.0)
    z = np.asarray(apply_zca(stats, x), dtype=np.float64)
    # exact in exact arithmetic (the same sample): z's mean is the fitted mean's rounding (5e-5, above) times
    # W's row sums (~17): ~1e-3; its covariance W C Wᵀ deviates from I by 2‖ΔW W⁻¹‖, the relative errors of
    # W along each eigenvector (test above): ~5e-3
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-3)
    np.testing.assert_allclose(np.cov(z, rowvar=False), np.eye(x.shape[1]), atol=5e-3)
    # with eps > 0 each direction's variance is lambda / (lambda + eps)
    stats = fit_zca(x, eps=1e-3)
    z = np.asarray(apply_zca(stats, x), dtype=np.float64)
    lam = np.asarray(stats.eigenvalues, dtype=np.float64)
    np.testing.assert_allclose(
        np.sort(np.linalg.eigvalsh(np.cov(z, rowvar=False)))[::-1], lam / (lam + 1e-3), rtol=5e-3
    )


def test_apply_accepts_a_single_vector_and_checks_dimension():
    x = _anisotropic()
    stats = fit_zca(x)
    # one row vs a batch: dots of 12 terms whose |terms| add up to ≤ ‖W_i‖‖x - mean‖
    bound = float(np.abs(np.asarray(stats.W)).max()) * float(np.abs(x[:5] - np.asarray(stats.mean)).max())
    tol = f32_sum(x.shape[1], bound)
    np.testing.assert_allclose(apply_zca(stats, x[3]), apply_zca(stats, x[:5])[3], rtol=0, atol=tol)
    with pytest.raises(InputError, match="fitted on 12-d vectors but got 7-d"):
        apply_zca(stats, x[:, :7])


def test_fewer_samples_than_dims_warns_and_stays_finite():
    x = _anisotropic(n=5, dim=12)
    with pytest.warns(UserWarning, match="5 vectors for 12 dimensions"):
        stats = fit_zca(x, eps=1e-3)
    assert np.isfinite(np.asarray(stats.W)).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_zca(_anisotropic(n=50, dim=12))


def test_bad_samples_are_refused():
    with pytest.raises(InputError, match="NaN"):
        fit_zca(np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 2.0]]))
    with pytest.raises(InputError, match="samples >= 2"):
        fit_zca(np.ones((1, 3)))


def test_save_load_roundtrip(tmp_path):
    stats = fit_zca(_anisotropic())
    meta = {"model": "toy", "sample": "3000 gaussian rows, seed 0", "eps": 1e-3}
    path = save_zca(stats, tmp_path / "sub" / "zca.npz", metadata=meta)
    loaded, loaded_meta = load_zca(path)
    for a, b in zip(stats, loaded):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert loaded_meta == meta
    with pytest.raises(DataError, match="does not exist"):
        load_zca(tmp_path / "missing.npz")
    np.savez(tmp_path / "other.npz", x=np.ones(3))
    with pytest.raises(DataError, match="not a ZCA statistics file"):
        load_zca(tmp_path / "other.npz")


def test_corpus_word_types_and_reference_sample():
    tokens = "The cat @-@ sat , 12 <unk> the cat's dog The".split()
    assert corpus_word_types(tokens) == ["The", "cat", "sat", "the", "dog"]
    words = ["the", "cat", "sat", "dog", "emu", "fox"]
    emb = StaticEmbeddings(words, np.eye(6, dtype=np.float32), lowercase=True)
    ref = reference_sample(emb, word_types=corpus_word_types(tokens), corpus_name="toy")
    assert ref.words == ["the", "cat", "sat", "dog"]  # "The"/"the" share a row: one item
    assert "word types of toy" in ref.description and "seed 0" in ref.description
    uni = reference_sample(emb, max_items=3, seed=7)
    assert len(uni.words) == 3 and "uniform sample" in uni.description
    assert uni.words == reference_sample(emb, max_items=3, seed=7).words


def test_anisotropy_matches_numpy_and_whitening_reduces_it():
    x = _anisotropic(n=400)
    res = pairwise_cosine(x)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    cos = (u @ u.T)[np.triu_indices(400, k=1)]
    # each cosine within f32_cos(12), then a mean of the m pairs' cosines (≤ 1): abs=1e-5 had been below it
    m = cos.size
    tol = f32_cos(x.shape[1]) + f32_sum(m, 1 / m)
    assert float(res.mean) == pytest.approx(cos.mean(), rel=0, abs=tol)
    assert float(res.sd) == pytest.approx(cos.std(), rel=0, abs=2 * tol)  # a norm of the centred cosines
    white = apply_zca(fit_zca(x), x)
    after = anisotropy(jax.random.key(0), white, n_samples=300)
    assert float(res.mean) > 0.5 and abs(float(after.mean)) < 0.02


def test_explained_variance_ratio():
    x = _anisotropic()
    ratio = np.asarray(explained_variance_ratio(x))
    lam = np.linalg.eigvalsh(np.cov(x.astype(np.float64), rowvar=False))[::-1]
    # the eigenvalues' errors (test_fit_matches_numpy_float64_reference) over their sum
    n, dim = x.shape
    tol = f32_sum(dim, float(lam.max()) / dim) / float(lam.sum())
    np.testing.assert_allclose(ratio, lam / lam.sum(), rtol=f32_sum(n, 1 / n), atol=tol)
    flat = np.asarray(explained_variance_ratio(apply_zca(fit_zca(x, eps=0.0), x)))
    # the whitened covariance is I up to ~5e-3 (test_whitened_sample_has_near_identity_covariance): its
    # eigenvalues share 1/12 each up to ~1e-2 relative
    np.testing.assert_allclose(flat, 1 / 12, rtol=0.02)


@pytest.mark.parametrize("cut", [0, 10, 0.5, -10])
def test_truncated_zca_file_is_a_data_error_naming_it(tmp_path, cut):
    path = save_zca(fit_zca(_anisotropic()), tmp_path / "zca.npz", metadata={"model": "toy"})
    data = path.read_bytes()
    path.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    with pytest.raises(
        DataError,
        match=r"zca\.npz is not a ZCA statistics file written by save_zca: it is "
        r"truncated or corrupt.*fit and save the statistics again",
    ):
        load_zca(path)


def test_zca_file_with_inconsistent_shapes_or_nan_is_refused(tmp_path):
    stats = fit_zca(_anisotropic())
    D = stats.mean.shape[0]
    np.savez(
        tmp_path / "shapes.npz",
        mean=np.zeros(D),
        W=np.zeros((D, D + 1)),
        eigenvalues=np.ones(D),
        metadata=np.array("{}"),
    )
    with pytest.raises(DataError, match=rf"shapes\.npz .*W \({D}, {D + 1}\), eigenvalues \({D},\) \(expected"):
        load_zca(tmp_path / "shapes.npz")
    np.savez(
        tmp_path / "nan.npz", mean=np.full(D, np.nan), W=np.eye(D), eigenvalues=np.ones(D), metadata=np.array("{}")
    )
    with pytest.raises(DataError, match=r"nan\.npz: the ZCA statistics hold NaN"):
        load_zca(tmp_path / "nan.npz")


@pytest.mark.parametrize("scale", [1e20, 1e-25])
def test_anisotropy_and_spectrum_are_scale_invariant(scale):
    """Issue 25 item 14: cosines and the explained-variance ratio were NaN (or 0) once squares of the
    entries overflowed or underflowed float32; both are scale-invariant."""
    x = _anisotropic(n=200)
    base = pairwise_cosine(x)
    # x * scale rounds (u relative): other float32 cosines, f32_cos(12) + a mean of 19,900 of them
    # (f32_sum(19900, 1 / 19900)): 4e-5 absolute, 6e-5 relative to the mean 0.73 (the sd likewise)
    np.testing.assert_allclose(pairwise_cosine(x * np.float32(scale)), base, rtol=1e-4)
    np.testing.assert_allclose(
        anisotropy(jax.random.PRNGKey(1), x * np.float32(scale), n_samples=100),
        anisotropy(jax.random.key(1), x, n_samples=100),
        rtol=1e-4,
    )
    ratio = explained_variance_ratio(x * np.float32(scale))
    # the covariance of the rescaled rows rounds relatively (f32_sum(200, 1 / 200) = 3.4e-5), which moves
    # these graded eigenvalues relatively: rtol=1e-4; eigh's absolute part, f32_sum(dim, max ratio / dim), on
    # the smallest ratios (atol=1e-7 had been below it)
    base_ratio = np.asarray(explained_variance_ratio(x))
    tol = f32_sum(x.shape[1], float(base_ratio.max()) / x.shape[1])
    np.testing.assert_allclose(ratio, base_ratio, rtol=1e-4, atol=tol)


def test_zca_fit_whose_covariance_overflows_float32_is_refused():
    """ZCA with eps is not scale-invariant, and at entries of 1e20 its covariance overflows: NaN W before."""
    x = _anisotropic(n=200)
    with pytest.raises(InputError, match=r"ZCA reference sample: its covariance overflows float32 \(largest entry"):
        fit_zca(x * np.float32(1e20))
