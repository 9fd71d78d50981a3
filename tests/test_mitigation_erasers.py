"""Linear concept erasers (``jaxassoc.mitigation``, docs/methods.md §11): LEACE against the concept-erasure
package, its guarantees, INLP against a NumPy/SciPy loop, SentenceDebias against NumPy PCA, and an eraser at a
site equal to transformers with a forward hook applying the same map."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs import TINY, load_torch
from tolerances import EPS32, f32_chain

from jaxassoc.errors import InputError, ModelError
from jaxassoc.mitigation import as_edit, fit_inlp, fit_leace, fit_sentence_debias, stack
from jaxassoc.mitigation.inlp import classifier_loss, train_classifier
from jaxassoc.mitigation.leace import _constrain_trace
from jaxassoc.models import interventions as iv
from jaxassoc.models import load_model

LEACE_TOL = 1e-5
"""The issue's bound, relative to the states' scale max|x| (the package fitted in float64 is the reference;
our float32 fit differs by ~5e-7 of the scale on these data)."""


def _concept_data(seed: int, n: int = 1500, d: int = 24, k: int = 2, outlier: float = 40.0):
    """States with a k-class concept in a few directions, correlated features and one outlier dimension (as
    real LM states have), float32."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, k, n)
    mix = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
    x = rng.normal(size=(n, d)) @ mix + rng.normal(size=(k, d))[z]
    x[:, 3] *= outlier
    return x.astype(np.float32), z


def _package(x, z, k, **kw):
    import torch
    from concept_erasure import LeaceEraser

    onehot = torch.nn.functional.one_hot(torch.tensor(z), k).double()
    return LeaceEraser.fit(torch.tensor(x, dtype=torch.float64), onehot, **kw)


@pytest.mark.parametrize(
    "seed, k, options",
    [
        (0, 2, {}),
        (1, 3, {}),
        (2, 2, {"method": "orth"}),
        (3, 4, {"shrinkage": False}),
        (4, 3, {"constrain_trace": False}),
        (5, 2, {"affine": False}),
        (6, 3, {"svd_tol": 0.5}),
    ],
)
def test_leace_equals_the_concept_erasure_package(seed, k, options):
    import torch

    x, z = _concept_data(seed, k=k)
    theirs_kw = {("constrain_cov_trace" if a == "constrain_trace" else a): b for a, b in options.items()}
    ref = _package(x, z, k, **theirs_kw)
    ours = fit_leace(x, z, **options)
    expected = ref(torch.tensor(x, dtype=torch.float64)).numpy()
    scale = np.abs(x).max()
    assert np.abs(np.asarray(ours(jnp.asarray(x))) - expected).max() <= LEACE_TOL * scale
    onehot = np.eye(k, dtype=np.float32)[z]  # the same fit from one-hot labels
    assert np.abs(np.asarray(fit_leace(x, onehot, **options)(jnp.asarray(x))) - expected).max() <= LEACE_TOL * scale


def test_leace_on_real_states_equals_the_package(tiny_checkpoint):
    """States of a (tiny, random) GPT-2's layer 1 over random tokens, the concept: whether token 5 is in the
    sequence."""
    import torch

    model = load_model(tiny_checkpoint(TINY["gpt2"]))
    rng = np.random.default_rng(0)
    ids = rng.integers(3, model.head.W.shape[0], (120, 9))
    z = (ids == 5).any(axis=1).astype(np.int64)
    ids[z == 1, 4] = 5  # a visible concept
    z = (ids == 5).any(axis=1).astype(np.int64)
    out = iv.run(model, jnp.asarray(ids, jnp.int32), jnp.ones(ids.shape, jnp.int32), read=["layers.1.resid_post"])
    x = np.asarray(out.sites["layers.1.resid_post"]).reshape(-1, ids.shape[1] * 0 + out.hidden.shape[-1])
    zz = np.repeat(z, ids.shape[1])
    ref = _package(x, zz, 2)
    expected = ref(torch.tensor(x, dtype=torch.float64)).numpy()
    assert np.abs(np.asarray(fit_leace(x, zz)(jnp.asarray(x))) - expected).max() <= LEACE_TOL * np.abs(x).max()


@pytest.mark.parametrize("k", [2, 3, 5])
def test_leace_guarantees(k):
    """Idempotent (without the trace blend), rank <= k - 1, the mean kept, the class means made equal, and the
    best L2 logistic probe of the erased states has no weights (so it is at the majority rate)."""
    x, z = _concept_data(10 + k, k=k)
    eraser = fit_leace(x, z, constrain_trace=False)
    erased = np.asarray(eraser(jnp.asarray(x)), np.float64)
    scale = np.abs(x).max()
    d = x.shape[1]
    # each step a float32 sum of d products of the scale
    assert np.abs(np.asarray(eraser(jnp.asarray(erased, jnp.float32))) - erased).max() <= 1e-5 * scale
    assert eraser.rank() <= k - 1
    assert np.abs(erased.mean(0) - x.mean(0, dtype=np.float64)).max() <= 1e-5 * scale
    means = np.stack([erased[z == c].mean(0) for c in range(k)])
    assert np.abs(means - means.mean(0)).max() <= 1e-5 * scale
    before = np.stack([x[z == c].mean(0) for c in range(k)])
    assert np.abs(before - before.mean(0)).max() > 0.1  # there was a concept to erase
    y = jnp.asarray(np.eye(k, dtype=np.float32)[z])
    scaled = jnp.asarray(erased / np.sqrt((erased**2).sum(1).mean()), jnp.float32)
    w, b = train_classifier(scaled, y, "logistic", 1e-3, 100)
    w_before, _ = train_classifier(jnp.asarray(x / np.sqrt((x**2).sum(1).mean())), y, "logistic", 1e-3, 100)
    assert float(jnp.abs(w).max()) <= 1e-3 * float(jnp.abs(w_before).max())
    accuracy = float(jnp.mean(jnp.argmax(scaled @ w + b, 1) == z))
    assert accuracy == pytest.approx(np.bincount(z).max() / len(z), abs=1 / len(z)) and d > k


def test_the_trace_constraint_blends_toward_the_orthogonal_projection_like_the_package():
    """``_constrain_trace`` given an edit that raises the states' variance returns the package's blend of it
    with ``I - U Uᵀ`` (its quadratic, transcribed here in NumPy float64), whose variance is the original's."""
    rng = np.random.default_rng(0)
    d, k = 6, 2
    a = rng.normal(size=(d, d))
    sigma = a @ a.T + np.eye(d)
    cross = rng.normal(size=(d, k))
    w = np.linalg.inv(np.linalg.cholesky(sigma)).T  # any whitening: only U = orth(W Σxz) matters below
    evals, evecs = np.linalg.eigh(sigma)
    w = evecs @ np.diag(evals**-0.5) @ evecs.T
    s2, basis = np.linalg.eigh(cross.T @ w @ w @ cross)
    inv_s = 1 / np.sqrt(s2)
    u = w @ cross @ basis * inv_s
    down, up = rng.normal(size=(d, k)) * 3, rng.normal(size=(k, d))  # an arbitrary edit that inflates
    p = np.eye(d) - (down @ up).T
    q = np.eye(d) - u @ u.T
    new, old = np.trace(p @ sigma @ p.T), np.trace(sigma)
    assert new > old
    y, zq = 2 * np.trace(p @ sigma @ q.T), np.trace(q @ sigma @ q.T)
    discr = np.sqrt(4 * old * new - 4 * old * y + 4 * old * zq - 4 * new * zq + y**2)
    roots = [(-y / 2 + zq - discr / 2) / (new - y + zq), (-y / 2 + zq + discr / 2) / (new - y + zq)]
    alpha = np.clip(roots[0] if roots[0] > 0 else roots[1], 0, 1)
    expected = np.eye(d) - (alpha * p + (1 - alpha) * q)
    f32 = lambda t: jnp.asarray(t, jnp.float32)  # noqa: E731
    d2, u2 = _constrain_trace(f32(sigma), f32(cross), f32(basis), f32(inv_s), f32(down), f32(up))
    got = np.asarray(d2 @ u2, np.float64).T
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()
    blended = np.eye(d) - got
    assert np.trace(blended @ sigma @ blended.T) == pytest.approx(old, rel=1e-4)


def _inlp_reference(x, z, iterations, l2):
    """Ravfogel et al.'s loop in NumPy float64 with SciPy's L-BFGS on the same objective (softmax regression,
    mean cross-entropy + l2/2 |W|²), classes sorted, states scaled by their rms row norm."""
    from scipy.optimize import minimize

    x = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).sum(1).mean())
    k = len(np.unique(z))
    y = np.eye(k)[np.searchsorted(np.unique(z), z)]
    n, d = x.shape
    basis = np.zeros((d, 0))

    def objective(theta, features):
        w, b = theta[: d * k].reshape(d, k), theta[d * k :]
        s = features @ w + b
        s = s - s.max(1, keepdims=True)
        logp = s - np.log(np.exp(s).sum(1, keepdims=True))
        p = np.exp(logp)
        loss = -(y * logp).sum(1).mean() + l2 / 2 * (w * w).sum()
        g = (p - y) / n
        return loss, np.concatenate([(features.T @ g + l2 * w).ravel(), g.sum(0)])

    for _ in range(iterations):
        features = x - x @ basis @ basis.T
        theta = minimize(objective, np.zeros(d * k + k), args=(features,), jac=True, method="L-BFGS-B",
                         options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000}).x  # fmt: skip
        w = theta[: d * k].reshape(d, k)
        w = w - w.mean(1, keepdims=True)
        w = w - basis @ (basis.T @ w)
        q, r = np.linalg.qr(w)
        keep = np.abs(np.diag(r)) > 1e-6 * np.abs(r).max()
        basis = np.concatenate([basis, q[:, keep]], axis=1)
    return basis @ basis.T


@pytest.mark.parametrize("k", [2, 3])
def test_inlp_equals_a_numpy_loop(k):
    x, z = _concept_data(20 + k, n=600, d=12, k=k, outlier=5.0)
    ours = fit_inlp(x, z, iterations=3, l2=1e-2, steps=200)
    expected = _inlp_reference(x, z, 3, 1e-2)
    # both solvers converge to the unique optimum of a strictly convex objective; float32 L-BFGS stops where the
    # gradient is at float32 noise, which moves a unit direction by ~sqrt(EPS32)
    assert np.abs(np.asarray(ours.matrix()) - expected).max() <= 30 * np.sqrt(EPS32)
    assert ours.rank() == 3 * (k - 1)


def test_inlp_options_change_the_result_or_stop_it():
    x, z = _concept_data(30, n=500, d=12, outlier=5.0)
    base, acc = fit_inlp(x, z, iterations=4, with_accuracies=True)
    assert base.rank() == 4 and acc[0] > 0.9
    assert fit_inlp(x, z, iterations=2).rank() == 2
    stopped, acc2 = fit_inlp(x, z, iterations=4, min_accuracy=float(acc[1]), with_accuracies=True)
    assert stopped.rank() == 1 and np.isnan(np.asarray(acc2[1:])).all()
    for other in (dict(classifier="svm"), dict(l2=1.0), dict(steps=2)):
        assert np.abs(np.asarray(fit_inlp(x, z, iterations=4, **other).matrix() - base.matrix())).max() > 1e-3, other
    erased = np.asarray(base(jnp.asarray(x)))
    w, b = train_classifier(jnp.asarray(erased / np.sqrt((erased**2).sum(1).mean())), jnp.asarray(np.eye(2)[z],
                            jnp.float32), "logistic", 1e-3, 100)  # fmt: skip
    assert float(classifier_loss((w, b), jnp.asarray(erased), jnp.asarray(np.eye(2)[z]), "logistic", 0.0)) > 0.6


def test_sentence_debias_equals_numpy_pca():
    rng = np.random.default_rng(0)
    n, m, d = 80, 3, 16
    direction = rng.normal(size=(m, d))
    states = (
        rng.normal(size=(n, 1, d)) + direction[None] * rng.normal(size=(n, 1, 1)) + 0.1 * rng.normal(size=(n, m, d))
    )
    states = states.astype(np.float32)
    for k in (1, 2):
        ours = fit_sentence_debias(states, k=k)
        centred = (states - states.mean(1, keepdims=True)).reshape(-1, d).astype(np.float64)
        centred -= centred.mean(0)
        evals, evecs = np.linalg.eigh(centred.T @ centred)
        v = evecs[:, ::-1][:, :k]
        assert np.abs(np.asarray(ours.matrix()) - v @ v.T).max() <= 1e-5
        erased = np.asarray(ours(jnp.asarray(states.reshape(-1, d))))
        assert np.abs(erased @ v).max() <= 1e-5 * np.abs(states).max() * d


def test_an_eraser_at_a_site_equals_transformers_with_a_hook(tiny_checkpoint):
    """GPT-2: erasers at every block's output (``layers.*.resid_post``) and at ``final_norm``, bound into the model,
    equal forward hooks applying the same maps to transformers' blocks and ``ln_f``; cached decoding too."""
    import torch

    model = load_model(tiny_checkpoint(TINY["gpt2"]))
    ref = load_torch(TINY["gpt2"], tiny_checkpoint("gpt2"))
    d = model.head.W.shape[1]
    L = iv.layer_count(model.params["body"])
    erasers = [fit_leace(*_concept_data(40 + i, n=300, d=d, outlier=1.0)) for i in range(L + 1)]
    edited = model.with_edits({"layers.*.resid_post": as_edit(stack(erasers[:L])), "final_norm": as_edit(erasers[L])})
    rng = np.random.default_rng(1)
    ids = rng.integers(3, model.head.W.shape[0], (3, 7))
    mask = np.ones(ids.shape, np.int32)
    ours = np.asarray(iv.run(edited, jnp.asarray(ids, jnp.int32), jnp.asarray(mask)).logits)

    def torch_map(e):
        mean, m = torch.tensor(np.asarray(e.mean)), torch.tensor(np.asarray(e.matrix()))
        return lambda h: h - (h - mean) @ m

    maps = [torch_map(e) for e in erasers]
    hooks = [ref.transformer.h[i].register_forward_hook(lambda _, __, o, f=maps[i]: (f(o[0]), *o[1:]) if
             isinstance(o, tuple) else f(o)) for i in range(L)]  # fmt: skip
    hooks.append(ref.transformer.ln_f.register_forward_hook(lambda _, __, o: maps[L](o)))
    with torch.inference_mode():
        theirs = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    for h in hooks:
        h.remove()
    with torch.inference_mode():
        plain = ref(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
    assert np.abs(ours - theirs).max() <= f32_chain(2 * L + 2, 128, np.abs(theirs).max())
    assert np.abs(theirs - plain).max() > 1e-2  # the erasers mattered
    # cached decoding applies the bound erasers too: its states equal the edited model's full pass
    full = edited.forward(edited.params["body"], jnp.asarray(ids, jnp.int32), jnp.asarray(mask)).hidden
    cache = edited.decoder.init_cache(ids.shape[0], ids.shape[1])
    cached, _ = edited.decoder.forward_cached(edited.params["body"], jnp.asarray(ids, jnp.int32), jnp.asarray(mask),
                                              cache, 0)  # fmt: skip
    assert np.abs(np.asarray(cached) - np.asarray(full)).max() <= f32_chain(2 * L + 1, 128, np.abs(full).max())


def test_bad_inputs_are_refused_by_name(tiny_checkpoint):
    x, z = _concept_data(50, n=100, d=8)
    with pytest.raises(InputError, match="one class only"):
        fit_leace(x, np.zeros(100, np.int64))
    bad = x.copy()
    bad[7, 2] = np.nan
    with pytest.raises(InputError, match="row 7"):
        fit_leace(bad, z)
    with pytest.raises(InputError, match="n = 100"):
        fit_inlp(x, z[:50])
    with pytest.raises(InputError, match="integer classes"):
        fit_leace(x, z.astype(np.float32))
    with pytest.raises(InputError, match="singular"):
        fit_leace(x[:6], np.array([0, 1] * 3), shrinkage=False)
    assert fit_leace(x[:6], np.array([0, 1] * 3)).width == 8  # fewer rows than dimensions: shrinkage copes
    with pytest.raises(InputError, match="method"):
        fit_leace(x, z, method="pca")
    with pytest.raises(InputError, match="classifier"):
        fit_inlp(x, z, classifier="tree")
    with pytest.raises(InputError, match="variants"):
        fit_sentence_debias(x)
    model = load_model(tiny_checkpoint(TINY["gpt2"]))
    with pytest.raises(ModelError, match="final_norm"):
        model.with_edits({"final_norm": as_edit(fit_leace(x, z))})  # width 8, not the model's
    with pytest.raises(ModelError, match="layers.9"):
        model.with_edits({"layers.9.resid_post": as_edit(fit_leace(x, z))})
    with pytest.raises(InputError, match="one width"):
        stack([fit_leace(x, z), fit_leace(x[:, :4], z)])
    jax.clear_caches()
