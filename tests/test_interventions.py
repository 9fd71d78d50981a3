"""Named sites and interventions (``jaxassoc.models.sites``, ``jaxassoc.models.interventions``): an identity
intervention is the plain forward bit for bit, reads equal the layers' hidden states, patching a layer's sites
from another run reproduces that run, edits vmap and differentiate, and bad sites or edits are refused by name."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs import TINY, specs_by_family
from family_specs.t5 import V11
from tolerances import f32_chain, f32_sum

from jaxassoc.errors import ModelError
from jaxassoc.models import attribution, load_model
from jaxassoc.models import interventions as iv
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import make_mesh
from jaxassoc.models.sites import DECODER_LAYER_SITES, LAYER_SITES, Add, Apply, Replace, site_names

FAMILIES = ["gpt2", "llama", "bert", "mixtral", "gpt_neox"]
INNER = 128  # the widest matmul of these tiny models (GPT-2's MLP, 4 x 32; T5's d_ff is 48)


def _tol(depth, ref) -> float:
    """Two float32 programs (ours vs torch, fused differently, vmapped, on a mesh) through ``depth`` layers
    (count the head), scaled by the compared outputs: f32_chain(depth, INNER, max|ref|)."""
    return f32_chain(depth, INNER, float(np.abs(np.asarray(ref)).max()))


@pytest.fixture(scope="module")
def models(tiny_checkpoint):
    specs = specs_by_family()
    return {name: load_model(tiny_checkpoint(TINY.get(name) or specs[name][0])) for name in FAMILIES}


def _inputs(model, batch=3, length=7, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, model.head.W.shape[0], (batch, length))
    mask = np.ones((batch, length), np.int32)
    mask[0, -2:] = 0  # one right-padded row
    return jnp.asarray(ids, jnp.int32), jnp.asarray(mask)


def _run(model, ids, mask, **kw):
    """The public call (the model object) jitted over its parameters."""
    return jax.jit(lambda p, i, m: iv.run(model.with_params(p), i, m, **kw))(model.params, ids, mask)


@pytest.mark.parametrize("family", FAMILIES)
def test_an_identity_intervention_is_the_plain_forward_bit_for_bit(models, family):
    model = models[family]
    ids, mask = _inputs(model)
    plain = jax.jit(lambda b, i, m: model.forward(b, i, m).hidden)(model.params["body"], ids, mask)
    L = iv.layer_count(model.params["body"])
    nothing = {
        f"layers.*.{kind}": Replace(jnp.zeros((L, 1, 1, 1)), jnp.zeros((L, 1, 1, 1), bool)) for kind in LAYER_SITES
    }
    nothing["layers.1.attn.heads"] = Replace(jnp.zeros(()), jnp.zeros((), bool))
    nothing["final_norm"] = Apply(lambda x: x)
    edited = jax.jit(lambda b, i, m: iv.run_parts(model.port, b, i, m, config=model.config, edits=nothing).hidden)
    np.testing.assert_array_equal(np.asarray(edited(model.params["body"], ids, mask)), np.asarray(plain))
    # returning every site keeps them all in memory: XLA may fuse differently, never by more than rounding
    # through the L layers (atol=2e-6 had been below that, ~2e-5 for |hidden| ~ 4)
    out = _run(model, ids, mask, read=site_names(L), edits=nothing)
    np.testing.assert_allclose(np.asarray(out.hidden), np.asarray(plain), rtol=0, atol=_tol(L, plain))
    assert set(out.sites) == set(site_names(L))


@pytest.mark.parametrize("family", FAMILIES)
def test_reads_are_the_layers_hidden_states_and_their_shapes(models, family):
    model = models[family]
    ids, mask = _inputs(model)
    body = model.params["body"]
    L = iv.layer_count(body)
    states = jax.jit(lambda b, i, m: model.forward(b, i, m, all_layers=True).layers)(body, ids, mask)
    out = _run(
        model, ids, mask, read=["layers.*.resid_pre", "layers.*.resid_post", "final_norm", "layers.0.mlp.hidden"]
    )
    for i in range(L - (model.objective == "causal")):  # a causal body's last output is after the final norm
        # another program than the forward's (atol=1e-6 had been below the rounding of i + 1 layers)
        tol = _tol(i + 1, states[i + 1])
        np.testing.assert_allclose(out.sites["layers.*.resid_post"][i], states[i + 1], rtol=0, atol=tol)
        np.testing.assert_allclose(out.sites["layers.*.resid_pre"][i], states[i], rtol=0, atol=tol)
    np.testing.assert_array_equal(out.sites["final_norm"], out.hidden)
    shapes = iv.site_shapes(model.port, body, config=model.config)
    B, T = ids.shape
    assert out.sites["layers.0.mlp.hidden"].shape == (B, T, *shapes["mlp.hidden"])
    assert shapes["attn.heads"][0] * shapes["attn.heads"][1] == body["layers"]["attn"]["o"]["w"].shape[1]


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_patching_every_site_of_a_layer_from_run_b_reproduces_run_b(models, family):
    model = models[family]
    ids_a, mask = _inputs(model, seed=1)
    ids_b, _ = _inputs(model, seed=2)
    L = iv.layer_count(model.params["body"])
    layer = L // 2
    names = [f"layers.{layer}.{kind}" for kind in LAYER_SITES]
    b = _run(model, ids_b, mask, read=names)
    a = _run(model, ids_a, mask)
    patched = _run(model, ids_a, mask, edits=iv.patch(b.sites))
    assert np.abs(np.asarray(a.hidden - b.hidden)).max() > 1e-3  # the two runs differ
    np.testing.assert_allclose(patched.hidden, b.hidden, rtol=0, atol=_tol(L, b.hidden))
    # patching only the heads of that layer moves the output but does not make it run B's
    heads = _run(model, ids_a, mask, edits=iv.patch(b.sites, [f"layers.{layer}.attn.heads"]))
    assert 1e-6 < np.abs(np.asarray(heads.hidden - a.hidden)).max()


def test_an_edit_of_one_layer_leaves_the_layers_before_it_alone(models):
    model = models["llama"]
    ids, mask = _inputs(model)
    before = _run(model, ids, mask, read=["layers.*.resid_post"])
    after = _run(model, ids, mask, read=["layers.*.resid_post"], edits={"layers.1.mlp.hidden": Replace(jnp.zeros(()))})
    a, b = np.asarray(before.sites["layers.*.resid_post"]), np.asarray(after.sites["layers.*.resid_post"])
    np.testing.assert_array_equal(a[:1], b[:1])
    assert np.abs(a[1] - b[1]).max() > 1e-4


def test_head_ablation_vmaps_over_interventions(models):
    model = models["llama"]
    ids, mask = _inputs(model)
    body = model.params["body"]
    L = iv.layer_count(body)
    H = iv.site_shapes(model.port, body, config=model.config)["attn.heads"][0]
    masks = jnp.eye(L * H, dtype=bool).reshape(L * H, L, H)

    def ablated(m):
        return iv.run_parts(model.port, body, ids, mask, config=model.config, edits=iv.ablate_heads(m, L, H)).hidden

    batched = jax.jit(jax.vmap(ablated))(masks)
    for k in (0, L * H - 1):
        one = jax.jit(ablated)(masks[k])
        np.testing.assert_allclose(batched[k], one, rtol=0, atol=_tol(L, one))  # vmapped vs alone
    assert np.abs(np.asarray(batched[0] - batched[-1])).max() > 1e-5


def test_mean_ablation_sets_the_reference_mean(models):
    model = models["gpt2"]
    ids, mask = _inputs(model)
    body = model.params["body"]
    L = iv.layer_count(body)
    ref = _run(model, ids, mask, read=["layers.*.attn.heads"]).sites["layers.*.attn.heads"]
    mean = iv.site_mean(ref, mask, stacked=True)
    real = np.asarray(ref)[:, np.asarray(mask) > 0]  # (L, real tokens, H, d)
    # a float32 mean over the n real tokens (the same activations): f32_sum(n, max|a| / n)
    n = int(np.asarray(mask).sum())
    tol = f32_sum(n, float(np.abs(real).max()) / n)
    np.testing.assert_allclose(mean, real.mean(axis=1), rtol=0, atol=tol)
    H = mean.shape[1]
    out = _run(model, ids, mask, read=["layers.1.attn.heads"], edits=iv.ablate_heads({1: [0]}, L, H, mean=mean))
    # Replace writes the value itself: exact
    np.testing.assert_array_equal(
        out.sites["layers.1.attn.heads"][:, :, 0], np.broadcast_to(mean[1, 0], ids.shape + mean.shape[2:])
    )


def test_gradients_through_an_intervention_match_finite_differences(models):
    model = models["llama"]
    ids, mask = _inputs(model, batch=1)
    body, head = model.params["body"], model.params["head"]
    L = iv.layer_count(body)
    D = body["embed"].shape[1]

    def score(delta):
        out = iv.run_parts(model.port, body, ids, mask, config=model.config, edits={"layers.1.resid_post": Add(delta)})
        logits = head_logits(head, out.hidden[:, -1])
        return logits[0, 5] - logits[0, 7]

    delta = jnp.zeros((1, ids.shape[1], D))
    grad = jax.jit(jax.grad(score))(delta)
    direction = np.random.default_rng(0).normal(size=delta.shape)
    direction = jnp.asarray(direction / np.linalg.norm(direction), jnp.float32)
    eps = 1e-2
    fd = (jax.jit(score)(eps * direction) - jax.jit(score)(-eps * direction)) / (2 * eps)
    # rtol: the O(eps²) truncation of the central difference (eps²/6 x a third derivative on the scale of
    # the unit-norm activations: ~1e-5 relative; 2e-2 is what the finite difference is trusted to), atol:
    # the rounding of the two float32 scores (2 logits through L layers + the head) over 2·eps
    logits = np.asarray(head_logits(head, jax.jit(lambda b: model.forward(b, ids, mask).hidden)(body)[:, -1]))
    rounding = 2 * 2 * _tol(L + 1, logits) / (2 * eps)
    np.testing.assert_allclose(float(jnp.vdot(grad, direction)), float(fd), rtol=2e-2, atol=rounding)
    assert L >= 2


def test_a_mesh_run_equals_the_single_device_one(tiny_checkpoint, models):
    one = models["llama"]
    many = load_model(tiny_checkpoint("llama"), mesh=make_mesh(data=1, fsdp=2, tp=4))
    ids, mask = _inputs(one, batch=4)
    L = iv.layer_count(one.params["body"])
    H = iv.site_shapes(one.port, one.params["body"], config=one.config)["attn.heads"][0]
    kw = dict(read=["layers.0.attn.heads"], edits=iv.ablate_heads({0: [1]}, L, H))
    a, b = _run(one, ids, mask, **kw), _run(many, ids, mask, **kw)
    # the mesh splits the sums (tp = 4): another order, within the rounding of the layers
    np.testing.assert_allclose(a.hidden, b.hidden, rtol=0, atol=_tol(L, a.hidden))
    heads = a.sites["layers.0.attn.heads"]
    np.testing.assert_allclose(heads, b.sites["layers.0.attn.heads"], rtol=0, atol=_tol(1, heads))
    # the same edits bound into the sharded model: its arrays replicated over the mesh, its own forward
    cut = many.with_edits(kw["edits"])
    bound = cut.forward(cut.params["body"], ids, mask).hidden
    np.testing.assert_allclose(a.hidden, bound, rtol=0, atol=_tol(L, a.hidden))


def test_bad_sites_and_edits_are_refused_by_name(models, tiny_checkpoint):
    model = models["gpt2"]
    ids, mask = _inputs(model)
    L = iv.layer_count(model.params["body"])
    with pytest.raises(ModelError, match=r"unknown site 'layers.0.attn.head'.*valid sites.*attn.heads"):
        _run(model, ids, mask, read=["layers.0.attn.head"])
    with pytest.raises(ModelError, match=rf"layer {L} is out of range"):
        _run(model, ids, mask, read=[f"layers.{L}.attn.heads"])
    with pytest.raises(ModelError, match=r"head 99 of layer 0 is out of range"):
        iv.ablate_heads({0: [99]}, L, 2)
    with pytest.raises(ModelError, match=r"site 'layers.0.attn.heads': value of shape \(5, 3\) does not broadcast"):
        _run(model, ids, mask, edits={"layers.0.attn.heads": Replace(jnp.zeros((5, 3)))})
    with pytest.raises(ModelError, match=r"leading layer axis of"):
        _run(model, ids, mask, edits={"layers.*.mlp.hidden": Replace(jnp.zeros((L + 1, 1)))})
    with pytest.raises(ModelError, match=r"run_decoder runs an encoder-decoder's decoder; the gpt2 family is causal"):
        iv.run_decoder(model.port, model.params["body"], None, mask, ids, mask, config=model.config)
    t5 = load_model(tiny_checkpoint(V11))
    with pytest.raises(ModelError, match=r"unknown site 'layers.0.cross_attn.heads'.*valid sites"):  # encoder's
        iv.run(t5, ids, mask, read=["layers.0.cross_attn.heads"])


def test_t5_sites_in_both_stacks_read_hf_states_and_ablate_a_cross_attention_head_like_a_hook(tiny_checkpoint):
    """Encoder and decoder sites of T5 v1.1: an identity edit is the plain pass bit for bit, the residual
    reads are HF's hidden states, and zeroing one cross-attention head equals transformers with a pre-hook
    zeroing that head's slice of the cross-attention output projection's input."""
    import torch
    from family_specs import load_torch

    folder = tiny_checkpoint(V11)
    model, ref = load_model(folder), load_torch(V11, folder)
    body, config, port = model.params["body"], model.config, model.port
    ids, mask = _inputs(model)
    dec_ids, dec_mask = _inputs(model, length=5, seed=1)
    L, Ld = iv.layer_count(body), iv.layer_count(body, "decoder")
    H = config.num_heads

    def nothing(n_layers, kinds):
        edits = {
            f"layers.*.{k}": Replace(jnp.zeros((n_layers, 1, 1, 1)), jnp.zeros((n_layers, 1, 1, 1), bool))
            for k in kinds
        }
        return edits | {"final_norm": Apply(lambda x: x)}

    plain_enc = jax.jit(lambda b, i, m: model.forward(b, i, m).hidden)(body, ids, mask)
    enc = jax.jit(lambda b, i, m: iv.run_parts(port, b, i, m, config=config, edits=nothing(L, LAYER_SITES)).hidden)
    np.testing.assert_array_equal(np.asarray(enc(body, ids, mask)), np.asarray(plain_enc))
    plain_dec = jax.jit(lambda b, e, d, dm: port.decode(b, e, mask, d, dm, config=config).hidden)
    edited_dec = jax.jit(
        lambda b, e, d, dm: (
            iv.run_decoder(port, b, e, mask, d, dm, config=config, edits=nothing(Ld, DECODER_LAYER_SITES)).hidden
        )
    )
    np.testing.assert_array_equal(
        np.asarray(edited_dec(body, plain_enc, dec_ids, dec_mask)),
        np.asarray(plain_dec(body, plain_enc, dec_ids, dec_mask)),
    )

    read = iv.run_parts(port, body, ids, mask, config=config, read=["layers.*.resid_post", "layers.0.attn.heads"])
    cross = iv.ablate_heads({1: [0]}, Ld, H)["layers.*.attn.heads"]
    dec = iv.run_decoder(
        port,
        body,
        read.hidden,
        mask,
        dec_ids,
        dec_mask,
        config=config,
        read=["layers.*.resid_pre", "layers.1.cross_attn.heads"],
        edits={"layers.*.cross_attn.heads": cross},
    )
    assert read.sites["layers.0.attn.heads"].shape == (*ids.shape, H, config.d_kv)
    assert np.all(np.asarray(dec.sites["layers.1.cross_attn.heads"])[..., 0, :] == 0)

    def hook(_, args):
        x = args[0].clone()
        x[..., : config.d_kv] = 0  # head 0 of the cross attention's output projection input
        return (x,)

    t = {
        k: torch.tensor(np.asarray(v), dtype=torch.long)
        for k, v in (("i", ids), ("m", mask), ("d", dec_ids), ("dm", dec_mask))
    }
    handle = ref.decoder.block[1].layer[1].EncDecAttention.o.register_forward_pre_hook(hook)
    try:
        with torch.inference_mode():
            out = ref(
                input_ids=t["i"],
                attention_mask=t["m"],
                decoder_input_ids=t["d"],
                decoder_attention_mask=t["dm"],
                output_hidden_states=True,
            )
    finally:
        handle.remove()
    real, dec_real = np.asarray(mask) > 0, np.asarray(dec_mask) > 0
    # ours vs torch through the encoder layers, then the decoder's (T5: inner d_ff 48 < INNER); 1e-5 had been
    # below the derived bound from the second layer on (|h| ~ 4: 7e-6 a layer), and far below it for the
    # logits (L + Ld layers + the head)
    for i in range(L - 1):  # HF's last encoder state is after the final norm
        ref_state = out.encoder_hidden_states[i + 1].numpy()[real]
        got = np.asarray(read.sites["layers.*.resid_post"][i])[real]
        np.testing.assert_allclose(got, ref_state, atol=_tol(i + 1, ref_state), rtol=0)
    for i in range(Ld):
        ref_state = out.decoder_hidden_states[i].numpy()[dec_real]
        got = np.asarray(dec.sites["layers.*.resid_pre"][i])[dec_real]
        np.testing.assert_allclose(got, ref_state, atol=_tol(L + max(i, 1), ref_state), rtol=0)
    logits = np.asarray(head_logits(model.head, dec.hidden))
    ref_logits = out.logits.numpy()[dec_real]
    assert np.abs(logits[dec_real] - ref_logits).max() <= _tol(L + Ld + 1, ref_logits)
    unablated = np.asarray(head_logits(model.head, plain_dec(body, read.hidden, dec_ids, dec_mask)))
    assert np.abs(logits - unablated)[dec_real].max() > 1e-3  # the head mattered: the comparison can fail


def _logodds(model, out):
    logits = head_logits(model.params["head"], out.hidden[:, -1])
    return (logits[:, 5] - logits[:, 7]).sum()


def test_grad_times_activation_is_the_activation_times_the_gradient_of_a_replace(models):
    model = models["gpt2"]
    ids, mask = _inputs(model)
    body = model.params["body"]
    name = "layers.1.mlp.hidden"
    acts = _run(model, ids, mask, read=[name]).sites[name]

    def replaced(a):
        return _logodds(model, iv.run_parts(model.port, body, ids, mask, config=model.config, edits={name: Replace(a)}))

    expected = acts * jax.grad(replaced)(acts)
    got = attribution.grad_times_activation(
        model.port, body, ids, mask, lambda out: _logodds(model, out), config=model.config, sites=[name]
    )[name]
    # another program for a·∂score/∂a: the rounding of the forward to the site and of the backward from the
    # head, 2L + 1 layers in all
    L = iv.layer_count(body)
    np.testing.assert_allclose(got, expected, rtol=0, atol=_tol(2 * L + 1, expected))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_attribution_patching_is_the_first_order_term_of_exact_patching(models, family):
    """Patching head (l, h) with a + α (a_corrupt − a) changes the score by α × the estimate + O(α²)."""
    model = models[family]
    clean, mask = _inputs(model, seed=3)
    corrupt, _ = _inputs(model, seed=4)
    body = model.params["body"]
    score = lambda out: _logodds(model, out)  # noqa: E731
    estimate = attribution.attribution_patching(model.port, body, clean, corrupt, mask, score, config=model.config)
    name = "layers.*.attn.heads"
    a = _run(model, clean, mask, read=[name]).sites[name]
    b = _run(model, corrupt, mask, read=[name]).sites[name]
    L, H = estimate.shape

    @jax.jit
    def patched(where, alpha):
        edit = Replace(a + alpha * (b - a), where[:, None, None, :, None])
        return score(iv.run_parts(model.port, body, clean, mask, config=model.config, edits={name: edit}))

    base = score(_run(model, clean, mask))
    alpha = 1e-2
    masks = jnp.eye(L * H, dtype=bool).reshape(L * H, L, H)
    exact = np.array([(patched(m, alpha) - base) / alpha for m in masks]).reshape(L, H)
    # not only rounding: rtol and 2e-3·max|estimate| take the O(α) remainder of the first-order term; the
    # rounding of two float32 scores (2 logits a row, L layers + the head, in two programs) over α is added
    logits = np.asarray(head_logits(model.params["head"], _run(model, clean, mask).hidden[:, -1]))
    rounding = 2 * 2 * clean.shape[0] * _tol(L + 1, logits) / alpha
    np.testing.assert_allclose(exact, estimate, rtol=0.05, atol=2e-3 * np.abs(estimate).max() + rounding)
    full = np.array([patched(m, 1.0) - base for m in masks]).reshape(L, H)  # exact activation patching
    assert np.corrcoef(full.ravel(), np.asarray(estimate).ravel())[0, 1] > 0.5


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_head_ablation_equals_transformers_with_a_hook_zeroing_that_head(models, tiny_checkpoint, family):
    import torch
    import torch_hooks
    from family_specs import load_torch

    model = models[family]
    ref = load_torch(TINY[family], tiny_checkpoint(family))
    ids, mask = _inputs(model)
    body = model.params["body"]
    L = iv.layer_count(body)
    H = iv.site_shapes(model.port, body, config=model.config)["attn.heads"][0]
    for layer, head in ((0, 1), (L - 1, H - 1)):
        out = _run(model, ids, mask, edits=iv.ablate_heads({layer: [head]}, L, H))
        ours = np.asarray(head_logits(model.params["head"], out.hidden))
        theirs = torch_hooks.logits_with_head_patch(
            ref, torch.tensor(np.asarray(ids), dtype=torch.long), torch.tensor(np.asarray(mask)), layer, head
        ).numpy()
        real = np.asarray(mask) > 0
        # ours vs torch, L layers + the head (|logits| < 0.6: ~5e-6; the 1e-5 fits)
        assert np.abs(ours[real] - theirs[real]).max() <= _tol(L + 1, theirs[real])


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_an_ablated_model_ablates_every_pass_cached_or_not(models, family):
    from jaxassoc.models.ablation import ablated, label

    model = models[family]
    L = iv.layer_count(model.params["body"])
    H = iv.site_shapes(model.port, model.params["body"], config=model.config)["attn.heads"][0]
    F = iv.site_shapes(model.port, model.params["body"], config=model.config)["mlp.hidden"][-1]
    cut = ablated(model, heads=[[0, 1], [L - 1, 0]], neurons=[[0, 3]])
    assert label([[0, 1], [L - 1, 0]], [[0, 3]]) == f"heads 0.1 {L - 1}.0; neurons 0.3"
    assert set(cut.edits) == {"layers.*.attn.heads", "layers.*.mlp.hidden"} and not model.edits
    ids, mask = _inputs(model)
    expected = _run(
        model, ids, mask, edits={**iv.ablate_heads({0: [1], L - 1: [0]}, L, H), **iv.ablate_neurons({0: [3]}, L, F)}
    ).hidden
    got = cut.forward(cut.params["body"], ids, mask).hidden
    # the ablated model's own forward: another program than iv.run (atol=1e-6 had been below its rounding)
    np.testing.assert_allclose(got, expected, rtol=0, atol=_tol(L, expected))
    plain = model.forward(model.params["body"], ids, mask).hidden
    assert np.abs(np.asarray(got - plain)).max() > 1e-4
    cache = cut.decoder.init_cache(ids.shape[0], ids.shape[1])
    cached, _ = cut.decoder.forward_cached(cut.params["body"], ids, mask, cache, 0)
    real = np.asarray(mask) > 0
    np.testing.assert_allclose(np.asarray(cached)[real], np.asarray(got)[real], rtol=0, atol=_tol(L, got))
    with pytest.raises(ModelError, match=rf"head \[0, {H}\]: head {H} is out of range"):
        ablated(model, heads=[[0, H]])


@pytest.mark.parametrize("family", ["gpt2", "llama", "gpt_neox"])
def test_a_run_resumed_at_a_layer_equals_the_full_run(models, family):
    model = models[family]
    ids, mask = _inputs(model)
    body = model.params["body"]
    L = iv.layer_count(body)
    H = iv.site_shapes(model.port, body, config=model.config)["attn.heads"][0]
    resid = _run(model, ids, mask, read=["layers.*.resid_pre"]).sites["layers.*.resid_pre"]
    edits = iv.ablate_heads({L - 1: [1]}, L, H)
    full = _run(model, ids, mask, edits=edits).hidden

    @jax.jit
    def resumed(layer):
        return iv.run_parts(
            model.port, body, ids, mask, config=model.config, edits=edits, start=(layer, resid[layer])
        ).hidden

    for layer in range(L):
        # layers ≥ layer in another program, from a state read in a third one: L layers' rounding
        np.testing.assert_allclose(resumed(layer), full, rtol=0, atol=_tol(L, full))
    with pytest.raises(ModelError, match="reads no sites"):
        iv.run_parts(model.port, body, ids, mask, config=model.config, read=["final_norm"], start=(0, resid[0]))


SUBLAYERS = {  # model_type -> the block's (attention input norm, attention, MLP input norm, MLP) in transformers
    "gpt2": ("transformer.h", "ln_1", "attn", "ln_2", "mlp"),
    "llama": ("model.layers", "input_layernorm", "self_attn", "post_attention_layernorm", "mlp"),
}


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_sublayer_sites_read_what_transformers_computes_and_edit_like_a_hook(models, tiny_checkpoint, family):
    """``attn.in``, ``attn.out``, ``mlp.in``, ``mlp.out`` are the outputs of transformers' norms and sublayers,
    ``attn.pattern`` its eager attention weights; ``resid_mid`` sits between the sublayers; zeroing ``attn.out``
    equals a forward hook zeroing the attention's output."""
    import torch
    from family_specs import load_torch

    model = models[family]
    ref = load_torch(TINY[family], tiny_checkpoint(family))
    ref.config._attn_implementation = "eager"  # its attention weights, as output_attentions returns them
    ids, mask = _inputs(model)
    L = iv.layer_count(model.params["body"])
    kinds = ("attn.in", "attn.out", "mlp.in", "mlp.out")
    out = _run(model, ids, mask, read=[f"layers.*.{k}" for k in (*kinds, "attn.pattern", "resid_pre", "resid_mid",
                                                                     "resid_post", "attn.q", "attn.k")])  # fmt: skip
    blocks, *names = SUBLAYERS[family]
    seen: dict[str, list] = {k: [] for k in kinds}
    hooks = [
        ref.get_submodule(f"{blocks}.{i}.{name}").register_forward_hook(
            lambda _, __, o, kind=kind: seen[kind].append((o[0] if isinstance(o, tuple) else o).detach().numpy())
        )
        for i in range(L)
        for kind, name in zip(kinds, names)
    ]
    t_ids, t_mask = torch.tensor(np.asarray(ids), dtype=torch.long), torch.tensor(np.asarray(mask))
    with torch.inference_mode():
        theirs = ref(input_ids=t_ids, attention_mask=t_mask, output_attentions=True)
    for hook in hooks:
        hook.remove()
    real = np.asarray(mask) > 0
    for kind in kinds:
        ours = np.asarray(out.sites[f"layers.*.{kind}"])
        for i in range(L):
            # ours vs torch through i + 1 blocks
            assert np.abs(ours[i][real] - seen[kind][i][real]).max() <= _tol(i + 1, seen[kind][i][real]), (kind, i)
    pattern = np.asarray(out.sites["layers.*.attn.pattern"])  # (L, B, T, H, S)
    for i in range(L):
        hf = theirs.attentions[i].numpy().transpose(0, 2, 1, 3)  # (B, H, T, S) -> (B, T, H, S)
        assert np.abs(pattern[i][real] - hf[real]).max() <= _tol(i + 1, 1.0), i  # weights <= 1
    sites = {k: np.asarray(v) for k, v in out.sites.items()}
    # one addition in float32 each: exact to the ulp of the sum
    np.testing.assert_allclose(sites["layers.*.resid_mid"], sites["layers.*.resid_pre"] + sites["layers.*.attn.out"],
                               rtol=0, atol=4 * np.finfo(np.float32).eps * np.abs(sites["layers.*.resid_mid"]).max())  # fmt: skip
    np.testing.assert_allclose(sites["layers.*.resid_post"], sites["layers.*.resid_mid"] + sites["layers.*.mlp.out"],
                               rtol=0, atol=4 * np.finfo(np.float32).eps * np.abs(sites["layers.*.resid_post"]).max())  # fmt: skip
    H = sites["layers.*.attn.q"].shape[3]
    labelled = out.units("layers.*.attn.pattern")
    assert len(labelled) == L * H and np.array_equal(labelled[(1, H - 1)], pattern[1][:, :, H - 1])

    zeroed = _run(model, ids, mask, edits={"layers.1.attn.out": Replace(jnp.zeros(()))})
    hook = ref.get_submodule(f"{blocks}.1.{names[1]}").register_forward_hook(
        lambda _, __, o: (torch.zeros_like(o[0]), *o[1:]) if isinstance(o, tuple) else torch.zeros_like(o)
    )
    with torch.inference_mode():
        hooked = ref(input_ids=t_ids, attention_mask=t_mask).logits.numpy()
    hook.remove()
    ours = np.asarray(zeroed.logits)
    assert np.abs(ours[real] - hooked[real]).max() <= _tol(L + 1, hooked[real])
    assert np.abs(ours - np.asarray(out.logits))[real].max() > 1e-3  # the edit mattered: the check can fail


def test_tokenize_adds_a_causal_models_bos_once_and_pads_right(models):
    model = models["llama"]
    ids, mask = iv.tokenize(model, ["a b", "a b c d"])
    plain = model.tokenizer(["a b c d"], add_special_tokens=False)["input_ids"][0]
    assert np.asarray(ids)[1].tolist() == [model.vocab.bos_id, *plain]
    assert np.asarray(mask).sum(axis=1).tolist() == [len(model.tokenizer("a b", add_special_tokens=False)["input_ids"]) + 1,
                                                     len(plain) + 1]  # fmt: skip
    out = iv.run(model, ids, mask)
    np.testing.assert_array_equal(np.asarray(out.logits), np.asarray(head_logits(model.head, out.hidden)))


def test_bound_edits_and_labels_are_refused_by_name(models, tiny_checkpoint):
    model = models["gpt2"]
    ids, mask = _inputs(model)
    L = iv.layer_count(model.params["body"])
    H = iv.site_shapes(model.port, model.params["body"], config=model.config)["attn.heads"][0]
    with pytest.raises(ModelError, match=r"site 'layers.0.attn.heads': value of shape \(5, 3\) does not broadcast"):
        model.with_edits({"layers.0.attn.heads": Replace(jnp.zeros((5, 3)))})
    with pytest.raises(ModelError, match=r"unknown site 'layers.0.mlp.inn'"):
        model.with_edits({"layers.0.mlp.inn": Add(jnp.zeros(()))})
    cut = model.with_edits(iv.ablate_heads({0: [1]}, L, H))
    with pytest.raises(ModelError, match=r"site 'layers.\*.attn.heads' is edited by the model's bound edits"):
        iv.run(cut, ids, mask, edits=iv.ablate_heads({1: [0]}, L, H))
    with pytest.raises(ModelError, match=r"a head is a \[layer, head\] pair, got \[0, 1, 2\]"):
        iv.unit_mask([[0, 1, 2]], L, H)
    out = iv.run(cut, ids, mask, read=["layers.0.resid_post"])
    with pytest.raises(ModelError, match=r"site 'layers.0.attn.heads' was not read: pass it in read="):
        out.units("layers.0.attn.heads")
    with pytest.raises(ModelError, match=r"site 'layers.0.resid_post' has no units to label"):
        out.units("layers.0.resid_post")
    t5 = load_model(tiny_checkpoint(V11))
    with pytest.raises(ModelError, match=r"encoder-decoder .*edits are not bound into it; pass them"):
        t5.with_edits({"final_norm": Add(jnp.zeros(()))})


def test_a_bound_plan_compiles_once_whatever_its_arrays(models):
    """The edits' pytree structure is the plan jit keys on; new arrays of the same plan reuse the compilation."""
    from jaxassoc.models.base import _forward

    model = models["gpt2"]
    ids, mask = _inputs(model)
    L = iv.layer_count(model.params["body"])
    D = iv.site_shapes(model.port, model.params["body"], config=model.config)["resid_post"][-1]
    rng = np.random.default_rng(0)  # not a constant shift: a LayerNorm would remove that
    deltas = [jnp.asarray(rng.normal(size=(L, 1, 1, D)), jnp.float32) for _ in range(3)]
    cuts = [model.with_edits({"layers.*.resid_post": Add(delta)}) for delta in deltas]
    cuts[0].forward(cuts[0].params["body"], ids, mask)
    before = _forward._cache_size()
    outs = [cut.forward(cut.params["body"], ids, mask).hidden for cut in cuts[1:]]
    assert _forward._cache_size() == before  # no new compilation
    assert np.abs(np.asarray(outs[0] - outs[1])).max() > 1e-3  # the arrays did change the output
