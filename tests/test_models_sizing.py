"""The sizing table of docs/multihost.md: parameter shapes from the families' NNX modules under
``nnx.eval_shape`` (checked here against loaded checkpoints), bytes per device from the partition rules
(checked against a real 2x4 placement in test_models_mesh.py), and the table in the docs is the one the
code prints."""

import json
from pathlib import Path

import jax
import pytest

from jaxassoc.models import load_model
from jaxassoc.models.sizing import MODELS, abstract_params, bytes_per_device, markdown_table, total_bytes

DOCS = Path(__file__).resolve().parents[1] / "docs" / "multihost.md"


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert"])
def test_abstract_params_have_the_loaded_models_shapes(tiny_checkpoint, tmp_path, family):
    folder = tiny_checkpoint(family)
    model = load_model(folder)
    family, _, shapes = abstract_params(json.loads((folder / "config.json").read_text()))
    assert family.name == model.family
    loaded = jax.tree.map(lambda x: tuple(x.shape), {"body": model.params["body"], "head": {"W": model.head.W}})
    assert jax.tree.map(lambda x: tuple(x.shape), shapes) == loaded


def test_llama_2_7b_has_its_published_size_and_splits_over_8_devices_but_its_norms():
    family, config, shapes = abstract_params(MODELS["llama-2-7b"])
    assert round(total_bytes(shapes, 1) / 1e9, 2) == 6.74  # Touvron et al. 2023: 6.74 B (untied head)
    axes = family.param_axes(config)
    assert axes["body/layers/attn/k/w"].heads == 32  # the KV heads a tp axis must divide
    norms = (2 * 32 * 4096 + 4096) * 2  # RMSNorm scales: never sharded, every device holds them whole
    assert bytes_per_device(shapes, axes, {"fsdp": 8}, 2) * 8 == total_bytes(shapes, 2) + 7 * norms
    assert bytes_per_device(shapes, axes, {"data": 8}, 2) == total_bytes(shapes, 2)  # replicated


def test_the_docs_table_is_the_one_the_code_prints():
    assert markdown_table() in DOCS.read_text()
