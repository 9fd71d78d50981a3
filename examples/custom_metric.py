"""A new differentiable metric in user code: the log-ratio RPAM Test of ``rpam_logratio.py``.

This script uses the metric as a function (jit, grad w.r.t. the output head, vmap over heads) next to
the published RPAM Test, and prints the command that sweeps it through the jaxassoc app as a plugin:

    python examples/custom_metric.py                         # SmolLM2-135M, WEAT-WS C6
    python examples/custom_metric.py --model path/to/checkpoint --test C9

    # the same metric swept over configs by the Hydra app (one results folder per job):
    PYTHONPATH=examples JAXASSOC_PLUGINS=rpam_logratio jaxassoc -m metric=rpam_logratio \\
        dataset=weat_ws template=tp1 metric.swap_gender_roles=true,false
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
from rpam_logratio import log_ratio_effect_size

from jaxassoc.metrics import rpam_effect_size
from jaxassoc.models import Head, load_model
from jaxassoc.readouts import rpam_head


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="embedded name, checkpoint folder or .gguf")
    parser.add_argument("--test", default="C6", help="WEAT-WS test id (C1-C10)")
    args = parser.parse_args(argv)

    model = load_model(args.model)
    spec = rpam_head.weat_ws_tests()[args.test]
    states = rpam_head.rpam_test_states(model, spec)
    sizes = dict(n_x=len(spec.x), n_a=len(spec.a))

    def both(head: Head):
        first, cont = rpam_head.head_rpam_inputs(head, states)
        return log_ratio_effect_size(first, cont, **sizes), rpam_effect_size(first, cont, **sizes)

    d_log, d_rpam = jax.jit(both)(model.head)
    grad = jax.grad(lambda h: both(h)[0])(model.head)
    # a shift of all logits by the same amount per target changes neither score (softmax invariance)
    shifted = jax.jit(both)(
        Head(model.head.W, jnp.full(model.head.W.shape[0], 3.0) + (0.0 if model.head.b is None else model.head.b))
    )
    # vmap over a batch of heads: d under the original head scaled by 0.5, 1 and 2 (temperature)
    scales = jnp.asarray([0.5, 1.0, 2.0])

    def scaled(c):
        return both(Head(c * model.head.W, None if model.head.b is None else c * model.head.b))

    by_scale = jax.vmap(scaled)(scales)

    print(f"{model.name}, WEAT-WS {spec.id}: log-ratio d = {float(d_log):+.4f}, RPAM d = {float(d_rpam):+.4f}")
    print(
        f"‖∂d_log/∂W‖_F = {float(jnp.linalg.norm(grad.W)):.4g}  (rows touched: "
        f"{int(jnp.count_nonzero(jnp.abs(grad.W).sum(axis=1)))} of {grad.W.shape[0]})"
    )
    print(f"with every logit shifted by +3: log-ratio d = {float(shifted[0]):+.4f}, RPAM d = {float(shifted[1]):+.4f}")
    for c, dl, dr in zip(scales, *by_scale):
        print(f"head scaled by {float(c):.1f}: log-ratio d = {float(dl):+.4f}, RPAM d = {float(dr):+.4f}")
    return {"d_log_ratio": float(d_log), "d_rpam": float(d_rpam), "d_log_ratio_shifted": float(shifted[0])}


if __name__ == "__main__":
    main()
