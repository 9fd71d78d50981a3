"""Compile once per configuration: two loads of one checkpoint share their forward pass and decoder (equal and
hashing alike by family and config), so the second load runs on what the first one compiled."""

import jax.numpy as jnp
import numpy as np

from jaxassoc.models import base, load_model
from jaxassoc.models.decoding import greedy_generate, greedy_tokens


def test_a_second_load_of_one_config_compiles_nothing(tiny_checkpoint):
    folder = tiny_checkpoint("llama", seed=11)
    first, second = load_model(folder), load_model(folder)
    assert first.forward == second.forward and hash(first.forward) == hash(second.forward)
    assert first.decoder == second.decoder and hash(first.decoder) == hash(second.decoder)
    ids = jnp.ones((2, 5), jnp.int32)
    np.testing.assert_array_equal(
        first.forward(first.params["body"], ids, ids).hidden, second.forward(second.params["body"], ids, ids).hidden
    )
    forwards = base._forward._cache_size()
    assert greedy_generate(first, [[3, 4, 5]], max_new_tokens=2) == greedy_generate(
        second, [[3, 4, 5]], max_new_tokens=2
    )
    decodes = greedy_tokens._cache_size()
    third = load_model(folder)
    third.forward(third.params["body"], ids, ids)
    greedy_generate(third, [[3, 4, 5]], max_new_tokens=2)
    assert (base._forward._cache_size(), greedy_tokens._cache_size()) == (forwards, decodes)
    other = load_model(tiny_checkpoint("llama", seed=11, num_hidden_layers=1))  # another config compiles anew
    other.forward(other.params["body"], ids, ids)
    assert other.forward != first.forward and base._forward._cache_size() == forwards + 1
