"""Self-Debias sentence scoring: jaxassoc's batched pass vs a one-sentence-at-a-time PyTorch loop and a batched
PyTorch version, one run.

Model: SmolLM2-135M (the embedded GGUF dequantised once by ``jaxassoc.models.gguf.read_gguf`` and loaded into
``transformers.LlamaForCausalLM``, as ``bench_crows_pairs.py``). Workload: both sentences of the first
``--pairs`` pairs of ``load_crows_pairs()``, each scored as log P'(sentence | BOS) under Self-Debias (Schick et
al. 2021, Eq. 2) with the three prefixes of ``jaxassoc.mitigation.self_debias`` (gender, race, religion: four
rows per sentence), λ = 50, ε = 0.01. jaxassoc runs ``self_debias_causal_log_likelihoods`` (length-bucketed
batches of ``--batch-size`` sentences, the plain and prefixed rows of each in one jitted pass). PyTorch (eager,
the same CPU threads, ``torch.inference_mode``): (1) the loop as bias-bench describes its Self-Debias scoring:
one sentence at a time, its plain and prefixed inputs in one forward of 1 + K left-padded rows, log-softmax
over every position, the reweighting, the gathered tokens summed; (2) a batched version a competent user would
write: length-sorted batches of ``--torch-batch`` sentences (their 1 + K rows each, left-padded to the batch's
longest), the same arithmetic. Position ids come from the attention mask on both PyTorch sides, so a left-padded
row scores as it would alone. Per-sentence scores of all three are checked to agree within 1e-3 before timing
(on the first 4 pairs: a larger difference stops the run) and again on all after (printed, flagged beyond
1e-3). jaxassoc's first run starts from an empty XLA compile cache folder (compilation included), its warm run
is the next call. Printed: sentences, rows and tokens, seconds per side, the ratios, useful GFLOP/s and the fp32
matmul rate of each framework (the ceiling) at start and end; useful FLOPs: ``bench_unstereo_scoring._flops``
over every row's tokens, less the output head at the prefixes' tokens (their next-token values are not used).
Run from the repository root: ``python benchmarks/bench_self_debias.py --pairs N --threads 2``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]  # _matmul_rate, tests
from _matmul_rate import jax_gflops, pin_threads, torch_gflops  # noqa: E402  (imports nothing heavy)

TOLERANCE = 1e-3


def _rows(sequence, prefixes, start_id):
    """The plain row and one row per prefix: [BOS, prefix, sentence tokens]; and each prefix's length."""
    return [sequence] + [[start_id, *p, *sequence[1:]] for p in prefixes]


def _torch_debiased(model, batch, prefixes, pad_id, decay, epsilon):
    """Self-Debias scores of ``batch`` (sequences, BOS first) in one left-padded forward of (1 + K) rows each."""
    import torch

    K = len(prefixes)
    rows = [r for seq in batch for r in _rows(seq, prefixes, seq[0])]
    T = max(len(r) for r in rows)
    ids = torch.full((len(rows), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, T - len(r) :] = torch.tensor(r)
        mask[i, T - len(r) :] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()
    logp = torch.log_softmax(logits.view(len(batch), 1 + K, T, -1), dim=-1)  # right-aligned: columns agree
    p = logp[:, 0].exp()
    alpha = (logp[:, 1:].exp().max(1).values - p).clamp(min=0)
    logq = logp[:, 0] + torch.clamp(-decay * alpha, min=float(torch.log(torch.tensor(epsilon))))
    logq = logq - torch.logsumexp(logq, dim=-1, keepdim=True)
    out = []
    for b, seq in enumerate(batch):
        n = len(seq)
        cols = torch.arange(T - n, T - 1)
        out.append(logq[b, cols, ids[b * (1 + K), T - n + 1 :]].double().sum().item())
    return out


def torch_loop(model, sequences, prefixes, pad_id, decay, epsilon):
    """bias-bench's way: one sentence at a time, its 1 + K rows in one forward."""
    import numpy as np
    import torch

    with torch.inference_mode():
        return np.array([_torch_debiased(model, [s], prefixes, pad_id, decay, epsilon)[0] for s in sequences])


def torch_batched(model, sequences, prefixes, pad_id, decay, epsilon, batch_size):
    """Length-sorted batches of ``batch_size`` sentences, 1 + K rows each, one forward per batch."""
    import numpy as np
    import torch

    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    out = np.zeros(len(sequences))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = _torch_debiased(model, [sequences[i] for i in chunk], prefixes, pad_id, decay, epsilon)
    return out


def _check(name, a, b, where, stop=True):
    import numpy as np

    diff = np.abs(a - b).max()
    if diff <= TOLERANCE:
        return f"{diff:.1e}"
    if stop:
        sys.exit(f"{where}: jaxassoc and the {name} differ by {diff:.2e} nats on a sentence score (> {TOLERANCE})")
    return f"{diff:.1e} (MORE THAN {TOLERANCE})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=50, help="the first N pairs of the 1,508 (0: all)")
    parser.add_argument("--batch-size", type=int, default=16, help="jaxassoc: sentences per pass (x 4 rows)")
    parser.add_argument("--torch-batch", type=int, default=8, help="batched PyTorch: sentences per forward")
    args = parser.parse_args(argv)
    pinned = pin_threads(args.threads)

    import torch

    torch.set_num_threads(args.threads)
    import jax
    import numpy as np
    import transformers
    from _reference import torch_llama_from_gguf
    from bench_unstereo_scoring import _flops

    from jaxassoc.app.cache import use_compile_cache
    from jaxassoc.data.crows_pairs import load_crows_pairs
    from jaxassoc.mitigation import self_debias as sd
    from jaxassoc.models.loading import load_model
    from jaxassoc.readouts.sentence_scores import causal_token_ids
    from jaxassoc.resources import smollm2_gguf

    transformers.utils.logging.disable_progress_bar()
    pairs = load_crows_pairs()
    pairs = pairs.iloc[: args.pairs] if args.pairs else pairs
    print(
        f"pinned: {pinned}; jax {jax.__version__}, torch {torch.__version__}, transformers {transformers.__version__}"
    )
    rates = {"jax": jax_gflops(), "torch": torch_gflops()}
    with tempfile.TemporaryDirectory() as tmp:
        use_compile_cache(Path(tmp) / "xla")  # empty: jaxassoc's first run compiles everything
        jax_model = load_model("smollm2-135m")
        torch_model, _, _ = torch_llama_from_gguf(smollm2_gguf())
        sentences = [s for pair in zip(pairs["sent_more"], pairs["sent_less"]) for s in pair]
        sequences = causal_token_ids(jax_model, sentences, jax_model.vocab.bos_id)
        texts = sd.prefixes_for("all")
        prefixes = [jax_model.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        pad_id = jax_model.vocab.pad_id if jax_model.vocab.pad_id is not None else jax_model.vocab.eos_id
        decay, epsilon = sd.DECAY, sd.EPSILON

        def run_jax(seqs):
            return sd.self_debias_causal_log_likelihoods(jax_model, seqs, prefixes=texts, batch_size=args.batch_size)

        t = time.perf_counter()
        ours = run_jax(sequences)  # first run: nothing compiled, empty compile cache folder
        first = time.perf_counter() - t
        t = time.perf_counter()
        ours = run_jax(sequences)
        warm = time.perf_counter() - t

        head = sequences[:8]  # parity on the first 4 pairs before timing (also the PyTorch warm-up)
        _check("one-sentence loop", ours[:8], torch_loop(torch_model, head, prefixes, pad_id, decay, epsilon), "parity")
        _check(
            "batched PyTorch",
            ours[:8],
            torch_batched(torch_model, head, prefixes, pad_id, decay, epsilon, args.torch_batch),
            "parity",
        )

        t = time.perf_counter()
        batched = torch_batched(torch_model, sequences, prefixes, pad_id, decay, epsilon, args.torch_batch)
        batched_s = time.perf_counter() - t
        t = time.perf_counter()
        loop = torch_loop(torch_model, sequences, prefixes, pad_id, decay, epsilon)
        loop_s = time.perf_counter() - t
        d_loop = _check("one-sentence loop", ours, loop, "all sentences", stop=False)
        d_batched = _check("batched PyTorch", ours, batched, "all sentences", stop=False)

        lengths = [len(r) for s in sequences for r in _rows(s, prefixes, s[0])]
        cfg = torch_model.config.to_dict()
        head_flops = 2 * cfg["vocab_size"] * cfg["hidden_size"]  # not useful at a prefix's tokens: not counted
        gflop = (_flops(cfg, lengths) - head_flops * len(sequences) * sum(map(len, prefixes))) / 1e9

        def rate(seconds, framework):
            return (
                f"{gflop / seconds:6.1f} GFLOP/s ({100 * gflop / seconds / rates[framework]:.0f}% of its matmul rate)"
            )

        print(
            f"\nSmolLM2-135M (causal, GGUF dequantised to float32), Self-Debias with {len(texts)} prefixes "
            f"({', '.join(str(len(p)) for p in prefixes)} tokens): {len(pairs)} pairs, {len(sequences)} sentences, "
            f"{len(lengths)} rows, {sum(lengths)} tokens, {gflop:.1f} GFLOP useful"
        )
        print(f"  jaxassoc, first run (compiles): {first:8.2f} s   batches of {args.batch_size} sentences")
        print(f"  jaxassoc, warm                : {warm:8.2f} s   {rate(warm, 'jax')}")
        print(f"  PyTorch, one sentence a time  : {loop_s:8.2f} s   {rate(loop_s, 'torch')}")
        print(
            f"  PyTorch, batched              : {batched_s:8.2f} s   {rate(batched_s, 'torch')}; "
            f"batches of {args.torch_batch} sentences"
        )
        print(f"  ratio loop / jaxassoc   : first run {loop_s / first:6.2f}, warm {loop_s / warm:6.2f}")
        print(f"  ratio batched / jaxassoc: first run {batched_s / first:6.2f}, warm {batched_s / warm:6.2f}")
        print(
            f"  per-sentence scores: max |jaxassoc - loop| {d_loop}, max |jaxassoc - batched| {d_batched} nats "
            f"(mean |score| {np.abs(loop).mean():.1f})"
        )
        print(
            f"\nfp32 1024x1024 matmul rate on {args.threads} thread(s) at start: jax {rates['jax']:.1f} GFLOP/s, "
            f"torch {rates['torch']:.1f} GFLOP/s; at end: jax {jax_gflops():.1f}, torch {torch_gflops():.1f}"
        )
        use_compile_cache(None)  # the folder goes with the temporary directory


if __name__ == "__main__":
    main()
