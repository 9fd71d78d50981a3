"""Every family's module state names the same sub-layers alike: whichever checkpoint a model came from, its
query projection is ``layers/attn/q/w``, its MLP ``layers/mlp/...``, its token embeddings ``embed`` (the HF
names stay in each family's ``params.py``). T5, an encoder-decoder, is the one family with two stacks."""

import importlib

import jax
import pytest
from flax import nnx

from jaxassoc.models.family import family_folders, param_shapes

DECODERS = [f for f in family_folders() if f != "t5"]

SHARED = {"embed", *(f"layers/attn/{p}/w" for p in "qkvo")}
"""What every family but T5 has, by these paths."""

TABLES = {"embed", "positions", "token_type"}  # learned positions: GPT-2, GPT-Neo, OPT, BERT; token types: BERT
VOCABULARY = (
    "embed_norm/",  # BERT
    "project_in/",  # OPT's narrower word embeddings
    "project_out/",
    "layers/attn_norm/",
    "layers/attn/",
    "layers/post_attn_norm/",  # Gemma
    "layers/mlp_norm/",
    "layers/mlp/",
    "layers/post_mlp_norm/",
    "final_norm/",
    "mlm_transform/",  # BERT's MLM head transform
)
"""Every other state path of every family but T5 begins with one of these: no family-specific names."""

SUB_LAYERS = {
    "layers/attn/": {"q", "k", "v", "o", "q_norm", "k_norm"},
    "layers/mlp/": {"up", "down", "gate", "router"},
}


def _paths(folder: str) -> set[str]:
    family = importlib.import_module(f"jaxassoc.models.{folder}").FAMILY
    base = importlib.import_module(f"family_specs.{folder}").BASE
    config = family.config_from_hf(dict(base))
    shapes = param_shapes(nnx.eval_shape(lambda: family.new_body(config, None)))
    leaves = jax.tree_util.tree_leaves_with_path(shapes, is_leaf=lambda x: isinstance(x, tuple))
    return {"/".join(k.key for k in path) for path, _ in leaves}


@pytest.mark.parametrize("folder", DECODERS)
def test_every_family_names_its_shared_sub_layers_alike(folder):
    paths = _paths(folder)
    assert SHARED <= paths, sorted(SHARED - paths)
    odd = sorted(p for p in paths if p not in TABLES and not p.startswith(VOCABULARY))
    assert not odd, f"{folder} state paths outside the shared vocabulary: {odd}"
    for prefix, names in SUB_LAYERS.items():
        used = {p.removeprefix(prefix).split("/")[0] for p in paths if p.startswith(prefix)}
        assert used <= names, sorted(used - names)


def test_the_vocabulary_is_not_vacuous():
    """The check above would pass a family whose paths were all odd if the vocabulary matched anything."""
    assert not "blocks/c_attn/w".startswith(VOCABULARY) and "wte" not in TABLES
    assert len(DECODERS) == 15
