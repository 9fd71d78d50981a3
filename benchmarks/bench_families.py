"""The forward pass of every causal family: jaxassoc (jit) vs transformers PyTorch eager, per family.

For each family of ``FAMILIES`` a tiny-but-not-trivial random checkpoint (4 layers, d_model 256, 8 heads,
4 KV heads where the family has grouped queries, MLP 1024, vocabulary 16,384 by default) is built with
transformers, saved (safetensors + a word-level tokenizer) and loaded with ``jaxassoc.models.load_model``.
Both frameworks then run the same batch (32 rows x 128 random tokens, no padding): the body on every
position and the output head on every position (full logits). Ours: ``forward`` + ``head_logits`` under one
``jax.jit``, AOT-compiled before timing. transformers: ``model(input_ids, attention_mask).logits`` in eager
mode (no ``torch.compile``, its default attention), under ``torch.no_grad``. A family whose HF
``model_type`` no jaxassoc family registers prints "not ported" and is skipped.

Printed per family: max |Δ logits| (a parity check), the median of ``--repeats`` interleaved passes per
framework, the ratio torch / ours (above 1: ours is faster), and the achieved GFLOP/s of both
(2 x matmul parameters x tokens, body and head; mixture-of-experts weights counted at top-k / experts;
attention scores excluded); then both frameworks' fp32 matmul rate in the same run, the ceiling.

    python benchmarks/bench_families.py --threads 2 --repeats 5
    python benchmarks/bench_families.py --threads 1 --families gpt2,llama --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # _matmul_rate, jaxassoc
from _matmul_rate import pin_threads  # noqa: E402  (imports nothing heavy)

L, D, H, KV, F = 4, 256, 8, 4, 1024  # layers, d_model, heads, KV heads, MLP width
CTX = 256  # max positions
SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)

# family -> (HF model_type, transformers config class, causal-LM class, config fields; vocab_size is added)
FAMILIES: dict[str, tuple[str, str, str, dict]] = {
    "gpt2": ("gpt2", "GPT2Config", "GPT2LMHeadModel", dict(n_layer=L, n_embd=D, n_head=H, n_inner=F, n_positions=CTX)),
    "llama": (
        "llama",
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            intermediate_size=F,
            max_position_embeddings=CTX,
        ),
    ),
    "gpt_neox": (
        "gpt_neox",
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            intermediate_size=F,
            rotary_pct=0.25,
            max_position_embeddings=CTX,
        ),
    ),
    "gptj": (
        "gptj",
        "GPTJConfig",
        "GPTJForCausalLM",
        dict(n_layer=L, n_embd=D, n_head=H, n_inner=F, rotary_dim=16, n_positions=CTX),
    ),
    "gpt_neo": (
        "gpt_neo",
        "GPTNeoConfig",
        "GPTNeoForCausalLM",
        dict(
            num_layers=L,
            hidden_size=D,
            num_heads=H,
            intermediate_size=F,
            attention_types=[[["global", "local"], L // 2]],
            window_size=64,
            max_position_embeddings=CTX,
        ),
    ),
    "opt": (
        "opt",
        "OPTConfig",
        "OPTForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            ffn_dim=F,
            word_embed_proj_dim=D,
            max_position_embeddings=CTX,
        ),
    ),
    "mpt": (
        "mpt",
        "MptConfig",
        "MptForCausalLM",
        dict(n_layers=L, d_model=D, n_heads=H, expansion_ratio=F // D, max_seq_len=CTX),
    ),
    "olmo": (
        "olmo",
        "OlmoConfig",
        "OlmoForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            intermediate_size=F,
            clip_qkv=8.0,
            max_position_embeddings=CTX,
        ),
    ),
    "mixtral": (
        "mixtral",
        "MixtralConfig",
        "MixtralForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            intermediate_size=F // 2,
            num_local_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=CTX,
        ),
    ),
    "qwen2": (
        "qwen2",
        "Qwen2Config",
        "Qwen2ForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            intermediate_size=F,
            max_position_embeddings=CTX,
        ),
    ),
    "qwen3": (
        "qwen3",
        "Qwen3Config",
        "Qwen3ForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            head_dim=D // H,
            intermediate_size=F,
            max_position_embeddings=CTX,
        ),
    ),
    "gemma2": (
        "gemma2",
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            head_dim=D // H,
            intermediate_size=F,
            sliding_window=64,
            max_position_embeddings=CTX,
        ),
    ),
    "gemma3": (
        "gemma3_text",
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            head_dim=D // H,
            intermediate_size=F,
            sliding_window=64,
            max_position_embeddings=CTX,
        ),
    ),
    "phi3": (
        "phi3",
        "Phi3Config",
        "Phi3ForCausalLM",
        dict(
            num_hidden_layers=L,
            hidden_size=D,
            num_attention_heads=H,
            num_key_value_heads=KV,
            intermediate_size=F,
            max_position_embeddings=CTX,
            original_max_position_embeddings=CTX,
        ),
    ),
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads for both frameworks")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated subset of the table")
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=128, help="tokens per row (at most 256)")
    parser.add_argument("--vocab", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    unknown = sorted(set(args.families.split(",")) - set(FAMILIES))
    if unknown:
        parser.error(f"--families: unknown {unknown}; known: {', '.join(FAMILIES)}")
    if not 1 <= args.tokens <= CTX:
        parser.error(f"--tokens {args.tokens}: the checkpoints hold {CTX} positions")
    return args


def word_tokenizer(vocab: int):
    """A word-level tokenizer with exactly ``vocab`` tokens (``t0`` ... ), ids 0/1/2 = pad/bos/eos."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t3"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="t0", bos_token="t1", eos_token="t2", unk_token="t3"
    )


def build(family: str, vocab: int, folder: Path, seed: int):
    """The family's random torch model (eval mode), saved with a tokenizer into ``folder``."""
    import torch
    import transformers

    _, config_class, model_class, fields = FAMILIES[family]
    config = getattr(transformers, config_class)(**fields, **SPECIAL, vocab_size=vocab)
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    model.save_pretrained(folder)
    word_tokenizer(vocab).save_pretrained(folder)
    return model


def matmul_flops(model, tokens: int) -> float:
    """2 x matmul parameters x tokens: every >= 2-D weight but the input and position embeddings (the head
    counted once, tied or not); expert weights at top-k / experts."""
    config = model.config
    share = getattr(config, "num_experts_per_tok", 1) / getattr(config, "num_local_experts", 1)
    n = 0.0
    for name, p in model.named_parameters():  # tied heads are not listed twice
        if p.dim() < 2 or any(s in name for s in ("embed_tokens", "wte", "wpe", "embed_positions", "embed_in")):
            continue
        n += p.numel() * (share if "experts" in name else 1)
    head = model.get_output_embeddings().weight
    if head is model.get_input_embeddings().weight:
        n += head.numel()
    return 2 * n * tokens


def median_times(run_ours, run_torch, repeats: int) -> tuple[list[float], list[float]]:
    """``repeats`` interleaved timings of each (so load changes on the machine hit both alike)."""
    ours, theirs = [], []
    for _ in range(repeats):
        for run, out in ((run_ours, ours), (run_torch, theirs)):
            start = time.perf_counter()
            run()
            out.append(time.perf_counter() - start)
    return ours, theirs


def bench_family(family: str, args, folder: Path) -> dict | None:
    import jax
    import numpy as np
    import torch

    from jaxassoc.errors import ModelError
    from jaxassoc.models import load_model
    from jaxassoc.models.family import registry
    from jaxassoc.models.heads import head_logits

    model_type = FAMILIES[family][0]
    if model_type not in registry():
        print(f"{family:9s} not ported (no jaxassoc family registers model_type {model_type!r}): skipped")
        return None
    reference = build(family, args.vocab, folder / family, args.seed)
    try:
        ours = load_model(folder / family)
    except ModelError as e:
        print(f"{family:9s} not loaded: {e}")
        return None

    rng = np.random.default_rng(args.seed)
    ids = rng.integers(3, args.vocab, size=(args.rows, args.tokens)).astype(np.int32)
    mask = np.ones_like(ids)

    def logits(params, ids, mask):
        return head_logits(params["head"], ours.forward(params["body"], ids, mask).hidden)

    start = time.perf_counter()
    compiled = jax.jit(logits).lower(ours.params, ids, mask).compile()
    compile_s = time.perf_counter() - start
    ids_j, mask_j = jax.device_put(ids), jax.device_put(mask)
    ids_t, mask_t = torch.from_numpy(ids).long(), torch.from_numpy(mask).long()

    def run_ours():
        return compiled(ours.params, ids_j, mask_j).block_until_ready()

    def run_torch():
        with torch.no_grad():
            return reference(input_ids=ids_t, attention_mask=mask_t).logits

    delta = float(np.abs(np.asarray(run_ours()) - run_torch().numpy()).max())  # warm-up and parity
    ours_s, torch_s = median_times(run_ours, run_torch, args.repeats)
    ours_t, torch_t = statistics.median(ours_s), statistics.median(torch_s)
    flops = matmul_flops(reference, ids.size)
    row = dict(
        family=family,
        ours_ms=1e3 * ours_t,
        torch_ms=1e3 * torch_t,
        ratio=torch_t / ours_t,
        ours_gflops=flops / ours_t / 1e9,
        torch_gflops=flops / torch_t / 1e9,
        delta=delta,
        compile_s=compile_s,
    )
    print(
        f"{family:9s} ours {row['ours_ms']:8.1f} ms  torch {row['torch_ms']:8.1f} ms  torch/ours {row['ratio']:5.2f}"
        f"  GFLOP/s ours {row['ours_gflops']:6.1f} torch {row['torch_gflops']:6.1f}  max|Δ| {delta:.1e}"
        f"  compile {compile_s:.1f} s",
        flush=True,
    )
    return row


def main():
    args = parse_args()
    setting = pin_threads(args.threads)
    import jax
    import torch
    import transformers
    from _matmul_rate import jax_gflops, torch_gflops

    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()  # save_pretrained's per-shard bar
    print(f"threads: {setting} | torch.get_num_threads() = {torch.get_num_threads()}")
    print(
        f"jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__}, transformers {transformers.__version__}"
    )
    print(
        f"config: {L} layers, d_model {D}, {H} heads ({KV} KV heads where grouped), MLP {F}, vocab {args.vocab}; "
        f"batch {args.rows} x {args.tokens} tokens; median of {args.repeats} interleaved passes"
    )
    rates = {"jax": jax_gflops(), "torch": torch_gflops()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families.split(","):
            row = bench_family(family, args, Path(tmp))
            rows += [row] if row else []
    rates = {k: (v, {"jax": jax_gflops, "torch": torch_gflops}[k]()) for k, v in rates.items()}
    print("\n| family | ours (ms) | torch (ms) | torch / ours | ours GFLOP/s | torch GFLOP/s | max abs Δ logits |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['family']} | {r['ours_ms']:.1f} | {r['torch_ms']:.1f} | **{r['ratio']:.2f}** | {r['ours_gflops']:.1f} "
            f"| {r['torch_gflops']:.1f} | {r['delta']:.1e} |"
        )
    print(
        "fp32 1024^2 matmul (ceiling), start / end of the run: "
        + ", ".join(f"{k} {a:.1f} / {b:.1f} GFLOP/s" for k, (a, b) in rates.items())
    )


if __name__ == "__main__":
    main()
