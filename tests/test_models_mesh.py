"""Model-parallel sharding (jaxassoc.models.mesh): the per-family partition tables, the
replicate-and-log rule, mesh validation, and — on the 8 simulated CPU devices ``tests/conftest.py`` starts
JAX with — a 2×4 fsdp×tp mesh giving the single-device results for tiny GPT-2, Llama (GQA) and BERT
checkpoints, with each device holding only its slice of every sharded weight."""

import logging
import types

import jax
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from tolerances import f32_chain

from jaxassoc.embeddings.sentence import token_states
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_exact import set_exact
from jaxassoc.metrics.set_optax import SolverSettings, set_optax
from jaxassoc.models import load_model, model_limits, run_batched
from jaxassoc.models.checkpoint import LayerStack
from jaxassoc.models.decoding import greedy_generate
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import make_mesh, param_path, param_specs
from jaxassoc.models.packing import run_packed
from jaxassoc.models.precision import check_name
from jaxassoc.models.sizing import bytes_per_device

MESH_2x4 = types.SimpleNamespace(shape={"data": 1, "fsdp": 2, "tp": 4})  # param_specs reads only .shape


def _axes(model):
    """The model's parameters' logical axes, from their metadata."""
    return model.port.param_axes(model.config)


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "roberta"])
def test_every_weight_has_a_partition_annotation(tiny_checkpoint, tmp_path, family):
    model = load_model(tiny_checkpoint(family))
    names = {
        "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
        for path, _ in jax.tree_util.tree_leaves_with_path(model.params)
    }
    axes = _axes(model)
    assert names <= set(axes)  # every leaf annotated (param_specs raises otherwise)
    specs = param_specs(model.params, axes, MESH_2x4)
    assert all(isinstance(s, P) for s in jax.tree.leaves(specs, is_leaf=lambda x: isinstance(x, P)))


def test_a_dimension_the_axis_does_not_divide_is_replicated_and_logged_once(tiny_checkpoint, tmp_path, caplog):
    # 4 query heads shard over tp=4; 2 KV heads do not, though their width (2 × 8) is a multiple of 4
    model = load_model(tiny_checkpoint("llama"))
    with caplog.at_level(logging.WARNING, logger="jaxassoc.models.mesh"):
        specs = param_specs(model.params, _axes(model), MESH_2x4)
    attn = specs["body"]["layers"]["attn"]
    assert attn["q"]["w"] == P(None, "fsdp", "tp") and attn["o"]["w"] == P(None, "tp", "fsdp")
    assert attn["k"]["w"] == P(None, "fsdp", None) and attn["v"]["w"] == P(None, "fsdp", None)
    assert specs["head"].W == P("tp", "fsdp") and specs["body"]["final_norm"]["scale"] == P(None)
    records = [r.getMessage() for r in caplog.records]
    assert len(records) == 1, records
    assert "body/layers/attn/k/w (kv_heads=2 over tp=4)" in records[0] and "body/layers/attn/v/w" in records[0]


def test_a_vocabulary_the_axis_does_not_divide_is_replicated(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("gpt2"))
    mesh = types.SimpleNamespace(shape={"data": 1, "fsdp": 1, "tp": 3})  # vocab 320, 4 heads, MLP 128
    specs = param_specs(model.params, _axes(model), mesh)
    layers = specs["body"]["layers"]
    assert specs["head"].W == P(None, None) and layers["attn"]["q"]["w"] == P(None, None, None)
    assert layers["mlp"]["up"]["w"] == P(None, None, None)
    mesh.shape["tp"] = 2
    specs = param_specs(model.params, _axes(model), mesh)
    assert specs["head"].W == P("tp", None) and specs["body"]["layers"]["mlp"]["up"]["w"] == P(None, None, "tp")


def test_a_mesh_whose_sizes_do_not_multiply_to_the_device_count_is_a_config_error():
    n = len(jax.devices())
    with pytest.raises(
        ConfigError,
        match=rf"mesh.data=1, mesh.fsdp=2, mesh.tp={n} multiply to {2 * n} devices but there are {n} devices",
    ):
        make_mesh(data=1, fsdp=2, tp=n)
    with pytest.raises(ConfigError, match=r"mesh.tp=0: each must be a positive integer"):
        make_mesh(tp=0)
    with pytest.raises(ConfigError, match=rf"mesh.fsdp=3, mesh.tp=1: 3 does not divide the {n} devices"):
        make_mesh(data=-1, fsdp=3)
    assert make_mesh() is None  # one device: no mesh


def test_a_precision_that_is_not_a_policy_is_a_config_error():
    with pytest.raises(ConfigError, match=r"model.precision=int8 is not a precision policy; use one of"):
        check_name("int8")


def test_a_layer_stack_reads_only_the_slice_asked_for(tmp_path):
    parts = []
    for i in range(3):
        np.save(tmp_path / f"{i}.npy", np.arange(24, dtype=np.float32).reshape(4, 6) + 100 * i)
        parts.append(np.load(tmp_path / f"{i}.npy", mmap_mode="r").T)  # (6, 4) views of memory maps
    stack, whole = LayerStack(parts), np.stack(parts)
    assert stack.shape == whole.shape and stack.dtype == np.float32
    for index in [(slice(1, 3), slice(0, 3), slice(2, 4)), (slice(None), slice(3, 6), slice(None)), (1,)]:
        np.testing.assert_array_equal(stack[index], whole[index])
    np.testing.assert_array_equal(np.asarray(stack, dtype=ml_dtypes.bfloat16), whole.astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_bfloat16_loading_casts_each_leaf(tiny_checkpoint, tmp_path, family):
    folder = tiny_checkpoint(family)
    full, half = load_model(folder), load_model(folder, precision="bfloat16")
    for a, b in zip(jax.tree.leaves(full.params), jax.tree.leaves(half.params)):
        assert b.dtype == jax.numpy.bfloat16
        np.testing.assert_array_equal(np.asarray(a.astype(jax.numpy.bfloat16)), np.asarray(b))
    assert half.head.W.unsafe_buffer_pointer() != half.params["body"]["embed"].unsafe_buffer_pointer()


def _diff(a, b) -> float:
    return max(
        float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def _relative_diff(a, b) -> float:
    """The largest difference of each leaf relative to that leaf's largest magnitude (hidden states and
    logits differ in scale)."""
    return max(
        float(np.abs(np.asarray(x) - np.asarray(y)).max() / max(np.abs(np.asarray(x)).max(), 1e-30))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


# The mesh splits every matmul's inner sum into partial sums added in another order: two float32 programs of
# 2 layers + the head (inner sizes <= 64), f32_chain(3, 64, 1) = 5.7e-6 relative to each output's magnitude.
MESH_RTOL = f32_chain(3, 64, 1.0)


def _logits_and_layers(model):
    def fn(p, ids, mask):
        out = model.forward(p["body"], ids, mask, all_layers=True)
        return head_logits(p["head"], out.hidden), out.layers

    return jax.jit(fn)


def _token_logprobs(model):
    def fn(p, ids, segments):
        logits = head_logits(p["head"], model.forward(p["body"], ids, segments).hidden)
        return jax.nn.log_softmax(logits, -1)[:, :-1].max(-1)

    return jax.jit(fn)


def _mesh_report(folder, mesh, seqs) -> dict:
    """One checkpoint loaded on one device and on the mesh: where each leaf lies and how far the results are."""
    one, many = load_model(folder), load_model(folder, mesh=mesh)
    r = {"family": many.family, "leaves": {}}
    for path, leaf in jax.tree_util.tree_leaves_with_path(many.params):
        s = leaf.sharding
        assert isinstance(s, NamedSharding) and s.mesh == mesh
        shapes = {tuple(sh.data.shape) for sh in leaf.addressable_shards}
        assert shapes == {s.shard_shape(leaf.shape)}, (param_path(path), shapes)
        r["leaves"][param_path(path)] = {
            "spec": [a for a in s.spec] + [None] * (leaf.ndim - len(s.spec)),
            "bytes": leaf.size * leaf.dtype.itemsize,
            "device_bytes": sum(sh.data.size * sh.data.dtype.itemsize for sh in leaf.addressable_shards),
        }
    kw = dict(batch_size=4, **model_limits(one))
    r["logits_layers"] = _relative_diff(
        run_batched(_logits_and_layers(one), one.params, seqs, **kw),
        run_batched(_logits_and_layers(many), many.params, seqs, mesh=many.mesh, **kw),
    )
    if one.decoder is not None:
        kw = dict(tokens_per_batch=32, **model_limits(one))
        r["packed"] = _relative_diff(
            run_packed(_token_logprobs(one), one.params, seqs, **kw),
            run_packed(_token_logprobs(many), many.params, seqs, mesh=many.mesh, **kw),
        )
        r["greedy_equal"] = greedy_generate(one, seqs[:5], max_new_tokens=4) == greedy_generate(
            many, seqs[:5], max_new_tokens=4
        )
    hidden = jax.jit(lambda p, i, m: one.forward(p["body"], i, m).hidden)
    x = np.stack([run_batched(hidden, one.params, [s], pad_id=0)[0][-1] for s in seqs[:4]])[:, None]
    gold = np.array([[3], [7], [11], [13]])
    settings = SolverSettings(n_outer=5, n_inner=10)
    a = set_optax(one.head.W, one.head.b, x, gold, candidates=16, settings=settings)
    b = set_optax(many.head.W, many.head.b, x, gold, candidates=16, settings=settings)
    r["set_optax"] = _diff(a.distance, b.distance)
    r["set_exact"] = _diff(
        set_exact(one.head.W, one.head.b, x[:, 0], gold[:, 0]).distance,
        set_exact(many.head.W, many.head.b, x[:, 0], gold[:, 0]).distance,
    )
    texts = ["the doctor said that", "she studies math and science", "music"]
    r["token_states"] = _relative_diff(token_states(one, texts, layer=1)[0], token_states(many, texts, layer=1)[0])
    r["head_still_sharded"] = not many.head.W.sharding.is_fully_replicated
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), many.params)
    device0 = jax.devices()[0]
    r["sizing"] = [
        bytes_per_device(shapes, _axes(many), dict(mesh.shape), 4),
        sum(
            sh.data.size * sh.data.dtype.itemsize
            for leaf in jax.tree.leaves(many.params)
            for sh in leaf.addressable_shards
            if sh.device == device0
        ),
    ]
    return r


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.name} {record.getMessage()}")


@pytest.fixture(scope="module")
def mesh_run(tiny_checkpoint):
    """(report per family, the warnings logged meanwhile) of GPT-2, Llama (sharded safetensors, GQA) and BERT
    on a 2×4 fsdp×tp mesh of the 8 simulated CPU devices against one device."""
    assert len(jax.devices()) == 8
    folders = [tiny_checkpoint("gpt2"), tiny_checkpoint("llama", fmt="sharded"), tiny_checkpoint("bert")]
    mesh = make_mesh(data=1, fsdp=2, tp=4)
    rng = np.random.default_rng(0)
    seqs = [rng.integers(5, 100, rng.integers(2, 12)).tolist() for _ in range(11)]  # ids in every tiny vocab
    records, root = _Records(), logging.getLogger()
    level = root.level
    root.addHandler(records)
    root.setLevel(min(level, logging.WARNING) if level else logging.WARNING)
    try:
        reports = [_mesh_report(folder, mesh, seqs) for folder in folders]
    finally:
        root.removeHandler(records)
        root.setLevel(level)
    return {r["family"]: r for r in reports}, records.lines


@pytest.mark.slow  # the mesh tests share one module fixture
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_a_2x4_fsdp_tp_mesh_gives_the_single_device_results(mesh_run, family):
    r = mesh_run[0][family]
    assert r["logits_layers"] <= MESH_RTOL
    # SeT's distances: solves on the head's logits, absolute (distances of O(1)); 1e-5 is ~2 x MESH_RTOL
    assert r["set_optax"] <= 1e-5 and r["set_exact"] <= 1e-5 and r["head_still_sharded"]
    assert r["token_states"] <= MESH_RTOL  # contextual embedding extraction
    if family != "bert":
        assert r["packed"] <= MESH_RTOL and r["greedy_equal"]


@pytest.mark.slow  # the mesh tests share one module fixture
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_each_device_holds_only_its_slice_of_every_weight(mesh_run, family):
    leaves = mesh_run[0][family]["leaves"]
    for name, leaf in leaves.items():
        split = 1
        for axis in leaf["spec"]:
            split *= {"fsdp": 2, "tp": 4, None: 1}[axis]
        assert leaf["device_bytes"] == leaf["bytes"] * 8 // split, name  # replicated only where unsharded
    head = leaves["head/W"]
    assert head["spec"] == ["tp", "fsdp"] and head["device_bytes"] == head["bytes"]
    both = [n for n, leaf in leaves.items() if {"tp", "fsdp"} <= set(leaf["spec"])]  # split over all 8
    assert sum(leaves[n]["device_bytes"] for n in both) == sum(leaves[n]["bytes"] for n in both)
    assert len(both) >= 4  # embeddings, head, attention and MLP matrices


@pytest.mark.slow  # the mesh tests share one module fixture
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_the_sizing_bytes_per_device_are_what_a_device_holds(mesh_run, family):
    predicted, held = mesh_run[0][family]["sizing"]
    assert predicted == held > 0


@pytest.mark.slow
def test_the_replicated_kv_heads_are_logged_once_per_load(mesh_run):
    logs = [x for x in mesh_run[1] if "replicated along a mesh axis" in x]
    assert len(logs) == 1, mesh_run[1]  # only Llama (2 KV heads over tp=4); GPT-2 and BERT divide
    assert "body/layers/attn/k/w (kv_heads=2 over tp=4)" in logs[0]


def test_the_renamed_modules_keep_their_old_names_for_one_release():
    from jaxassoc.models import mesh, multihost, partitioning, sharding

    assert partitioning.make_mesh is mesh.make_mesh and partitioning.place_params is mesh.place_params
    assert sharding.data_mesh is multihost.data_mesh and sharding.shard_batch is multihost.shard_batch
