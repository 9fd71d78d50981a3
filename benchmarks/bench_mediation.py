"""Causal mediation over every attention head of SmolLM2-135M (Vig et al. 2020): jaxassoc vs transformers with
forward hooks, one run.

Workload: the first ``--templates`` of the 17 templates × a seeded sample of ``--professions`` professions
(those SmolLM2 keeps as one token, as ``metric=mediation`` does). For every example and every one of the
30 × 9 = 270 heads, two patched runs (the indirect effect's: the original sentence with the head's output
set to its set-gender value; the direct effect's: the reverse), plus the two plain runs.

- jaxassoc: ``readouts.mediation.head_runs`` per template batch (one jitted function; every head's two
  runs vmapped, ``--chunk`` at a time). First run: a fresh process with an empty XLA cache, compilation
  included; warm: the same call again.
- PyTorch reference (``mediation_reference.hooks_batched``): what a competent user writes: the SmolLM2
  weights jaxassoc reads (``_reference.torch_llama_from_gguf``), examples of one length batched, one head
  patched per forward pass by a pre-hook on ``o_proj``, the two pronoun rows of the head at the last
  position only, ``torch.inference_mode``.
- The authors' style (``hooks_per_example``, one example per forward) on ``--per-example`` examples only
  (it is ~the batch size times slower); its time is printed per example, not extrapolated.

The two sides' log-odds are checked to agree (max |Δ log y| printed; > 1e-3 stops the run). Printed: the
time of each side, the ratios, useful GFLOP/s of each side against the fp32 matmul rate of its framework
(the ceiling), and, with ``--attribution``, the Spearman correlation between attribution patching's
estimate of every head's indirect effect (one backward pass) and the exact effect.
Run from the repository root: ``python benchmarks/bench_mediation.py --threads 2 --templates 1 --professions 24``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # _matmul_rate, tests
from _matmul_rate import jax_gflops, pin_threads, torch_gflops  # noqa: E402  (imports nothing heavy)

TOLERANCE = 1e-3


def forward_flops(cfg: dict, tokens: int, length: int) -> float:
    """Useful matmul FLOPs of a body pass over ``tokens`` tokens in rows of ``length`` (projections, MLP and
    attention scores / values), SmolLM2's shapes from its config."""
    d, ff, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = d * cfg["num_key_value_heads"] // cfg["num_attention_heads"]
    per_token = 2 * L * (2 * d * d + 2 * d * kv + 3 * d * ff) + 4 * L * d * length
    return tokens * per_token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--templates", type=int, default=1)
    parser.add_argument("--professions", type=int, default=24)
    parser.add_argument("--per-example", type=int, default=1, help="examples for the authors' style loop")
    parser.add_argument("--attribution", action="store_true")
    args = parser.parse_args()
    pinned = pin_threads(args.threads)

    import tempfile

    import jax

    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="bench-mediation-xla-"))  # empty
    import numpy as np

    from jaxassoc.data.mediation import TEMPLATES, load_professions
    from jaxassoc.models import load_model
    from jaxassoc.readouts import mediation as readout
    from jaxassoc.resources import smollm2_gguf

    rates = {"jax": jax_gflops(), "torch": torch_gflops()}
    model = load_model("smollm2-135m")
    rng = np.random.default_rng(0)
    professions = [p for p in load_professions() if p.stereotype is not None]
    frame = readout.examples(model, professions, TEMPLATES[: args.templates])
    kept = frame[frame["kept"]]
    chosen = []
    for _, group in kept.groupby("template", sort=False):
        chosen += sorted(rng.choice(group.index.to_numpy(), min(args.professions, len(group)), replace=False))
    frame = frame.loc[chosen]
    batches = readout.batches(frame, batch_size=args.professions)
    L, H = readout.layer_and_heads(model)
    n = len(frame)
    print(f"threads: {pinned}; {n} examples ({args.templates} template(s)), {L} x {H} = {L * H} heads")

    def ours():
        parts = [readout.head_runs(model, b, neurons=False) for _, b in batches]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    start = time.perf_counter()
    first = ours()
    t_first = time.perf_counter() - start
    start = time.perf_counter()
    mine = ours()
    t_warm = time.perf_counter() - start

    from _reference import torch_llama_from_gguf
    from mediation_reference import hooks_batched, hooks_per_example

    torch_model, hf_config, _ = torch_llama_from_gguf(smollm2_gguf())
    order = np.concatenate([rows for rows, _ in batches])
    rows = frame.loc[order]
    lists = dict(
        base_ids=rows["base"].tolist(),
        alt_ids=rows["alt"].tolist(),
        anti=rows["anti"].tolist(),
        stereo=rows["stereo"].tolist(),
    )
    start = time.perf_counter()
    ref = hooks_batched(torch_model, **lists)
    t_torch = time.perf_counter() - start
    k = min(args.per_example, n)
    start = time.perf_counter()
    authors = hooks_per_example(torch_model, **{key: v[:k] for key, v in lists.items()})
    t_authors = (time.perf_counter() - start) / k

    diffs = {
        "base": np.abs(mine["lo_base"] - np.log(ref.y_base)).max(),
        "indirect": np.abs(mine["head_indirect"] - np.log(ref.y_indirect.reshape(n, -1))).max(),
        "direct": np.abs(mine["head_direct"] - np.log(ref.y_direct.reshape(n, -1))).max(),
        "authors": np.abs(mine["head_indirect"][:k] - np.log(authors.y_indirect.reshape(k, -1))).max(),
    }
    print("max |Δ log y| vs PyTorch: " + ", ".join(f"{key} {v:.1e}" for key, v in diffs.items()))
    if max(diffs.values()) > TOLERANCE:
        sys.exit(f"jaxassoc and PyTorch differ by more than {TOLERANCE} in log y")
    assert np.abs(first["head_indirect"] - mine["head_indirect"]).max() < 1e-5

    lengths = [b.base.shape[1] for _, b in batches]
    flops = sum(forward_flops(hf_config, b.n * T, T) for (_, b), T in zip(batches, lengths)) * (2 + 2 * L * H)
    padded = sum(forward_flops(hf_config, b.base.shape[0] * T, T) for (_, b), T in zip(batches, lengths))
    print(f"useful work: {flops / 1e12:.2f} TFLOP ({2 + 2 * L * H} forward passes over {n} examples)")
    # jaxassoc resumes each patched pass at the head's layer: it executes 2 + 2 H sum_l (L - l) / L passes' work
    executed = flops / (2 + 2 * L * H) * (2 + 2 * H * sum(L - layer for layer in range(L)) / L)
    print(f"jaxassoc executes {executed / 1e12:.2f} TFLOP of it (each patched pass starts at the patched layer)")
    print(f"jaxassoc first run (compile included): {t_first:8.2f} s  {flops / t_first / 1e9:6.1f} GFLOP/s useful, "
          f"{executed / t_first / 1e9:6.1f} executed")  # fmt: skip
    print(f"jaxassoc warm:                         {t_warm:8.2f} s  {flops / t_warm / 1e9:6.1f} GFLOP/s useful, "
          f"{executed / t_warm / 1e9:6.1f} executed")  # fmt: skip
    print(f"PyTorch hooks, batched:                {t_torch:8.2f} s  {flops / t_torch / 1e9:6.1f} GFLOP/s")
    print(f"PyTorch hooks, one example per pass:   {t_authors:8.2f} s per example ({k} run)")
    print(f"ratio batched hooks / jaxassoc: first {t_torch / t_first:.2f}x, warm {t_torch / t_warm:.2f}x")
    print(f"ratio per-example hooks / jaxassoc (per example): warm {t_authors / (t_warm / n):.1f}x")
    print(
        f"matmul ceiling: jax {rates['jax']:.1f} GFLOP/s, torch {rates['torch']:.1f} GFLOP/s (fp32, {args.threads} threads)"
    )
    if padded > flops / (2 + 2 * L * H) * 1.001:
        print(f"(jaxassoc also computes {padded / (flops / (2 + 2 * L * H)) - 1:.0%} padding rows)")

    if args.attribution:
        import jax.numpy as jnp
        from scipy import stats as sps

        from jaxassoc.models.attribution import attribution_patching
        from jaxassoc.readouts.mediation import pronoun_logodds

        estimate = np.zeros((L, H))
        for _, b in batches:
            tokens = jnp.asarray(b.tokens[: b.n])

            def score(out, tokens=tokens):
                return pronoun_logodds(model.params["head"], out, tokens=tokens).sum()

            start = time.perf_counter()
            est = attribution_patching(model.port, model.params["body"], jnp.asarray(b.base[: b.n]),
                                       jnp.asarray(b.alt[: b.n]), jnp.ones_like(jnp.asarray(b.base[: b.n])),
                                       score, config=model.config)  # fmt: skip
            estimate += np.asarray(est)
        t_attr = time.perf_counter() - start
        exact_lo = (mine["head_indirect"] - mine["lo_base"][:, None]).sum(0)
        nie = np.expm1(mine["head_indirect"] - mine["lo_base"][:, None]).mean(0)
        rho_lo = sps.spearmanr(estimate.ravel(), exact_lo).statistic
        rho_nie = sps.spearmanr(estimate.ravel(), nie).statistic
        print(f"attribution patching ({t_attr:.1f} s, last batch, compile included): Spearman with exact patching "
              f"{rho_lo:.3f} (Σ Δ log y), {rho_nie:.3f} (NIE)")  # fmt: skip


if __name__ == "__main__":
    main()
