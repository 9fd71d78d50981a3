"""``LanguageModel.save`` (``jaxassoc.models.saving``): a loaded, reweighted or edited model written as a Hugging
Face folder reads back through ``load_model`` with the same parameters, tokenizer and bound edits (so the same
outputs), and through transformers with its logits; what cannot be saved is refused by name before anything is
written, and an interrupted save leaves no folder."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from family_specs import TINY, all_specs, load_torch
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.mitigation import fit_leace
from jaxassoc.models import load_model
from jaxassoc.models.ablation import ablated
from jaxassoc.models.heads import head_logits
from jaxassoc.models.saving import MANIFEST
from jaxassoc.models.sites import Add, Apply, Replace, Transform

FAMILIES = ["gpt2", "llama", "mistral", "bert", "bert-encoder", "roberta"]
INNER = 128  # the widest matmul of these tiny models (GPT-2's MLP, 4 x 32)


def _ids(model, batch=2, length=6, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, model.params["body"]["embed"].shape[0], (batch, length))
    return jnp.asarray(ids, jnp.int32), jnp.ones((batch, length), jnp.int32)


def _out(model, ids, mask):
    """Logits (hidden states for an encoder without its MLM head)."""
    hidden = model.forward(model.params["body"], ids, mask).hidden
    return np.asarray(hidden if model.head is None else head_logits(model.head, hidden))


def _torch_out(folder, spec, ids, mask):
    with torch.no_grad():
        out = load_torch(spec, folder)(
            input_ids=torch.tensor(np.asarray(ids)), attention_mask=torch.tensor(np.asarray(mask))
        )
    return (out.logits if hasattr(out, "logits") else out.last_hidden_state).numpy()


def _same_params(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_saved_model_loads_back_equal_and_in_transformers(tiny_checkpoint, tmp_path, family):
    model = load_model(tiny_checkpoint(family))
    folder = model.save(tmp_path / "saved")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]  # no temporary left beside it
    assert (folder / "model.safetensors").is_file() and not (folder / MANIFEST).exists()
    back = load_model(folder)
    _same_params(model.params, back.params)
    assert back.provenance.tokenizer_sha256 == model.provenance.tokenizer_sha256
    ids, mask = _ids(model)
    ours = _out(back, ids, mask)
    np.testing.assert_array_equal(ours, _out(model, ids, mask))
    ref = _torch_out(folder, TINY[family], ids, mask)
    depth = len(jax.tree.leaves(model.params["body"]["layers"])[0]) + 1  # the blocks and the head
    np.testing.assert_allclose(ours, ref, rtol=0, atol=f32_chain(depth, INNER, float(np.abs(ref).max())))


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.name)
def test_every_family_writes_the_tensors_transformers_read(tiny_checkpoint, tmp_path, spec):
    """Every conformance checkpoint (all 16 families: fused q/k/v, Conv1D, experts, T5...) saved and read by
    transformers gives its logits bit for bit (the same weights in the same program)."""
    source = tiny_checkpoint(spec)
    folder = load_model(source).save(tmp_path / "saved")
    ids = torch.tensor([[3, 5, 7, 9, 11]])
    kw = {"decoder_input_ids": ids} if spec.model_class.startswith("T5") else {}
    with torch.no_grad():
        a, b = (load_torch(spec, f)(input_ids=ids, **kw) for f in (source, folder))
    assert torch.equal(*(o.logits if hasattr(o, "logits") else o.last_hidden_state for o in (a, b)))


def test_changed_weights_round_trip_and_a_tied_head_is_untied(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("llama"))  # tie_word_embeddings=True
    params = jax.tree.map(lambda x: x, model.params)
    params["body"]["layers"]["mlp"]["up"]["w"] = params["body"]["layers"]["mlp"]["up"]["w"] * 1.5
    params["head"] = params["head"]._replace(W=params["head"].W + 0.25)
    changed = model.with_params(params)
    folder = changed.save(tmp_path / "saved")
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is False
    back = load_model(folder)
    _same_params(changed.params, back.params)
    ids, mask = _ids(model)
    ours = _out(back, ids, mask)
    assert not np.array_equal(ours, _out(model, ids, mask))
    ref = _torch_out(folder, TINY["llama"], ids, mask)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=f32_chain(3, INNER, float(np.abs(ref).max())))


def test_a_bf16_model_is_saved_in_bf16(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("gpt2"), precision="bfloat16")
    folder = model.save(tmp_path / "saved")
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"
    _same_params(model.params, load_model(folder, precision="bfloat16").params)


def test_bound_erasers_and_ablations_are_saved_beside_the_weights(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("gpt2"))
    d, L = model.params["body"]["embed"].shape[1], len(jax.tree.leaves(model.params["body"]["layers"])[0])
    rng = np.random.default_rng(0)
    x, z = jnp.asarray(rng.normal(size=(64, d)), jnp.float32), jnp.asarray(rng.integers(0, 2, 64))
    eraser = fit_leace(x, z)
    stacked = jax.tree.map(lambda a: jnp.stack([a] * L), eraser)
    ablation = ablated(model, heads=[[1, 2]], neurons=[[0, 5]])
    edited = ablation.with_edits(
        {
            **ablation.edits,
            "final_norm": Transform(eraser),
            "layers.*.attn.in": Transform(stacked),
            "layers.0.resid_mid": Add(jnp.full((d,), 0.5)),
        }
    )
    folder = edited.save(tmp_path / "saved")
    manifest = json.loads((folder / MANIFEST).read_text())["edits"]
    assert {e["site"]: e.get("module") for e in manifest}["final_norm"] == "jaxassoc.mitigation.eraser:Eraser"
    back = load_model(folder)
    assert sorted(back.edits) == sorted(edited.edits)
    for site, edit in edited.edits.items():
        assert type(back.edits[site]) is type(edit)
        assert jax.tree.structure(back.edits[site]) == jax.tree.structure(edit), site
        for a, b in zip(jax.tree.leaves(edit), jax.tree.leaves(back.edits[site])):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ids, mask = _ids(model)
    np.testing.assert_array_equal(_out(back, ids, mask), _out(edited, ids, mask))
    assert not np.array_equal(_out(back, ids, mask), _out(model, ids, mask))
    _same_params(back.with_edits({}).params, model.params)


def test_what_cannot_be_saved_is_refused_by_name_and_nothing_is_written(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("gpt2"))

    def shift(x):
        return x + 1

    with pytest.raises(ModelError, match=r"'final_norm'.*Apply.*shift.*cannot be saved"):
        model.with_edits({"final_norm": Apply(shift)}).save(tmp_path / "a")
    with pytest.raises(ModelError, match="was not read from a checkpoint"):
        dataclasses.replace(model, checkpoint=None).save(tmp_path / "b")
    port = model.port
    computing = dataclasses.replace(
        port, params_from_hf=lambda t, c: jax.tree.map(lambda x: np.asarray(x) * 2, port.params_from_hf(t, c))
    )
    with pytest.raises(ModelError, match=r"the gpt2 family cannot be saved.*computes"):
        dataclasses.replace(model, port=computing).save(tmp_path / "c")
    model.save(tmp_path / "d")
    with pytest.raises(ModelError, match="exists"):
        model.save(tmp_path / "d")
    model.with_edits(ablated(model, heads=[[0, 1]]).edits).save(tmp_path / "d", overwrite=True)
    assert load_model(tmp_path / "d").edits
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_an_interrupted_save_leaves_no_folder(tiny_checkpoint, tmp_path, monkeypatch):
    model = load_model(tiny_checkpoint("bert"))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(model.tokenizer), "save_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.save(tmp_path / "saved")
    assert list(tmp_path.iterdir()) == []


def test_a_manifest_naming_an_unknown_module_or_site_is_refused(tiny_checkpoint, tmp_path):
    model = load_model(tiny_checkpoint("gpt2"))
    d = model.params["body"]["embed"].shape[1]
    folder = model.with_edits({"final_norm": Replace(jnp.zeros((d,)))}).save(tmp_path / "saved")
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["edits"][0]["site"] = "layers.9.mlp.out"
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"jaxassoc_edits\.json.*layers\.9\.mlp\.out"):
        load_model(folder)
    manifest["edits"][0].update(site="final_norm", kind="Transform", module="nowhere.erasers:Eraser")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"nowhere\.erasers:Eraser.*cannot be found"):
        load_model(folder)


@pytest.mark.slow
def test_the_embedded_gguf_model_is_saved_as_a_llama_checkpoint(tmp_path):
    import transformers

    model = load_model("smollm2-135m")
    folder = model.save(tmp_path / "saved")
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama"
    back = load_model(folder)
    enc = model.tokenizer(["The nurse said that"], return_tensors="np")
    ids, mask = jnp.asarray(enc["input_ids"]), jnp.asarray(enc["attention_mask"])
    ours = _out(back, ids, mask)
    np.testing.assert_array_equal(ours, _out(model, ids, mask))
    with torch.no_grad():
        ref = transformers.AutoModelForCausalLM.from_pretrained(folder)(input_ids=torch.tensor(enc["input_ids"]))
    ref = ref.logits.numpy()
    depth = config["num_hidden_layers"] + 1
    np.testing.assert_allclose(ours, ref, rtol=0, atol=f32_chain(depth, config["intermediate_size"], np.abs(ref).max()))
