"""UnStereoEval sentence scoring: jaxassoc (JAX, jit) vs transformers' PyTorch Llama on SmolLM2-135M.

Both score the same filled templates (male and female sentence of each pair, distinct sentences) as
log P(sentence | BOS) summed over tokens, with the same weights (the embedded GGUF, dequantised once by
``jaxassoc.models.gguf.read_gguf`` and loaded into ``transformers.LlamaForCausalLM``) and the same
number of CPU threads. The PyTorch side runs length-sorted batches of ``--batch-size`` sentences, each
padded to its longest sentence (little padding: neighbours in the sorted order have similar lengths).
jaxassoc packs the sentences end to end into rows of 128 tokens (``--tokens-per-batch`` tokens per
batch), one compiled shape; compile time is reported separately, the timed run is the second one.

Reported: seconds, sentences/s, the ratio, the largest |difference| of the sums, and useful GFLOP/s
(matmul FLOPs of the real tokens: 2 x weights per token + causal attention + LM head) against each
framework's measured float32 matmul rate on the same threads. Run:
``python benchmarks/bench_unstereo_scoring.py [--threads 2] [--dataset Winogender] [--limit 256]``.
"""

import argparse
import time

from _matmul_rate import jax_gflops, pin_threads, torch_gflops
from _reference import torch_llama_from_gguf, torch_padded_batches


def _flops(cfg: dict, lengths) -> float:
    """Forward matmul FLOPs of sequences of the given lengths (BOS included), real tokens only."""
    d, ff, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    head_dim = d // cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    per_token = 2 * (L * (2 * d * d + 2 * d * kv * head_dim + 3 * d * ff) + V * d)
    # causal attention: QK^T and AV, 2 * 2 * d FLOPs per (query, key <= query) pair per layer
    return sum(T * per_token + 4 * L * d * T * (T + 1) / 2 for T in lengths)


def _torch_scores(model, sequences, batch_size, pad_id):
    import numpy as np
    import torch

    out = np.zeros(len(sequences))
    with torch.inference_mode():
        for rows, ids, mask in torch_padded_batches(sequences, batch_size, pad_id):
            logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits[:, :-1].float(), dim=-1)
            picked = logp.gather(2, ids[:, 1:, None])[..., 0] * mask[:, 1:]
            for row, i in enumerate(rows):
                out[i] = picked[row].double().sum().item()
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dataset", default="Winogender")
    parser.add_argument("--limit", type=int, default=256, help="first N distinct sentences (0: all)")
    parser.add_argument("--batch-size", type=int, default=32, help="PyTorch: sentences per batch")
    parser.add_argument("--tokens-per-batch", type=int, default=1024, help="jaxassoc: tokens per packed batch")
    args = parser.parse_args(argv)
    print(pin_threads(args.threads))

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from jaxassoc.data import unstereo as data
    from jaxassoc.models.loading import load_model
    from jaxassoc.readouts.unstereo import score_sentences, sentence_token_ids
    from jaxassoc.resources import smollm2_gguf

    frame = data.load_dataset(args.dataset)
    male, female = data.fill_templates(frame["template"].tolist())
    sentences = list(dict.fromkeys(male + female))
    sentences = sentences[: args.limit] if args.limit else sentences

    model = load_model("smollm2-135m")
    sequences = sentence_token_ids(model, sentences)
    lengths = [len(s) for s in sequences]
    t = time.perf_counter()
    score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch)
    first = time.perf_counter() - t
    t = time.perf_counter()
    jax_scores = score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch)
    jax_s = time.perf_counter() - t

    torch_model, hf_config, _ = torch_llama_from_gguf(smollm2_gguf())
    _torch_scores(torch_model, sequences[: args.batch_size], args.batch_size, model.vocab.pad_id)  # warm-up
    t = time.perf_counter()
    torch_scores = _torch_scores(torch_model, sequences, args.batch_size, model.vocab.pad_id)
    torch_s = time.perf_counter() - t

    gflop = _flops(hf_config, lengths) / 1e9
    jax_peak, torch_peak = jax_gflops(), torch_gflops()
    print(
        f"SmolLM2-135M (GGUF Q4_1 dequantised to float32), {args.dataset}: {len(sentences)} sentences, "
        f"{sum(lengths)} tokens incl. BOS (mean {np.mean(lengths):.1f}), PyTorch batch {args.batch_size}, "
        f"jaxassoc {args.tokens_per_batch} tokens per packed batch, "
        f"{args.threads} thread(s); {gflop:.1f} GFLOP of useful matmul work"
    )
    print(
        f"jaxassoc : {jax_s:7.2f} s  {len(sentences) / jax_s:7.1f} sent/s  {gflop / jax_s:6.1f} GFLOP/s "
        f"({100 * gflop / jax_s / jax_peak:.0f}% of its {jax_peak:.1f} GFLOP/s matmul rate); "
        f"first run incl. compilation {first:.2f} s"
    )
    print(
        f"PyTorch  : {torch_s:7.2f} s  {len(sentences) / torch_s:7.1f} sent/s  {gflop / torch_s:6.1f} GFLOP/s "
        f"({100 * gflop / torch_s / torch_peak:.0f}% of its {torch_peak:.1f} GFLOP/s matmul rate)"
    )
    print(f"speed ratio PyTorch time / jaxassoc time: {torch_s / jax_s:.2f}")
    diff = np.abs(jax_scores - torch_scores)
    print(
        f"sums: max |jax - torch| = {diff.max():.2e} nats (mean {diff.mean():.2e}; "
        f"mean |score| {np.abs(torch_scores).mean():.1f})"
    )


if __name__ == "__main__":
    main()
