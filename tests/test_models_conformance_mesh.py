"""Every causal family's tiny checkpoint (``tests/family_specs``) on a 2×4 fsdp×tp mesh of 8 simulated CPU
devices gives the single-device logits, packed log-probs and greedy tokens, each weight placed by its
family's sharding table (one subprocess per family module of specs: the device count is set before JAX
starts)."""

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest

import conformance
from family_specs import specs_by_family

FAMILIES = specs_by_family()
SPECS = [(family, spec) for family, specs in sorted(FAMILIES.items()) for spec in specs]

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax, numpy as np
    jax.config.update("jax_default_matmul_precision", "highest")
    from jax.sharding import NamedSharding
    from jaxassoc.models import load_model, model_limits, run_batched
    from jaxassoc.models.batching import model_shard
    from jaxassoc.models.decoding import greedy_generate
    from jaxassoc.models.heads import head_logits
    from jaxassoc.models.packing import run_packed
    from jaxassoc.models.partitioning import make_mesh
    assert len(jax.devices()) == 8
    mesh = make_mesh(data=1, fsdp=2, tp=4)
    rng = np.random.default_rng(0)
    report = {}

    def diff(a, b):
        return max(float(np.abs(np.asarray(x) - np.asarray(y)).max())
                   for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    def logits(model):
        return jax.jit(lambda p, i, m: head_logits(p["head"], model.forward(p["body"], i, m).hidden))

    def logprobs(model):
        def fn(p, ids, seg):
            return jax.nn.log_softmax(head_logits(p["head"], model.forward(p["body"], ids, seg).hidden), -1)
        return jax.jit(fn)

    for name, folder in json.loads(sys.argv[1]).items():
        one, many = load_model(folder), load_model(folder, mesh=mesh)
        seqs = [rng.integers(3, one.head.W.shape[0], rng.integers(2, 12)).tolist() for _ in range(9)]
        sharded = sum(not leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(many.params))
        assert all(isinstance(x.sharding, NamedSharding) for x in jax.tree.leaves(many.params))
        kw = dict(batch_size=4, **model_limits(one))
        r = {"sharded_leaves": sharded,
             "logits": diff(run_batched(logits(one), one.params, seqs, **kw),
                            run_batched(logits(many), many.params, seqs, shard=model_shard(many), **kw))}
        kw = dict(tokens_per_batch=32, **model_limits(one))
        r["packed"] = diff(run_packed(logprobs(one), one.params, seqs, **kw),
                           run_packed(logprobs(many), many.params, seqs, shard=model_shard(many), **kw))
        r["greedy_equal"] = (greedy_generate(one, seqs[:4], max_new_tokens=4)
                             == greedy_generate(many, seqs[:4], max_new_tokens=4))
        report[name] = r
    print("REPORT " + json.dumps(report))
    """
)


@functools.lru_cache(maxsize=None)
def mesh_report(family: str, tmp: str) -> dict:
    """The subprocess report of every spec of one family module."""
    folders = {spec.name: str(conformance.save(spec, tmp)) for spec in FAMILIES[family]}
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(folders)], env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT "))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return str(tmp_path_factory.mktemp("conformance-mesh"))


@pytest.mark.slow
@pytest.mark.parametrize("family, spec", SPECS, ids=[s.name for _, s in SPECS])
def test_a_2x4_mesh_gives_the_single_device_results(tmp, family, spec):
    r = mesh_report(family, tmp)[spec.name]
    assert r["sharded_leaves"] >= 4  # embeddings, head, attention and MLP weights really split
    assert r["logits"] <= 1e-5 and r["packed"] <= 1e-5 and r["greedy_equal"], r
