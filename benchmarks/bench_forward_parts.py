"""Where SmolLM2-135M's forward time goes, jaxassoc (XLA) vs PyTorch eager, part by part.

For one batch of ``--rows`` x ``--tokens`` real tokens, each part timed alone in both frameworks (best of
``--repeats``), with its GFLOP/s:

- ``body``: the whole body (embeddings, 30 blocks, final norm) of each port;
- ``body matmuls``: only the body's seven weight matmuls per layer at the same row count (q, k, v, o, gate,
  up, down; SmolLM2's shapes, random weights), chained through 30 layers: the matmul ceiling of the body,
  so ``body`` minus it is attention, norms, rotary tables and element-wise work;
- ``head``: the output head's logits (rows x 576) @ (576 x 49,152) for every token;
- ``log-sum-exp``: over those logits (float32).

Both pinned to the same CPUs (``--threads``); the fp32 1024^2 matmul rate of each is printed as the ceiling.
Run: ``python benchmarks/bench_forward_parts.py --threads 2``.
"""

from __future__ import annotations

import argparse
import time

from _matmul_rate import jax_gflops, pin_threads, torch_gflops


def best(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(pin_threads(args.threads))

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from _reference import torch_llama_from_gguf

    from jaxassoc.models.loading import load_model
    from jaxassoc.resources import smollm2_gguf

    model = load_model("smollm2-135m")
    reference, _, _ = torch_llama_from_gguf(smollm2_gguf())
    c = model.config
    D, F, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, model.head.W.shape[0]
    KV = c.num_key_value_heads * c.head_dim
    shapes = [(D, D), (D, KV), (D, KV), (D, D), (D, F), (D, F), (F, D)]
    M = args.rows * args.tokens
    rng = np.random.default_rng(0)
    ids = rng.integers(1, V, (args.rows, args.tokens)).astype(np.int32)
    mask = np.ones_like(ids)
    weights = [rng.standard_normal(s).astype(np.float32) * 0.02 for s in shapes]
    x = rng.standard_normal((M, D)).astype(np.float32)

    def chain(h, ws):
        for _ in range(L):
            q, k, v = h @ ws[0], h @ ws[1], h @ ws[2]
            h = h + (q @ ws[3]) + ((h @ ws[4]) * (h @ ws[5])) @ ws[6] * 1e-3 + 0 * (k.sum() + v.sum())
        return h

    body_j = jax.jit(lambda body, i, m: model.forward(body, i, m).hidden)
    chain_j = jax.jit(chain)
    head_j = jax.jit(lambda W, h: h @ W.T)
    lse_j = jax.jit(lambda z: jax.nn.logsumexp(z, axis=-1))
    W = model.head.W
    wj, xj = [jnp.asarray(w) for w in weights], jnp.asarray(x)
    logits_j = jax.block_until_ready(head_j(W, xj))
    ours = {
        "body": lambda: jax.block_until_ready(body_j(model.params["body"], ids, mask)),
        "body matmuls": lambda: jax.block_until_ready(chain_j(xj, wj)),
        "head": lambda: jax.block_until_ready(head_j(W, xj)),
        "log-sum-exp": lambda: jax.block_until_ready(lse_j(logits_j)),
    }
    wt, xt, ids_t = [torch.from_numpy(w) for w in weights], torch.from_numpy(x), torch.from_numpy(ids).long()
    head_t = reference.lm_head.weight
    with torch.inference_mode():
        logits_t = xt @ head_t.T
        theirs = {
            "body": lambda: reference.model(input_ids=ids_t, attention_mask=torch.ones_like(ids_t)),
            "body matmuls": lambda: chain(xt, wt),
            "head": lambda: xt @ head_t.T,
            "log-sum-exp": lambda: torch.logsumexp(logits_t, dim=-1),
        }
        body_flops = 2 * L * sum(a * b for a, b in shapes) * M
        flops = {"body": body_flops, "body matmuls": body_flops, "head": 2 * M * D * V, "log-sum-exp": None}
        print(f"{args.rows} rows x {args.tokens} tokens = {M} tokens; vocabulary {V}")
        print(
            f"{'part':14s} {'ours ms':>9s} {'torch ms':>9s} {'torch/ours':>10s} {'ours GFLOP/s':>13s} {'torch GFLOP/s':>14s}"
        )
        for part in ours:
            a, b = best(ours[part], args.repeats), best(theirs[part], args.repeats)
            rate = (lambda t: f"{flops[part] / t / 1e9:.0f}") if flops[part] else (lambda t: "-")
            print(f"{part:14s} {a * 1e3:9.1f} {b * 1e3:9.1f} {b / a:10.2f} {rate(a):>13s} {rate(b):>14s}")
    print(f"fp32 1024^2 matmul: jax {jax_gflops():.1f} GFLOP/s, torch {torch_gflops():.1f} GFLOP/s")


if __name__ == "__main__":
    main()
