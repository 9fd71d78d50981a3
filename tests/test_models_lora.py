"""Low-rank adapters (``jaxassoc.models.lora``): a zero-initialised ``B`` leaves every family's forward bit for bit
as it was; with random ``A`` and ``B`` the adapted logits equal peft's (transformers, torch float32) for GPT-2
(fused ``c_attn``), Llama and BERT; ``merged`` folds them into a checkpoint transformers and ``load_model`` read
with the adapted logits; cached decoding, packing, named-site reads and a 2x4 mesh run the adapted model as its
plain forward does; a layer subset leaves the other layers exact; the fingerprint follows the adapters' arrays;
bad specs are ConfigErrors that name what is wrong.

Tolerances (``tests/tolerances.py``): an adapted projection is three products where the base had one, ``x W``,
``x A`` (inner size n_in <= INNER) and ``(x A) B`` (inner size r), plus the scaling and the sum; with the adapter's
term no larger than the weight's (:func:`_fitted` draws ``B`` so that ``|s A B| <= |W| / 2`` entrywise), each added
product rounds at most as much as one base product does, so an adapted block rounds as at most 3 blocks:
``f32_chain(3 L + 1, INNER, scale)`` for L adapted blocks and the head (``ADAPTED``)."""

import functools
import logging

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from safetensors.numpy import load_file
from tolerances import EPS32, f32_chain, f32_sum

from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models import lora, model_limits, run_batched
from jaxassoc.models.heads import head_logits
from jaxassoc.models.interventions import layer_count, run, tokenize
from jaxassoc.models.loading import load_model
from jaxassoc.models.mesh import make_mesh
from jaxassoc.models.packing import run_packed

INNER = 128  # the widest matmul of the models compared within a bound (GPT-2's MLP, 4 x 32)
ADAPTED = 3  # an adapted block rounds as at most 3 base blocks (module docstring)
R, ALPHA = 4, 12.0  # scaling alpha / r = 3
TEXTS = ["The doctor said that he would help", "She studies math", "music and friends"]
# the zero-B check: by default on the tiny GPT-2, Llama and BERT the other tests load (so its forward programs are
# theirs, compiled once), with the slow tests on every causal family's conformance specs and RoBERTa
ALL_SPECS = [
    *(pytest.param(family_specs.TINY[f], id=family_specs.TINY[f].name) for f in ("llama", "bert")),
    *(
        pytest.param(s, id=s.name, marks=pytest.mark.slow)
        for s in [*family_specs.all_specs(), family_specs.TINY["gpt2"], family_specs.TINY["roberta"]]
    ),
]


@pytest.fixture(scope="module")
def loaded(tiny_checkpoint):
    """``loaded(name_or_spec) -> (folder, model)``: each tiny checkpoint loaded once per module."""
    cache = {}

    def get(spec):
        spec = family_specs.TINY[spec] if isinstance(spec, str) else spec
        key = spec.name
        if key not in cache:
            folder = tiny_checkpoint(spec)
            cache[key] = folder, load_model(folder)
        return cache[key]

    return get


def _layers(model) -> int:
    return layer_count(model.params["body"])


def _tol(model, ref, head=True) -> float:
    """float32 of two programs of the adapted ``model`` (or it and transformers / peft), through its adapted
    blocks (and the head), scaled by the compared outputs: ``f32_chain(3 L (+ 1), INNER, max|ref|)``."""
    depth = ADAPTED * _layers(model) + int(head)
    return f32_chain(depth, INNER, float(np.abs(np.asarray(ref)).max()))


def _targets(model) -> tuple[str, ...]:
    """Every projection the family offers (attn.q/k/v/o, mlp.up/down, mlp.gate where present)."""
    return tuple(sorted(lora.projections(model.port.abstract_body(model.config))))


def _logits(model, ids, mask):
    return np.asarray(head_logits(model.head, model.forward(model.params["body"], ids, mask).hidden))


def _weight(model, path) -> np.ndarray:
    return np.asarray(functools.reduce(lambda tree, key: tree[key], path, model.params["body"])["w"])


def _fitted(a, b, scale, w) -> np.ndarray:
    """``b`` (stacked ``(L, r, out)``) scaled so that the largest entry of the adapter's weight ``s A B`` over its
    adapted layers is half the largest of the weight ``w`` it adapts: large enough to change every output, and
    within the tolerances' premise (module docstring)."""
    delta = np.einsum("lir,lro->lio", a, b) * np.asarray(scale)[:, None, None]
    return (b * (0.5 * np.abs(w).max() / np.abs(delta).max())).astype(np.float32)


def _nonzero(model, seed=0):
    """``model`` with each adapter's ``B`` random (Gaussian, then :func:`_fitted`), ``A`` as ``add_adapters``
    drew it."""
    rng = np.random.default_rng(seed)
    params = {}
    for path, v in lora.adapters(model).items():
        b = _fitted(np.asarray(v["a"]), rng.normal(size=v["b"].shape), v["scale"], _weight(model, path))
        params["/".join(path)] = {"a": v["a"], "b": jnp.asarray(b)}
    out = lora.with_trainable(model, params)
    _check_magnitudes(out)
    return out


def _check_magnitudes(model):
    """The tolerances' premise: no entry of an adapter's weight ``s A B`` is larger than the largest of ``W``."""
    for path, adapter in lora.adapters(model).items():
        delta = np.einsum("lir,lro->lio", np.asarray(adapter["a"]), np.asarray(adapter["b"]))
        delta *= np.asarray(adapter["scale"])[:, None, None]
        assert np.abs(delta).max() <= np.abs(_weight(model, path)).max(), path


def _adapted(model, spec=None, seed=0):
    spec = spec or lora.LoRASpec(R, ALPHA, targets=_targets(model))
    return _nonzero(lora.add_adapters(model, spec, jax.random.key(seed)), seed)


# --- 1. zero B: the base model bit for bit ---------------------------------------------------------------------


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_zero_b_is_the_base_forward_bit_for_bit(loaded, spec):
    _, model = loaded(spec)
    targets = _targets(model)
    assert {"attn.q", "attn.k", "attn.v", "attn.o"} <= set(targets)
    if model.family != "mixtral":  # a mixture's MLP is not offered (test_a_mixture_of_experts_mlp_is_not_offered)
        assert {"mlp.up", "mlp.down"} <= set(targets)
    adapted = lora.add_adapters(model, lora.LoRASpec(R, ALPHA, targets=targets), jax.random.key(0))
    found = lora.adapters(adapted)
    assert sorted(".".join(p[1:]) for p in found) == sorted(targets)
    for path, adapter in found.items():
        n_in = adapter["a"].shape[-2]
        assert adapter["a"].dtype == adapter["b"].dtype == jnp.float32
        assert 0 < np.abs(np.asarray(adapter["a"])).max() <= 1 / np.sqrt(n_in)  # peft's Kaiming-uniform bound
        assert not np.asarray(adapter["b"]).any()
        np.testing.assert_array_equal(np.asarray(adapter["scale"]), np.full(_layers(model), ALPHA / R, np.float32))
    ids, mask = tokenize(model, TEXTS)
    np.testing.assert_array_equal(_logits(adapted, ids, mask), _logits(model, ids, mask))


@pytest.mark.slow
def test_at_zero_b_only_b_gets_a_gradient(loaded):
    """d/dA of s (x A) B is x^T (g B^T) s: exactly zero while B is; d/dB is not (training starts)."""
    _, model = loaded("gpt2")
    adapted = lora.add_adapters(model, lora.LoRASpec(R, ALPHA), jax.random.key(0))
    ids, mask = tokenize(model, TEXTS)

    def loss(params):
        m = lora.with_trainable(adapted, params)
        return head_logits(m.head, m.forward(m.params["body"], ids, mask).hidden).std()

    grads = jax.grad(loss)(lora.trainable(adapted))
    assert sorted(grads) == ["layers/attn/q", "layers/attn/v"]
    for g in grads.values():
        assert not np.asarray(g["a"]).any() and np.asarray(g["b"]).any()


# --- 2. peft parity -----------------------------------------------------------------------------------------------

# our projection -> the HF module, with {l} for the layer (GPT-2's c_attn holds q, k and v side by side, in this
# order)
_GPT2 = "transformer.h.{l}."
_BERT = "bert.encoder.layer.{l}."
PEFT = {
    "gpt2": {
        "attn.q": _GPT2 + "attn.c_attn",
        "attn.k": _GPT2 + "attn.c_attn",
        "attn.v": _GPT2 + "attn.c_attn",
        "attn.o": _GPT2 + "attn.c_proj",
        "mlp.up": _GPT2 + "mlp.c_fc",
        "mlp.down": _GPT2 + "mlp.c_proj",
    },
    "llama": {
        f"{part}.{ours}": f"model.layers.{{l}}.{hf_part}.{hf}_proj"
        for part, hf_part, pairs in [
            ("attn", "self_attn", [("q", "q"), ("k", "k"), ("v", "v"), ("o", "o")]),
            ("mlp", "mlp", [("gate", "gate"), ("up", "up"), ("down", "down")]),
        ]
        for ours, hf in pairs
    },
    "bert": {
        "attn.q": _BERT + "attention.self.query",
        "attn.k": _BERT + "attention.self.key",
        "attn.v": _BERT + "attention.self.value",
        "attn.o": _BERT + "attention.output.dense",
        "mlp.up": _BERT + "intermediate.dense",
        "mlp.down": _BERT + "output.dense",
    },
}


def _peft_model(family, folder, layers):
    """The torch model of ``folder`` with peft adapters of rank R on the HF modules :data:`PEFT` maps ours to,
    each named exactly (a regular expression of the full module names: BERT's MLM head has a ``dense`` too)."""
    import peft

    names = sorted({hf.format(l=layer) for hf in PEFT[family].values() for layer in range(layers)})
    pattern = "|".join(n.replace(".", r"\.") for n in names)
    config = peft.LoraConfig(
        r=R,
        lora_alpha=ALPHA,
        target_modules=f"^(?:.*\\.)?(?:{pattern})$",
        lora_dropout=0.0,
        fan_in_fan_out=family == "gpt2",  # GPT-2's Conv1D stores its weight (in, out)
    )
    model = peft.get_peft_model(family_specs.load_torch(family, folder), config).eval()
    adapted = sorted(n.removesuffix(".lora_A") for n, _ in model.named_modules() if n.endswith(".lora_A"))
    assert [n.removeprefix("base_model.model.") for n in adapted] == names  # these modules and no others
    return model


def _shared_adapters(family, model, torch_model, seed=0):
    """Our adapted model with random A and nonzero B (:func:`_fitted`), the same arrays set in peft's adapters
    (lora_A.weight (r, in), lora_B.weight (out, r): ours A (in, r) and B (r, out) of each layer, transposed);
    GPT-2's c_attn adapter is ours on attn.q, attn.k and attn.v, with their common A and their three B side by
    side."""
    rng = np.random.default_rng(seed)
    targets = tuple(PEFT[family])
    adapted = lora.add_adapters(model, lora.LoRASpec(R, ALPHA, targets=targets), jax.random.key(seed))
    scale = np.full(_layers(model), ALPHA / R, np.float32)
    params, a_of, b_of = {}, {}, {}
    for target, hf in PEFT[family].items():
        path = ("layers", *target.split("."))
        w = _weight(model, path)
        L, n_in, n_out = w.shape
        if hf not in a_of:
            a_of[hf] = rng.uniform(-1 / np.sqrt(n_in), 1 / np.sqrt(n_in), (L, n_in, R)).astype(np.float32)
        b = _fitted(a_of[hf], rng.normal(size=(L, R, n_out)), scale, w)
        b_of.setdefault(hf, []).append(b)
        params["/".join(path)] = {"a": jnp.asarray(a_of[hf]), "b": jnp.asarray(b)}
    assert sorted(params) == sorted(lora.trainable(adapted))
    modules = dict(torch_model.named_modules())
    for hf, a in a_of.items():
        b = np.concatenate(b_of[hf], axis=-1)  # c_attn: (L, r, 3 D), q | k | v
        for layer in range(len(a)):
            module = modules["base_model.model." + hf.format(l=layer)]
            with torch.no_grad():
                module.lora_A["default"].weight.copy_(torch.from_numpy(a[layer].T))
                module.lora_B["default"].weight.copy_(torch.from_numpy(np.ascontiguousarray(b[layer].T)))
    adapted = lora.with_trainable(adapted, params)
    _check_magnitudes(adapted)
    return adapted


def _torch_logits(torch_model, ids, mask):
    with torch.no_grad():
        out = torch_model(input_ids=torch.tensor(np.asarray(ids)), attention_mask=torch.tensor(np.asarray(mask)))
    return out.logits.numpy()


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) for f in ("gpt2", "llama", "bert")])
def test_adapted_logits_equal_peft(loaded, family, tmp_path):
    folder, model = loaded(family)
    torch_model = _peft_model(family, folder, _layers(model))
    adapted = _shared_adapters(family, model, torch_model)
    ids, mask = tokenize(model, TEXTS)
    real = np.asarray(mask).astype(bool)
    ref = _torch_logits(torch_model, ids, mask)[real]
    ours = _logits(adapted, ids, mask)[real]
    base = _logits(model, ids, mask)[real]
    tol = _tol(adapted, ref)
    assert np.abs(ours - base).max() > 100 * tol  # the adapters matter
    diff = float(np.abs(ours - ref).max())
    assert diff <= tol, (diff, tol)

    # peft's merge (W + s (B A)^T per module, fused c_attn included) gives the tensors lora.merged saves: each
    # entry W + s (a sum of r products) on either side, rounded at each step: f32_sum(r + 2, max(|W'|, s|A||B|))
    saved = lora.merged(adapted).save(tmp_path / "merged")
    tensors = load_file(saved / "model.safetensors")
    arrays = lora.adapters(adapted).values()
    product = (
        ALPHA / R * max(float(np.abs(x["a"]).max()) for x in arrays) * max(float(np.abs(x["b"]).max()) for x in arrays)
    )
    merged_torch = {k: v.numpy() for k, v in torch_model.merge_and_unload().state_dict().items()}
    source = load_file(folder / "model.safetensors")
    for hf in sorted(set(PEFT[family].values())):
        for layer in range(_layers(model)):
            name = hf.format(l=layer) + ".weight"
            ours, theirs = tensors[name], merged_torch[name]
            assert not np.array_equal(ours, source[name])  # folded
            tol = f32_sum(R + 2, max(float(np.abs(theirs).max()), product))
            assert np.abs(ours - theirs).max() <= tol, name


# --- 3. merged export -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["gpt2", *(pytest.param(f, marks=pytest.mark.slow) for f in ("llama", "bert"))])
def test_merged_export_loads_with_the_adapted_logits(loaded, family, tmp_path):
    import transformers

    folder, model = loaded(family)
    adapted = _adapted(model)
    ids, mask = tokenize(model, TEXTS)
    real = np.asarray(mask).astype(bool)
    ours = _logits(adapted, ids, mask)[real]
    merged = lora.merged(adapted)
    assert lora.adapters(merged) == {} and lora.count(merged) == 0
    saved = merged.save(tmp_path / "merged")
    auto = transformers.AutoModelForCausalLM if model.objective == "causal" else transformers.AutoModelForMaskedLM
    ref = _torch_logits(auto.from_pretrained(saved).eval(), ids, mask)[real]
    tol = _tol(adapted, ref)  # x (W + s A B) against x W + s (x A) B: the same products, otherwise grouped
    assert np.abs(ours - _logits(model, ids, mask)[real]).max() > 100 * tol  # the adapters matter
    diff = float(np.abs(ours - ref).max())
    assert diff <= tol, (diff, tol)
    back = load_model(saved)
    assert lora.adapters(back) == {}
    np.testing.assert_array_equal(_logits(back, ids, mask)[real], _logits(merged, ids, mask)[real])  # same weights
    assert np.abs(_logits(back, ids, mask)[real] - ours).max() <= tol


def test_merged_folds_only_the_adapted_layers_and_a_plain_model_is_itself(loaded):
    _, model = loaded("gpt2")
    assert lora.merged(model) is model
    adapted = _adapted(model, lora.LoRASpec(R, ALPHA, targets=("attn.q",), layers=(1,)))
    merged = lora.merged(adapted)
    w0, w1 = (np.asarray(m.params["body"]["layers"]["attn"]["q"]["w"]) for m in (model, merged))
    np.testing.assert_array_equal(w1[0], w0[0])  # scale 0 on layer 0: nothing folded
    a, b = (np.asarray(lora.adapters(adapted)["layers", "attn", "q"][k][1], np.float64) for k in "ab")
    expected = w0[1] + ALPHA / R * a @ b
    # one float32 sum of r products, the scaling, the sum with W: f32_sum(r + 2, max |W'|)
    assert np.abs(w1[1] - expected).max() <= f32_sum(R + 2, float(np.abs(expected).max()))


# --- 4. unmerged adapters are not saved ------------------------------------------------------------------------------


def test_saving_unmerged_adapters_is_refused_by_name(loaded, tmp_path):
    _, model = loaded("gpt2")
    adapted = lora.add_adapters(model, lora.LoRASpec(R, ALPHA, targets=("attn.q", "mlp.down")), jax.random.key(0))
    with pytest.raises(ModelError, match=r"low-rank adapters \(layers\.attn\.q, layers\.mlp\.down\).*lora\.merged"):
        adapted.save(tmp_path / "saved")
    assert not (tmp_path / "saved").exists() and list(tmp_path.iterdir()) == []


# --- 5. the adapted forward is the same forward everywhere ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_cached_decoding_runs_the_adapters(loaded, family):
    _, model = loaded(family)
    adapted = _adapted(model)
    ids = jnp.array([[0, 0, 7, 8, 9, 10, 11, 12], [3, 4, 5, 6, 7, 8, 9, 10]])
    mask = jnp.array([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])
    body = adapted.params["body"]
    full = np.asarray(adapted.forward(body, ids, mask).hidden)
    dec = adapted.decoder
    cache = dec.init_cache(2, 8, jnp.float32)
    hidden, cache = dec.forward_cached(body, ids[:, :5], mask, cache, 0)
    steps = [np.asarray(hidden)]
    for t in range(5, 8):
        hidden, cache = dec.forward_cached(body, ids[:, t : t + 1], mask, cache, t)
        steps.append(np.asarray(hidden))
    got = np.concatenate(steps, axis=1)
    tol = _tol(adapted, full, head=False)
    base = np.asarray(model.forward(model.params["body"], ids, mask).hidden)
    assert np.abs(full[1] - base[1]).max() > 100 * tol  # the adapters matter
    np.testing.assert_allclose(got[0, 2:], full[0, 2:], rtol=0, atol=tol)
    np.testing.assert_allclose(got[1], full[1], rtol=0, atol=tol)


@pytest.mark.slow
def test_packed_rows_run_the_adapters(loaded):
    _, model = loaded("llama")
    adapted = _adapted(model)
    rng = np.random.default_rng(1)
    sequences = [rng.integers(3, 97, size=int(k)).tolist() for k in rng.integers(1, 14, size=12)]

    def fn(p, ids, segments):
        return adapted.forward(p["body"], ids, segments).hidden

    packed = run_packed(fn, adapted.params, sequences, pad_id=0, row_length=32, tokens_per_batch=64)
    T = max(map(len, sequences))
    ids = np.array([s + [0] * (T - len(s)) for s in sequences], np.int32)
    mask = np.array([[1] * len(s) + [0] * (T - len(s)) for s in sequences], np.int32)
    alone = np.asarray(jax.jit(fn)(adapted.params, ids, mask))
    for seq, out, row in zip(sequences, packed, alone, strict=True):
        np.testing.assert_allclose(out, row[: len(seq)], rtol=0, atol=_tol(adapted, row[: len(seq)], head=False))


@pytest.mark.slow
def test_named_site_reads_are_the_adapted_forward(loaded):
    _, model = loaded("llama")
    adapted = _adapted(model)
    ids, mask = tokenize(model, TEXTS)
    body = adapted.params["body"]
    L = _layers(adapted)
    plain = jax.jit(lambda b, i, m: adapted.forward(b, i, m, all_layers=True))(body, ids, mask)
    hidden = jax.jit(lambda b, i, m: adapted.forward(b, i, m).hidden)(body, ids, mask)

    def read(m):
        sites = ["layers.*.resid_post", "layers.*.attn.q"]
        return jax.jit(lambda p, i, k: run(m.with_params(p), i, k, read=sites))(m.params, ids, mask)

    nothing = jax.jit(lambda p, i, k: run(adapted.with_params(p), i, k).hidden)(adapted.params, ids, mask)
    np.testing.assert_array_equal(np.asarray(nothing), np.asarray(hidden))  # reading and editing nothing
    out, base = read(adapted), read(model)
    # returning the sites: another program, the same values up to rounding through the (adapted) layers
    np.testing.assert_allclose(out.hidden, plain.hidden, rtol=0, atol=_tol(adapted, plain.hidden, head=False))
    for i in range(L - 1):  # a causal body's last state is after the final norm
        tol = f32_chain(ADAPTED * (i + 1), INNER, float(np.abs(plain.layers[i + 1]).max()))
        np.testing.assert_allclose(out.sites["layers.*.resid_post"][i], plain.layers[i + 1], rtol=0, atol=tol)
    q, q0 = np.asarray(out.sites["layers.*.attn.q"][0]), np.asarray(base.sites["layers.*.attn.q"][0])
    assert np.abs(q - q0).max() > 100 * f32_chain(ADAPTED, INNER, float(np.abs(q).max()))  # the adapted q


def _relative(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(a)).max())


@pytest.mark.slow  # a model placed on the mesh and compiled for 8 devices
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_2x4_mesh_places_the_adapters_sharded_and_gives_the_one_device_outputs(loaded, family, caplog):
    assert len(jax.devices()) == 8
    folder, one = loaded(family)
    mesh = make_mesh(data=1, fsdp=2, tp=4)
    many = load_model(folder, mesh=mesh)
    adapted = _adapted(one)
    with caplog.at_level(logging.WARNING, logger="jaxassoc.models.mesh"):
        sharded = lora.with_adapters(many, lora.adapters(adapted))  # placed as their weights
    found = lora.adapters(sharded)
    for path, adapter in found.items():
        for name, leaf in adapter.items():
            assert isinstance(leaf.sharding, NamedSharding) and leaf.sharding.mesh == mesh, (path, name)
            np.testing.assert_array_equal(np.asarray(leaf), np.asarray(lora.adapters(adapted)[path][name]))
    attn = {k: found["layers", "attn", k] for k in "qkvo"}
    assert attn["q"]["a"].sharding.spec == P(None, "fsdp", None)  # A's input dimension as W's (embed: fsdp)
    assert attn["q"]["b"].sharding.spec == P(None, None, "tp")  # B's output dimension as W's (heads: tp)
    assert attn["o"]["a"].sharding.spec == P(None, "tp", None) and attn["o"]["b"].sharding.spec == P(None, None, "fsdp")
    shard = {tuple(s.data.shape) for s in attn["q"]["b"].addressable_shards}
    assert shard == {(attn["q"]["b"].shape[0], R, attn["q"]["b"].shape[2] // 4)}  # each device holds its slice
    if family == "llama":  # 2 key/value heads over tp=4: replicated, and logged under the adapter's own name
        assert attn["k"]["b"].sharding.spec == P(None, None, None)
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert "body/layers/attn/k/lora/b (kv_heads=2 over tp=4)" in logged, logged
    assert sharded.fingerprint() == adapted.fingerprint()

    def fn(m):
        def logits_and_layers(p, ids, mask):
            out = m.forward(p["body"], ids, mask, all_layers=True)
            return head_logits(p["head"], out.hidden), out.layers

        return jax.jit(logits_and_layers)

    rng = np.random.default_rng(0)
    seqs = [rng.integers(5, 100, rng.integers(2, 12)).tolist() for _ in range(8)]
    kw = dict(batch_size=4, **model_limits(one))
    a = run_batched(fn(adapted), adapted.params, seqs, **kw)
    b = run_batched(fn(sharded), sharded.params, seqs, mesh=mesh, **kw)
    # the mesh splits every product's inner sum into partial sums added in another order: two float32 programs
    # of the adapted blocks and the head, relative to each output's magnitude
    rtol = f32_chain(ADAPTED * _layers(one) + 1, INNER, 1.0)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert _relative(x, y) <= rtol


# --- 6. a layer subset --------------------------------------------------------------------------------------------


def test_a_layer_subset_adapts_only_those_layers(loaded):
    _, model = loaded("llama")
    targets = ("attn.q", "attn.v", "mlp.down")
    every = _adapted(model, lora.LoRASpec(R, ALPHA, targets=targets))
    later = _adapted(model, lora.LoRASpec(R, ALPHA, targets=targets, layers=(1,)))
    for adapter in lora.adapters(later).values():
        np.testing.assert_array_equal(np.asarray(adapter["scale"]), [0.0, ALPHA / R])
        assert np.asarray(adapter["b"][0]).any()  # B is drawn on layer 0 too: the scale masks it
    ids, mask = tokenize(model, TEXTS)
    base = model.forward(model.params["body"], ids, mask, all_layers=True).layers
    ours = later.forward(later.params["body"], ids, mask, all_layers=True).layers
    np.testing.assert_array_equal(np.asarray(ours[1]), np.asarray(base[1]))  # layer 0's resid_post
    assert not np.array_equal(np.asarray(ours[2]), np.asarray(base[2]))  # layer 1's
    q, v, down = ((32, 32), (32, 16), (64, 32))  # (in, out) of the tiny Llama's projections
    per_layer = sum(R * (n_in + n_out) for n_in, n_out in (q, v, down))
    assert lora.count(later) == per_layer and lora.count(every) == 2 * per_layer
    assert lora.count(model) == 0


# --- 7. fingerprint ----------------------------------------------------------------------------------------------


def test_the_fingerprint_follows_the_adapters_arrays(loaded):
    _, model = loaded("gpt2")
    spec = lora.LoRASpec(R, ALPHA)
    zero = lora.add_adapters(model, spec, jax.random.key(0))
    assert zero.fingerprint() != model.fingerprint()  # the same outputs, but other arrays
    assert lora.add_adapters(model, spec, jax.random.key(0)).fingerprint() == zero.fingerprint()  # equal arrays
    assert lora.add_adapters(model, spec, jax.random.key(1)).fingerprint() != zero.fingerprint()  # another A
    assert lora.without_adapters(zero).fingerprint() == model.fingerprint()
    a, b = _adapted(model, spec, seed=0), _adapted(model, spec, seed=0)
    assert a is not b and a.fingerprint() == b.fingerprint() != zero.fingerprint()
    assert _adapted(model, spec, seed=1).fingerprint() != a.fingerprint()  # another B
    changed = lora.trainable(a)
    changed["layers/attn/v"]["b"] = changed["layers/attn/v"]["b"].at[1, 0, 0].add(EPS32)
    assert lora.with_trainable(a, changed).fingerprint() != a.fingerprint()  # one float's last bit
    assert lora.with_trainable(a, lora.trainable(a), dtype=jnp.bfloat16).fingerprint() != a.fingerprint()
    merged = lora.merged(a)  # other weights: neither the base's fingerprint nor the adapted one's
    assert merged.fingerprint() not in (model.fingerprint(), a.fingerprint())
    assert lora.merged(b).fingerprint() == merged.fingerprint()


# --- 8. bad specs ---------------------------------------------------------------------------------------------------


def test_bad_specs_are_config_errors(loaded):
    _, gpt2 = loaded("gpt2")
    key = jax.random.key(0)
    for rank in (0, -2, 33):
        with pytest.raises(
            ConfigError, match=rf"LoRA rank {rank} for attn\.q \(32 -> 32\): the rank must be in 1\.\.32"
        ):
            lora.add_adapters(gpt2, lora.LoRASpec(rank=rank), key)
    with pytest.raises(ConfigError, match=r"rank 33 for mlp\.up \(32 -> 128\): the rank must be in 1\.\.32"):
        lora.add_adapters(gpt2, lora.LoRASpec(rank=33, targets=("mlp.up",)), key)
    assert lora.count(lora.add_adapters(gpt2, lora.LoRASpec(rank=32, targets=("mlp.up",)), key)) == 2 * 32 * 160
    projections = r"\['attn\.k', 'attn\.o', 'attn\.q', 'attn\.v', 'mlp\.down', 'mlp\.up'\]"
    with pytest.raises(
        ConfigError, match=rf"the gpt2 family has no projection 'mlp\.gate' to adapt; its projections: {projections}"
    ):
        lora.add_adapters(gpt2, lora.LoRASpec(targets=("attn.q", "mlp.gate")), key)
    with pytest.raises(ConfigError, match=r"no projection 'attn\.c_attn'"):
        lora.add_adapters(gpt2, lora.LoRASpec(targets=("attn.c_attn",)), key)
    with pytest.raises(ConfigError, match=r"at least one projection"):
        lora.add_adapters(gpt2, lora.LoRASpec(targets=()), key)
    for layer in (2, -1):
        with pytest.raises(ConfigError, match=rf"LoRA layer {layer} is out of range: this model has layers 0\.\.1"):
            lora.add_adapters(gpt2, lora.LoRASpec(layers=(0, layer)), key)


def test_a_mixture_of_experts_mlp_is_not_offered(loaded):
    spec = next(s for s in family_specs.all_specs() if s.name == "mixtral")
    _, mixtral = loaded(spec)
    offered = r"\['attn\.k', 'attn\.o', 'attn\.q', 'attn\.v'\]"
    for target in ("mlp.up", "mlp.gate", "mlp.down"):
        with pytest.raises(ConfigError, match=rf"the mixtral family has no projection '{target}'.*: {offered}$"):
            lora.add_adapters(mixtral, lora.LoRASpec(targets=(target,)), jax.random.key(0))
