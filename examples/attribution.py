"""Which attribute words (head rows) and which target words drive an RPAM Test effect size?

RPAM's d (Hodel et al. 2026, Eq. 1-2) is a differentiable function of the output head once the body's
prompt states are fixed (:mod:`jaxassoc.readouts.rpam_head`). One ``jax.grad`` over the head's NNX state (split from the
model's module by a state filter, so the body is never differentiated) and the prompt states gives

- for each attribute word: the gradient of d on the head rows of its tokens (first token and, per App. E,
  its later subwords), as a norm ‖∂d/∂W_rows‖ and as the first-order change of d when those rows are
  scaled up by 1% (0.01 · Σ ∂d/∂W_row · W_row; its sign says whether the word pushes d up or down);
- for each target word: s(t, A, B), ∂d/∂s(t) (how much its association moves d), and ‖∂d/∂h_t‖, the
  sensitivity of d to the target's prompt states (the head inputs).

    python examples/attribution.py                         # SmolLM2-135M, WEAT-WS C6 (career/family)
    python examples/attribution.py --test C7 --top 8       # math/arts vs gender terms (App. B roles)
    python examples/attribution.py --model path/to/checkpoint --json out.json
"""

from __future__ import annotations

import argparse
import json

import jax
import numpy as np
import pandas as pd

from jaxassoc.metrics import association_scores, effect_size, relative_probabilities, rpam_effect_size
from jaxassoc.models import load_model
from jaxassoc.readouts import rpam_head
from jaxassoc.readouts.rpam_prompts import tokenize_attributes


def attribution(model, spec: rpam_head.RpamTestSpec) -> tuple[float, pd.DataFrame, pd.DataFrame]:
    """d, the attribute table and the target table (see the module docstring)."""
    states = rpam_head.rpam_test_states(model, spec)
    n_x, n_a = len(spec.x), len(spec.a)

    def d_of(head_state, first_hidden, cont_hidden):
        s = states._replace(first_hidden=first_hidden, cont_hidden=cont_hidden)
        head = rpam_head.as_head(head_state, model.head.softcap)
        return rpam_effect_size(*rpam_head.head_rpam_inputs(head, s), n_x=n_x, n_a=n_a)

    d, (g_head, g_first, g_cont) = jax.value_and_grad(d_of, argnums=(0, 1, 2))(
        rpam_head.head_state(model), states.first_hidden, states.cont_hidden
    )
    tokens = tokenize_attributes(model.tokenizer, spec.a + spec.b, rpam_head.TP1)
    W, gW = np.asarray(model.head.W, np.float32), np.asarray(rpam_head.as_head(g_head, model.head.softcap).W)
    attributes = pd.DataFrame(
        {
            "attribute": spec.a + spec.b,
            "set": ["A"] * n_a + ["B"] * len(spec.b),
            "tokens": [len(ids) for ids in tokens.token_ids],
            "grad_norm": [float(np.linalg.norm(gW[list(ids)])) for ids in tokens.token_ids],
            "effect_of_1pct_scale": [0.01 * float(np.sum(gW[list(ids)] * W[list(ids)])) for ids in tokens.token_ids],
        }
    ).sort_values("grad_norm", ascending=False, ignore_index=True)

    first, cont = rpam_head.head_rpam_inputs(model.head, states)
    s = association_scores(relative_probabilities(first, cont), n_a=n_a)
    ds = jax.grad(lambda s: effect_size(s[:n_x], s[n_x:]))(s)
    state_sq = np.sum(np.asarray(g_first) ** 2, axis=1)
    np.add.at(state_sq, np.asarray(states.cont_target), np.sum(np.asarray(g_cont) ** 2, axis=(1, 2)))
    targets = pd.DataFrame(
        {
            "target": spec.x + spec.y,
            "set": ["X"] * n_x + ["Y"] * len(spec.y),
            "s": np.asarray(s),
            "dd_ds": np.asarray(ds),
            "state_grad_norm": np.sqrt(state_sq),
        }
    ).sort_values("state_grad_norm", ascending=False, ignore_index=True)
    return float(d), attributes, targets


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="embedded name, checkpoint folder or .gguf")
    parser.add_argument("--test", default="C6", help="WEAT-WS test id (C1-C10)")
    parser.add_argument("--top", type=int, default=10, help="rows of each table to print")
    parser.add_argument("--json", help="write d and both full tables here")
    args = parser.parse_args(argv)

    model = load_model(args.model)
    spec = rpam_head.weat_ws_tests()[args.test]
    d, attributes, targets = attribution(model, spec)
    print(f"RPAM Test {spec.id} on {model.name}: d = {d:.4f}  (X = {spec.x[:3]}..., A = {spec.a[:3]}...)")
    print(f"\nAttribute words ranked by ‖∂d/∂W‖ on their head rows (top {args.top}):")
    print(attributes.head(args.top).to_string(float_format=lambda v: f"{v:.4g}"))
    print(f"\nTarget words ranked by ‖∂d/∂h‖ on their prompt states (top {args.top}):")
    print(targets.head(args.top).to_string(float_format=lambda v: f"{v:.4g}"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "model": model.name,
                    "test": spec.id,
                    "d": d,
                    "attributes": attributes.to_dict("records"),
                    "targets": targets.to_dict("records"),
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
