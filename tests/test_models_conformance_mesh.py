"""Every causal family's tiny checkpoint (``tests/family_specs``) on a 2×4 fsdp×tp mesh of 8 simulated CPU
devices (``tests/conftest.py`` starts JAX with 8) gives the single-device logits, packed log-probs and greedy
tokens, each weight placed by its family's sharding table."""

import jax
import numpy as np
import pytest
from family_specs import all_specs
from jax.sharding import NamedSharding

from jaxassoc.models import load_model, model_limits, run_batched
from jaxassoc.models.decoding import greedy_generate
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import make_mesh
from jaxassoc.models.packing import run_packed

SPECS = all_specs()


def _diff(a, b) -> float:
    return max(
        float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def _logprobs(forward):
    return jax.jit(
        lambda p, ids, seg: jax.nn.log_softmax(head_logits(p["head"], forward(p["body"], ids, seg).hidden), -1)
    )


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_a_2x4_mesh_gives_the_single_device_results(tiny_checkpoint, spec):
    assert len(jax.devices()) == 8
    folder = tiny_checkpoint(spec)
    one, many = load_model(folder), load_model(folder, mesh=make_mesh(data=1, fsdp=2, tp=4))
    rng = np.random.default_rng(0)
    seqs = [rng.integers(3, one.head.W.shape[0], rng.integers(2, 12)).tolist() for _ in range(9)]
    assert all(isinstance(x.sharding, NamedSharding) for x in jax.tree.leaves(many.params))
    # embeddings, head, attention and MLP weights really split
    assert sum(not leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(many.params)) >= 4
    kw = dict(batch_size=4, **model_limits(one))
    logits = jax.jit(lambda p, i, m: head_logits(p["head"], one.forward(p["body"], i, m).hidden))
    assert (
        _diff(
            run_batched(logits, one.params, seqs, **kw),
            run_batched(logits, many.params, seqs, mesh=many.mesh, **kw),
        )
        <= 1e-5
    )
    kw = dict(tokens_per_batch=32, **model_limits(one))
    logprobs = _logprobs(one.forward)
    assert (
        _diff(
            run_packed(logprobs, one.params, seqs, **kw),
            run_packed(logprobs, many.params, seqs, mesh=many.mesh, **kw),
        )
        <= 1e-5
    )
    assert greedy_generate(one, seqs[:4], max_new_tokens=4) == greedy_generate(many, seqs[:4], max_new_tokens=4)
