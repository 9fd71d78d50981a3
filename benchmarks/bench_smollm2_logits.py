"""Next-token logits for 1,000 short prompts on SmolLM2-135M: jaxassoc (jit) vs transformers PyTorch eager.

Prompts: prefixes of 5-20 tokens (length drawn with a fixed seed) of WikiText-2 test lines. Both
frameworks get the same right-padded batches (sorted by length, padded to the bucket lengths below, the
last batch filled up with copies of its first row), run the body on every position and the output head
only at each row's last real token. Weights: the embedded GGUF dequantised to fp32, loaded into both.
transformers runs in eager mode (no torch.compile) with its default attention (sdpa).

Reported: the thread setting, our compile time (AOT, every bucket shape, outside the timings), the
median wall time of ``--repeats`` passes over all prompts for each framework, the ratio torch / ours,
the achieved GFLOP/s (2 x body matmul params x real tokens + 2 x head params x prompts, attention
scores excluded) and both frameworks' fp32 matmul rate measured in the same run.

    python benchmarks/bench_smollm2_logits.py --threads 2 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # _matmul_rate, jaxassoc
from _matmul_rate import pin_threads  # noqa: E402  (imports nothing heavy)

BUCKETS = (8, 12, 16, 20)
WIKITEXT = Path(__file__).resolve().parent.parent / "jaxassoc" / "data" / "files" / "wikitext2" / "test.txt"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both frameworks")
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_prompts(tokenizer, n: int, seed: int) -> list[list[int]]:
    """``n`` token-id prefixes of 5-20 tokens from distinct WikiText-2 lines (headings included)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    lines = [line.strip() for line in WIKITEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
    prompts = []
    for line in lines:
        ids = tokenizer(line)["input_ids"]
        length = int(rng.integers(5, 21))
        if len(ids) >= length:
            prompts.append(ids[:length])
        if len(prompts) == n:
            return prompts
    raise SystemExit(f"WikiText-2 has only {len(prompts)} lines long enough for {n} prompts")


def make_batches(prompts, batch_size: int, pad_id: int):
    """Right-padded ``(ids, mask, n_real_rows)`` batches of prompts sorted by length, padded to a bucket."""
    import numpy as np

    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    batches = []
    for start in range(0, len(order), batch_size):
        rows = [prompts[i] for i in order[start : start + batch_size]]
        n_real = len(rows)
        rows += [rows[0]] * (batch_size - n_real)
        T = next(b for b in BUCKETS if b >= max(map(len, rows)))
        ids = np.full((batch_size, T), pad_id, dtype=np.int32)
        mask = np.zeros((batch_size, T), dtype=np.int32)
        for r, row in enumerate(rows):
            ids[r, : len(row)], mask[r, : len(row)] = row, 1
        batches.append((ids, mask, n_real))
    return batches


def main():
    args = parse_args()
    setting = pin_threads(args.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    import transformers
    from _matmul_rate import jax_gflops, torch_gflops

    from jaxassoc.models.gguf import read_gguf
    from jaxassoc.models.heads import last_positions, logits_at
    from jaxassoc.models.llama import FAMILY as llama
    from jaxassoc.models.mesh import device_params
    from jaxassoc.resources import smollm2_gguf

    torch.set_num_threads(args.threads)
    print(f"threads: {setting} | torch.get_num_threads() = {torch.get_num_threads()}")
    print(
        f"jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__}, transformers {transformers.__version__}"
    )

    hf_config, tensors, tokenizer = read_gguf(smollm2_gguf())
    config = llama.config_from_hf(hf_config)
    params = device_params(llama.params_from_hf(tensors, config))  # host views -> device arrays
    prompts = make_prompts(tokenizer, args.prompts, args.seed)
    batches = make_batches(prompts, args.batch_size, tokenizer.pad_token_id)

    # --- ours: AOT-compile every bucket shape, then time the compiled executables ---------------------
    def next_token_logits(params, ids, mask):
        hidden = llama.forward(params["body"], ids, mask, config=config).hidden
        return logits_at(params["head"], hidden, last_positions(mask))

    start = time.perf_counter()
    compiled = {}
    for ids, mask, _ in batches:
        if ids.shape not in compiled:
            compiled[ids.shape] = jax.jit(next_token_logits).lower(params, ids, mask).compile()
    compile_s = time.perf_counter() - start
    device_batches = [(jnp.asarray(ids), jnp.asarray(mask), n) for ids, mask, n in batches]

    def run_ours():
        out = [compiled[ids.shape](params, ids, mask)[:n] for ids, mask, n in device_batches]
        return np.concatenate([np.asarray(o) for o in out])

    # --- transformers: the same weights in LlamaForCausalLM, head only at the last position -----------
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**hf_config)).eval()
    model.load_state_dict({k: torch.tensor(v) for k, v in tensors.items()}, strict=False)
    model.tie_weights()
    torch_batches = [(torch.from_numpy(ids).long(), torch.from_numpy(mask).long(), n) for ids, mask, n in batches]

    def run_torch():
        out = []
        with torch.inference_mode():
            for ids, mask, n in torch_batches:
                hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
                last = mask.sum(1) - 1
                out.append(model.lm_head(hidden[torch.arange(len(ids)), last])[:n].numpy())
        return np.concatenate(out)

    ours_logits, torch_logits = run_ours(), run_torch()  # warm-up, and a parity check
    print(f"prompts: {len(prompts)}, batches: {len(batches)} x {args.batch_size}, buckets {sorted(compiled)}")
    print(f"max |logits ours - torch| over all prompts: {np.abs(ours_logits - torch_logits).max():.2e}")

    ours_s, torch_s = [], []
    for _ in range(args.repeats):  # interleaved, so load changes on the machine hit both alike
        start = time.perf_counter()
        run_ours()
        ours_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_torch()
        torch_s.append(time.perf_counter() - start)
    ours_t, torch_t = statistics.median(ours_s), statistics.median(torch_s)

    L, D, F = config.num_hidden_layers, config.hidden_size, config.intermediate_size
    q, kv = config.num_attention_heads * config.head_dim, config.num_key_value_heads * config.head_dim
    body_params = L * (D * q + 2 * D * kv + q * D + 3 * D * F)
    real_tokens = sum(map(len, prompts))
    flops = 2 * body_params * real_tokens + 2 * config.vocab_size * D * len(prompts)
    padded_tokens = sum(ids.size for ids, _, _ in batches)

    print(f"our compile time (AOT, {len(compiled)} shapes): {compile_s:.2f} s")
    print(f"ours  : median {ours_t:.3f} s over {args.repeats} passes {[round(s, 3) for s in ours_s]}")
    print(f"torch : median {torch_t:.3f} s over {args.repeats} passes {[round(s, 3) for s in torch_s]}")
    print(f"ratio torch / ours: {torch_t / ours_t:.2f}")
    print(f"work: {real_tokens} real tokens ({padded_tokens} with padding), {flops / 1e9:.1f} GFLOP useful")
    print(f"achieved: ours {flops / ours_t / 1e9:.1f} GFLOP/s, torch {flops / torch_t / 1e9:.1f} GFLOP/s")
    print(f"fp32 1024^2 matmul in this run: jax {jax_gflops():.1f} GFLOP/s, torch {torch_gflops():.1f} GFLOP/s")


if __name__ == "__main__":
    main()
