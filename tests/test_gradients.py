"""The metrics as differentiable functions: jax.grad against central finite differences in float64, and
the result NamedTuples through jit, vmap and grad.

- RPAM Test d (Hodel et al. 2026, Eq. 1) w.r.t. the output head W of a tiny GPT-2: the prompt states are
  computed once by the port, the logits are h @ W[attribute rows].T (first tokens, as in the brief), and
  also through the full App. E path of :mod:`jaxassoc.readouts.rpam_head` (multi-token continuations read from the
  full-vocabulary softmax of the same head).
- WEAT d (Caliskan et al. 2017, Eq. 3) w.r.t. the word vectors.
- SeT distance ‖ΔA‖_F (Cao et al. 2022, §3.1) w.r.t. the head (W, b) and the context x, also against
  the closed form of the gradient of a distance to a convex set (Danskin): ∂‖P(z) − z‖/∂z = −δ/‖δ‖.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import f32_association, f32_effect_size, f32_sum

from jaxassoc import metrics
from jaxassoc.metrics import rpam, set_exact, weat
from jaxassoc.models import Head, load_model
from jaxassoc.models.heads import gather_positions, last_positions
from jaxassoc.readouts import rpam_head

EPS = 1e-6


def central_difference(f, x, direction, eps=EPS):
    return (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)


def check_directional(f, x, key, n_directions=3, rtol=1e-6, atol=2e-8):
    """<∇f(x), u> == central difference along u for random unit directions u (float64).

    With ε = 1e-6 the central difference carries ~1e-10 truncation and ~|f|·1e-16/ε round-off error per
    evaluation, amplified by the ill-conditioned d (a ratio of small differences): atol 2e-8. A float32
    gradient misses by ~1e-2 relative, so the check separates them.
    """
    grad = jax.jit(jax.grad(f))(x)
    f = jax.jit(f)
    for u_key in jax.random.split(key, n_directions):
        u = jax.random.normal(u_key, x.shape, x.dtype)
        u = u / jnp.linalg.norm(u)
        fd = central_difference(f, x, u)
        np.testing.assert_allclose(float(jnp.vdot(grad, u)), float(fd), rtol=rtol, atol=atol)
    return grad


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_checkpoint):
    return load_model(tiny_checkpoint("gpt2"))


def _prompt_states(model, targets):
    """Head inputs at the last token of each target's TP1 prompt (one forward pass, body fixed)."""
    prompts = [model.tokenizer(rpam_head.TP1.fill(t))["input_ids"] for t in targets]
    length = max(map(len, prompts))
    ids = np.zeros((len(prompts), length), np.int32)
    mask = np.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, : len(p)], mask[i, : len(p)] = p, 1
    hidden = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return gather_positions(hidden, last_positions(jnp.asarray(mask)))


def test_rpam_d_gradient_wrt_output_head_matches_finite_differences(tiny_gpt2):
    spec = rpam_head.weat_ws_tests()["C6"]
    rows = jnp.asarray(
        [tiny_gpt2.tokenizer(" " + w, add_special_tokens=False)["input_ids"][0] for w in spec.a + spec.b]
    )
    with jax.enable_x64(True):
        h = _prompt_states(tiny_gpt2, spec.x + spec.y).astype(jnp.float64)
        W0 = tiny_gpt2.head.W.astype(jnp.float64)
        assert tiny_gpt2.head.b is None  # GPT-2's head has no bias

        def d_of_head(W):
            logits = h @ W[rows].T
            return rpam.rpam_effect_size(logits, n_x=len(spec.x), n_a=len(spec.a))

        grad = check_directional(d_of_head, W0, jax.random.key(0))
        # only attribute rows get a gradient (first-token RPAM reads no other row)
        untouched = np.setdiff1d(np.arange(W0.shape[0]), np.asarray(rows))
        assert np.all(np.asarray(grad)[untouched] == 0)
        row = int(rows[0])  # single entries of an attribute row, one at a time
        for col in (0, 7, 31):
            e = jnp.zeros_like(W0).at[row, col].set(1.0)
            # float64, as check_directional: ~1e-10 truncation against gradients of ~1e-3..1
            np.testing.assert_allclose(float(grad[row, col]), float(central_difference(d_of_head, W0, e)), rtol=1e-6)


def test_rpam_d_with_multi_token_attributes_differentiates_through_the_whole_head(tiny_gpt2):
    spec = rpam_head.weat_ws_tests()["C7"]  # gender terms as targets, math/arts words as attributes
    states = rpam_head.rpam_test_states(tiny_gpt2, spec)
    assert states.cont_ids.shape[0] > 0  # the tiny tokenizer splits most words: App. E is exercised
    with jax.enable_x64(True):
        states = jax.tree.map(lambda a: a.astype(jnp.float64) if a.dtype == jnp.float32 else a, states)
        # GPT-2 has no head bias; give it one (random) so the bias path is checked too
        bias = 0.1 * jax.random.normal(jax.random.key(3), (tiny_gpt2.head.W.shape[0],), jnp.float64)
        head = Head(tiny_gpt2.head.W.astype(jnp.float64), bias)

        def d_of(W, b):
            first, cont = rpam_head.head_rpam_inputs(Head(W, b), states)
            return rpam.rpam_effect_size(first, cont, n_x=len(spec.x), n_a=len(spec.a))

        gW = check_directional(lambda W: d_of(W, head.b), head.W, jax.random.key(1))
        check_directional(lambda b: d_of(head.W, b), head.b, jax.random.key(2))
        # the continuation's softmax normaliser reaches rows that are no attribute's first token
        assert np.count_nonzero(np.abs(np.asarray(gW)).sum(axis=1)) > len(set(np.asarray(states.first_ids)))


def test_weat_d_gradient_wrt_embeddings_matches_finite_differences():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        x, y, a, b = (jnp.asarray(rng.normal(size=(n, 10))) for n in (6, 5, 7, 8))

        for i, arg in enumerate((x, y, a, b)):

            def d_of(v, i=i):
                args = [x, y, a, b]
                args[i] = v
                return weat.weat_effect_size(*args)

            check_directional(d_of, arg, jax.random.key(10 + i))
        # d is invariant to rescaling a vector (cosines), so the gradient is orthogonal to it
        g = jax.grad(lambda v: weat.weat_effect_size(v, y, a, b))(x)
        # float64: a sum of 6 products of O(1) terms cancelling to 0, ~6·eps64 = 1e-15 (atol=1e-12)
        np.testing.assert_allclose(np.sum(np.asarray(g) * np.asarray(x), axis=1), 0.0, atol=1e-12)


def _set_problem(seed, V=30, D=6):
    rng = np.random.default_rng(seed)
    return (
        jnp.asarray(rng.normal(size=(V, D))),
        jnp.asarray(rng.normal(size=V)),
        jnp.asarray(rng.normal(size=D)),
        jnp.asarray(int(rng.integers(V))),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_set_distance_gradient_matches_finite_differences_and_closed_form(seed):
    with jax.enable_x64(True):
        W, b, x, gold = _set_problem(seed)

        def distance(W, b, x):
            return set_exact.set_exact_kernel(W, b, x[None], gold[None]).distance[0]

        assert float(distance(W, b, x)) > 0  # the gold token does not win yet: a non-trivial problem
        gW = check_directional(lambda W: distance(W, b, x), W, jax.random.key(20 + seed))
        gb = check_directional(lambda b: distance(W, b, x), b, jax.random.key(30 + seed))
        check_directional(lambda x: distance(W, b, x), x, jax.random.key(40 + seed))

        delta = set_exact.projection_delta(W @ x + b, gold)
        xt_norm = jnp.sqrt(x @ x + 1.0)
        dz = -delta / (jnp.linalg.norm(delta) * xt_norm)  # ∂(‖δ‖/‖x̃‖)/∂z with z = W x + b
        # float64 closed form vs autodiff: a few dozen roundings each, ~1e-14 relative (rtol=1e-9)
        np.testing.assert_allclose(np.asarray(gb), np.asarray(dz), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(gW), np.asarray(jnp.outer(dz, x)), rtol=1e-9, atol=1e-12)


def test_set_distance_gradient_is_zero_when_gold_already_wins():
    W, b, x, gold = _set_problem(3)
    b = b.at[gold].set(100.0)
    g = jax.grad(lambda W: set_exact.set_exact_kernel(W, b, x[None], gold[None]).distance[0])(W)
    assert np.all(np.isfinite(np.asarray(g))) and float(jnp.abs(g).max()) == 0.0


def test_results_are_pytrees_through_jit_vmap_and_grad():
    rng = np.random.default_rng(1)
    tests = [tuple(rng.normal(size=(n, 5)).astype(np.float32) for n in (4, 4, 3, 3)) for _ in range(3)]
    stacked = [jnp.stack([t[i] for t in tests]) for i in range(4)]
    batched = jax.vmap(weat.weat_statistics)(*stacked)
    assert isinstance(batched, metrics.WeatStatistics) and batched.d.shape == (3,)
    for k, t in enumerate(tests):
        one = weat.weat_statistics(*t)
        # vmapped vs alone, float32: each association within f32_association(5, 3, 3), S a sum of 8 of
        # them (|s| ≤ 2), d by f32_effect_size (rtol=1e-6 on d had been below it)
        s_tol = f32_association(5, 3, 3)
        d_tol = f32_effect_size(s_tol, one.associations, float(one.d))
        np.testing.assert_allclose(float(batched.d[k]), float(one.d), rtol=0, atol=d_tol)
        np.testing.assert_allclose(float(batched.S[k]), float(one.S), rtol=0, atol=8 * s_tol + f32_sum(8, 2.0))

    grads, aux = jax.grad(
        lambda x: (weat.weat_statistics(x, *tests[0][1:]).d, weat.weat_statistics(x, *tests[0][1:])), has_aux=True
    )(tests[0][0])
    assert isinstance(aux, metrics.WeatStatistics) and grads.shape == tests[0][0].shape

    logits = jnp.asarray(rng.normal(size=(2, 4, 9)).astype(np.float32))
    sq = jnp.ones((2, 4), jnp.float32)
    gold = jnp.asarray(rng.integers(0, 9, (2, 4)))
    nested = jax.jit(jax.vmap(set_exact.set_from_logits))(logits, sq, gold)
    assert isinstance(nested, metrics.SetResult) and nested.distance.shape == (2, 4)
    flat = set_exact.set_from_logits(logits.reshape(8, 9), sq.reshape(8), gold.reshape(8))
    # SeT from the same float32 logits in another program: the pool mean (≤ 9 logits) and the shift's norm
    # (√(k + 1) ≤ 3 entries): 3·f32_sum(9, max|z|), absolute (rtol=1e-6 fails for a small distance)
    z_max = float(jnp.abs(logits).max())
    np.testing.assert_allclose(
        np.asarray(nested.distance).ravel(), np.asarray(flat.distance), rtol=0, atol=3 * f32_sum(9, z_max)
    )

    p = jax.vmap(lambda z: rpam.relative_probabilities(z))(logits)
    # each p: its logit's rounding through exp (f32_sum(1, max|z|)), the sum of 9 and the division; then a
    # float32 sum of the 9 p's (rtol=1e-6 had been below it)
    np.testing.assert_allclose(
        np.asarray(p.sum(-1)), 1.0, rtol=f32_sum(1, z_max) + 2 * f32_sum(9, 1 / 9) + f32_sum(2, 1.0)
    )
    leaves, treedef = jax.tree_util.tree_flatten(nested)
    assert len(leaves) == len(metrics.SetResult._fields)
    assert isinstance(jax.tree_util.tree_unflatten(treedef, leaves), metrics.SetResult)
