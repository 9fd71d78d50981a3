"""Concept erasers: LEACE's fit against the ``concept-erasure`` package, and what an eraser at every layer adds
to a forward pass of the embedded SmolLM2-135M (issue 40's targets: fit on 20,000 x 576 states under 2 s after
compilation; erasers at every layer <= 10 % of a forward pass).

Both sides pinned to the same CPU threads; the fit on the same float32 states (random, with an outlier dimension
as SmolLM2's middle layers have, and a two-class concept). The reference is the package's own
``LeaceEraser.fit`` (torch, float32, its defaults: shrinkage and the trace constraint), the straightforward call a
PyTorch user makes. The forward-pass part times ``model.forward`` on a batch of random tokens, plain and with a
rank-4 LEACE eraser bound at ``layers.*.resid_post`` (one per layer), alternating A B A B.
Run: ``python benchmarks/bench_erasers.py --threads 2``.
"""

import argparse
import statistics
import time

from _matmul_rate import matmul_rates, pin_threads


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=576)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=48)
    args = parser.parse_args(argv)
    print(pin_threads(args.threads))

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    from concept_erasure import LeaceEraser

    from jaxassoc.mitigation import as_edit, fit_leace, stack
    from jaxassoc.models import load_model
    from jaxassoc.resources import smollm2_gguf

    torch.set_num_threads(args.threads)
    rates = matmul_rates()
    print("fp32 matmul GFLOP/s (1024^3): " + ", ".join(f"{k} {v:.0f}" for k, v in rates.items()))

    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, args.rows)
    x = (rng.normal(size=(args.rows, args.dim)) + np.outer(z, rng.normal(size=args.dim))).astype(np.float32)
    x[:, 7] *= 300.0  # an outlier dimension
    first = _timed(lambda: jax.block_until_ready(fit_leace(x, z)))
    ours = [_timed(lambda: jax.block_until_ready(fit_leace(x, z))) for _ in range(args.repeats)]
    xt, zt = torch.tensor(x), torch.nn.functional.one_hot(torch.tensor(z), 2).float()
    theirs = [_timed(lambda: LeaceEraser.fit(xt, zt)) for _ in range(args.repeats)]
    ref64 = LeaceEraser.fit(xt.double(), zt.double())
    gap = np.abs(np.asarray(fit_leace(x, z)(jnp.asarray(x))) - ref64(xt.double()).numpy()).max() / np.abs(x).max()
    print(f"LEACE fit, {args.rows:,} x {args.dim} states, 2 classes (median of {args.repeats}):")
    print(f"  jaxassoc fit_leace: first call {first:.2f} s (compile included), warm {statistics.median(ours):.3f} s")
    print(f"  concept-erasure LeaceEraser.fit (torch float32): {statistics.median(theirs):.3f} s")
    print(f"  ratio package / ours (warm): {statistics.median(theirs) / statistics.median(ours):.2f}x; "
          f"ours vs the package in float64: max |diff| / max |x| = {gap:.1e}")  # fmt: skip

    model = load_model(str(smollm2_gguf()))
    n_layers = len(jax.tree.leaves(model.params["body"]["layers"])[0])
    width = model.head.W.shape[1]
    erasers = [fit_leace(rng.normal(size=(400, width)).astype(np.float32), rng.integers(0, 2, 400)) for _ in
               range(n_layers)]  # fmt: skip
    edited = model.with_edits({"layers.*.resid_post": as_edit(stack(erasers))})
    ids = jnp.asarray(rng.integers(3, model.config.vocab_size, (args.batch, args.length)), jnp.int32)
    mask = jnp.ones_like(ids)

    def forward(m):
        return lambda: jax.block_until_ready(m.forward(m.params["body"], ids, mask).hidden)

    runs = {"plain": forward(model), "erasers at every layer": forward(edited)}
    compile_s = {name: _timed(run) for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(max(args.repeats, 5)):
        for name, run in runs.items():
            times[name].append(_timed(run))
    plain, erased = (statistics.median(times[n]) for n in runs)
    print(f"SmolLM2-135M forward, {args.batch} x {args.length} tokens, {n_layers} layers, width {width} "
          f"(first call {compile_s['plain']:.1f} / {compile_s['erasers at every layer']:.1f} s):")  # fmt: skip
    print(f"  plain {plain:.3f} s, with a rank-{erasers[0].down.shape[1]} eraser at every layer {erased:.3f} s: "
          f"+{100 * (erased / plain - 1):.1f} %")  # fmt: skip


if __name__ == "__main__":
    main()
