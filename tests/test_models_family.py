"""The family contract: the registry, the NNX module of a loaded model (its state is ``model.params``),
head-only gradients through state filters, and the overrides of the cached forward (positions, allowed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from tolerances import f32_chain, f32_sum

from jaxassoc.errors import ModelError
from jaxassoc.models.family import LanguageModule, family_folders, family_for
from jaxassoc.models.heads import head_logits
from jaxassoc.models.loading import load_model
from jaxassoc.models.masks import causal_allowed, positions_from_mask

CAUSAL = ["gpt2", "llama", "mistral"]
WITH_HEAD = [*CAUSAL, "bert"]


@pytest.fixture(scope="module")
def models(tiny_checkpoint, tmp_path_factory):
    """One tiny model of each kind, loaded on first use."""
    loaded = {}

    def get(name):
        if name not in loaded:
            overrides = {"sliding_window": 3} if name == "mistral" else {}
            folder = tiny_checkpoint(name, seed=3, **overrides)
            loaded[name] = load_model(folder)
        return loaded[name]

    return get


def test_every_family_folder_is_registered():
    """Each sub-package of jaxassoc.models is a family registered under its model types."""
    import importlib

    assert {"bert", "gpt2", "llama"} <= set(family_folders())
    for folder in family_folders():
        family = importlib.import_module(f"jaxassoc.models.{folder}").FAMILY
        assert family.name == folder and all(family_for(t) is family for t in family.model_types)


def test_registry_finds_each_model_type_and_refuses_an_unknown_one_by_name():
    assert {t: family_for(t).name for t in ("gpt2", "bert", "roberta", "llama", "mistral")} == {
        "gpt2": "gpt2",
        "bert": "bert",
        "roberta": "bert",
        "llama": "llama",
        "mistral": "llama",
    }
    with pytest.raises(
        ModelError,
        match=r"model_type='xlnet'.*supported: \[.*'bert', .*'gpt2', .*'llama', "
        r".*'mistral', .*'roberta'.*\]",
    ):
        family_for("xlnet")
    assert family_for("roberta") is family_for("bert")
    bert = family_for("bert")
    assert bert.decoder(None) is None
    with pytest.raises(ModelError, match="the bert family is masked: it has no key/value-cache decoding"):
        bert.init_cache(None, 1, 4)


@pytest.mark.parametrize("name", [*WITH_HEAD, "bert-encoder"])
def test_module_state_is_the_params(models, name):
    """``nnx.split(model.module)`` gives back ``params["body"]`` and the head's arrays, the same buffers."""
    tiny = models(name)
    module = tiny.module
    assert isinstance(module, LanguageModule)
    _, state = nnx.split(module)
    pure = state.to_pure_dict()
    head = tiny.params["head"]
    expected = {"body": tiny.params["body"]} | (
        {} if head is None else {"head": {k: v for k, v in head._asdict().items() if v is not None}}
    )
    assert jax.tree.structure(pure) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(pure), jax.tree.leaves(expected)):
        assert got is want


@pytest.mark.parametrize("name", [*WITH_HEAD, "bert-encoder"])
def test_module_call_equals_the_pure_forward(models, name):
    tiny = models(name)
    ids = jnp.array([[5, 6, 7, 8], [0, 9, 10, 11]])
    mask = jnp.array([[1, 1, 1, 1], [0, 1, 1, 1]])
    hidden = tiny.forward(tiny.params["body"], ids, mask).hidden
    # not always the same XLA program (1 ulp apart on the logits here): tiny models, 2 layers (+ the head),
    # inner ≤ 128, in float32: f32_chain scaled by the outputs (atol=1e-6 had asked 4-15x less)
    if tiny.head is None:
        with pytest.raises(ModelError, match="no output head"):
            tiny.module(ids, mask)
        tol = f32_chain(2, 128, float(jnp.abs(hidden).max()))
        np.testing.assert_allclose(np.asarray(tiny.module.body(ids, mask).hidden), np.asarray(hidden), atol=tol)
        return
    logits = np.asarray(head_logits(tiny.head, hidden))
    np.testing.assert_allclose(np.asarray(tiny.module(ids, mask)), logits, atol=f32_chain(3, 128, np.abs(logits).max()))


@pytest.mark.parametrize("name", WITH_HEAD)
def test_head_only_gradient_through_a_state_filter(models, name):
    """Splitting the module into head and rest and differentiating the head state gives the gradient of
    the same loss written on ``Head`` directly; nothing of the body is differentiated."""
    tiny = models(name)
    ids, mask = jnp.array([[5, 6, 7, 8]]), jnp.array([[1, 1, 1, 1]])
    hidden = tiny.forward(tiny.params["body"], ids, mask).hidden
    graphdef, head_state, rest = nnx.split(tiny.module, nnx.PathContains("head"), ...)

    def loss(head_state):
        module = nnx.merge(graphdef, head_state, rest)
        return head_logits(module.head.as_head(), hidden).sum()

    grads = jax.grad(loss)(head_state).to_pure_dict()
    want = jax.grad(lambda h: head_logits(h, hidden).sum())(tiny.head)
    assert set(grads) == {"head"}
    # d Σ logits / dW = the sum of the 4 hidden states: f32_sum(4, |hidden|); rtol=1e-6 would not hold for
    # an entry where they cancel
    tol = f32_sum(ids.shape[1], float(jnp.abs(hidden).max()))
    np.testing.assert_allclose(np.asarray(grads["head"]["W"]), np.asarray(want.W), rtol=0, atol=tol)


def _causal(tiny):
    return tiny.decoder, getattr(tiny.config, "sliding_window", None)


@pytest.mark.parametrize("name", CAUSAL)
def test_cached_forward_with_its_default_overrides_is_unchanged(models, name):
    tiny = models(name)
    dec, _ = _causal(tiny)
    body = tiny.params["body"]
    ids = jnp.array([[0, 0, 7, 8, 9, 10, 11, 12], [3, 4, 5, 6, 7, 8, 9, 10]])
    mask = jnp.array([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])
    _, cache = dec.forward_cached(body, ids[:, :5], mask, dec.init_cache(2, 8), 0)
    plain, plain_cache = dec.forward_cached(body, ids[:, 5:], mask, cache, 5)
    positions = positions_from_mask(mask)[:, 5:]
    allowed = causal_allowed(mask)[:, :, 5:]  # the body applies a sliding window on the positions
    given, given_cache = dec.forward_cached(body, ids[:, 5:], mask, cache, 5, positions=positions, allowed=allowed)
    np.testing.assert_array_equal(np.asarray(given), np.asarray(plain))
    np.testing.assert_array_equal(np.asarray(given_cache.k), np.asarray(plain_cache.k))


@pytest.mark.parametrize("name", CAUSAL)
def test_two_continuations_after_a_shared_prefix_equal_each_run_alone(models, name):
    """A cached prefix, then two continuations side by side in one pass: block-causal ``allowed`` (each
    sees the prefix and itself, within the sliding window if any) and positions restarting after the
    prefix give each continuation the states it has when it runs alone after the prefix."""
    tiny = models(name)
    dec, window = _causal(tiny)
    body = tiny.params["body"]
    prefix, first, second = [5, 6, 7, 8], [9, 10, 11], [12, 13]
    P, T = len(prefix), len(prefix) + len(first) + len(second)
    mask = jnp.ones((1, T), jnp.int32)
    _, cache = dec.forward_cached(body, jnp.array([prefix]), mask, dec.init_cache(1, T), 0)
    branch = np.array([0] * P + [1] * len(first) + [2] * len(second))  # 0: the shared prefix
    pos = np.concatenate([np.arange(P), P + np.arange(len(first)), P + np.arange(len(second))])
    q, k = np.arange(P, T)[:, None], np.arange(T)[None, :]
    allowed = ((branch[k] == 0) | (branch[k] == branch[q])) & (pos[k] <= pos[q])
    if window is not None:
        allowed &= pos[k] > pos[q] - window
    hidden, _ = dec.forward_cached(
        body,
        jnp.array([first + second]),
        mask,
        cache,
        P,
        positions=jnp.asarray(pos[None, P:]),
        allowed=jnp.asarray(allowed[None, None]),
    )
    for cont, columns in ((first, slice(0, len(first))), (second, slice(len(first), None))):
        ids = jnp.array([prefix + cont])
        alone = tiny.forward(body, ids, jnp.ones_like(ids)).hidden[0, P:]
        # float32, 2 layers, inner ≤ 128 (rtol=1e-4 had allowed 10x more)
        tol = f32_chain(2, 128, float(jnp.abs(alone).max()))
        np.testing.assert_allclose(np.asarray(hidden[0, columns]), np.asarray(alone), rtol=0, atol=tol)


def test_a_parameter_without_logical_axes_is_refused_when_the_model_is_built():
    """Axes live on the parameters (``layers.zeros(..., axes=...)``): a body that makes one without them is
    refused, naming it, when its abstract module is built (before any weight is read), not at placement."""
    import dataclasses

    from flax import nnx

    from jaxassoc.models.layers import zeros

    class Body(nnx.Module):
        def __init__(self, config, body=None):
            self.embed = zeros(8, 4, axes=("vocab", "embed"))
            self.stray = nnx.Param(jnp.zeros((4, 4)))

    family = dataclasses.replace(family_for("gpt2"), name="toy", new_body=Body)
    with pytest.raises(ModelError, match=r"toy body declares no logical axes for its parameters \['body/stray'\]"):
        family.abstract_body(None)
    with pytest.raises(ModelError, match=r"body/stray"):
        family.param_axes(None)
    with pytest.raises(ModelError, match=r"shape \(8, 4\) was given 1 logical axes"):
        zeros(8, 4, axes=("vocab",))


def test_a_loaded_model_holds_its_family(models):
    """``model.port`` is the Family that reads, builds and runs the model (no look-up by name); ``family`` is the
    name reports print. Only seq2seq families decode with an encoder."""
    model = models("gpt2")
    assert model.port is family_for("gpt2") and model.family == "gpt2"
    with pytest.raises(ModelError, match="gpt2 family is causal: it has no encoder-decoder decode"):
        model.port.decode(model.params["body"], None, None, None, None, config=model.config)
