"""RPAM p(v, t) on SmolLM2-135M: jaxassoc vs a straightforward transformers-PyTorch implementation.

Workload (TP1, the paper's prompts): WEAT-WS C1-C10 (C7/C8 with the gender terms as targets), Bellezza
words x the 50 valence attributes, WS-353 words x WS-353 words (``--bellezza-words``/``--ws-pairs``
take seeded subsets to keep a run short; 0 = all). Both sides compute the same p(v, t) matrices from the
same weights (the embedded GGUF dequantised once by ``jaxassoc.models.gguf.read_gguf`` and loaded into
``transformers.LlamaForCausalLM``; transformers' own GGUF loading needs ``accelerate``):

- PyTorch (eager, batched, length-sorted right-padded batches of ``--batch-size``): one pass per prompt
  for the first-token logits, one pass per (target, multi-token attribute) for the subword
  probabilities (App. E), full-vocabulary logits at every position as ``model(...).logits`` gives them;
- jaxassoc: :func:`jaxassoc.app.pipelines.rpam.probabilities` (one pass per (target, multi-token
  attribute) that also gives the first-token logits, deduplicated, head at the last positions only,
  length buckets, one compilation per shape). Its first run includes compilation; the timed run is the
  second.

Both are pinned to the same CPU threads (``--threads``, printed with each framework's fp32 matmul rate).
Run: ``python benchmarks/bench_rpam.py [--threads 2] [--bellezza-words 100] [--ws-pairs 40]``.
"""

from __future__ import annotations

import argparse
import time

from _matmul_rate import jax_gflops, pin_threads, torch_gflops
from _reference import torch_llama_from_gguf, torch_padded_batches

TP1 = "These words are associated: {target} and"


def workload(bellezza_words: int, ws_pairs: int):
    """(name, targets, attributes) of every RPAM computation in the benchmark."""
    import numpy as np

    from jaxassoc import data
    from jaxassoc.app.pipelines.rpam import GENDER_ROLE_TESTS

    tasks = []
    for test in data.load_weat_suite("weat_ws").tests:
        test = test.with_roles_swapped() if test.id in GENDER_ROLE_TESTS else test
        tasks.append((f"WEAT-WS {test.id}", test.targets_x + test.targets_y, test.attributes_a + test.attributes_b))
    rng = np.random.default_rng(0)
    words = data.load_bellezza()["word"].tolist()
    if bellezza_words:
        words = [words[i] for i in np.sort(rng.choice(len(words), bellezza_words, replace=False))]
    pleasant, unpleasant = data.valence_attributes()
    tasks.append(("Bellezza", words, list(pleasant + unpleasant)))
    pairs = data.load_wordsim353()
    if ws_pairs:
        pairs = pairs.iloc[np.sort(rng.choice(len(pairs), ws_pairs, replace=False))]
    ws_words = sorted(set(pairs["word1"]) | set(pairs["word2"]))
    tasks.append(("WS-353", ws_words, ws_words))
    return tasks


def _torch_batches(model, sequences, batch_size, pad_id, read):
    """``read(logits_row, sequence)`` of every sequence, run in length-sorted right-padded batches."""
    import torch

    out = [None] * len(sequences)
    with torch.inference_mode():
        for rows, ids, mask in torch_padded_batches(sequences, batch_size, pad_id):
            logits = model(input_ids=ids, attention_mask=mask).logits
            for row, i in enumerate(rows):
                out[i] = read(logits[row], sequences[i])
    return out


def torch_probabilities(model, prompts, attr_ids, batch_size, pad_id):
    """p(v, t) the straightforward way: prompt passes, then one pass per (target, multi-token attribute)."""
    import numpy as np
    import torch

    first = np.array([a[0] for a in attr_ids])
    z = _torch_batches(model, prompts, batch_size, pad_id, lambda lg, s: lg[len(s) - 1, first].double())
    p = torch.softmax(torch.stack(z), dim=-1).numpy()
    multi = [c for c, a in enumerate(attr_ids) if len(a) > 1]
    pairs = [(t, c) for t in range(len(prompts)) for c in multi]
    if pairs:
        sequences = [prompts[t] + list(attr_ids[c]) for t, c in pairs]

        def read(logits, seq):
            return logits.float().log_softmax(-1)[:-1].gather(1, torch.tensor(seq[1:])[:, None])[:, 0]

        logps = _torch_batches(model, sequences, batch_size, pad_id, read)
        for (t, c), lp, seq in zip(pairs, logps, sequences):
            k = len(attr_ids[c])
            p[t, c] *= lp[len(seq) - k : len(seq) - 1].exp().mean().item()
    return p


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--bellezza-words", type=int, default=100, help="seeded subset (0: all 399)")
    parser.add_argument("--ws-pairs", type=int, default=40, help="seeded subset of pairs (0: all 353)")
    args = parser.parse_args(argv)
    pinned = pin_threads(args.threads)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    from jaxassoc.app.pipelines import rpam
    from jaxassoc.app.pipelines.rpam_prompts import PromptTemplate, encode_prompts, tokenize_attributes
    from jaxassoc.models.loading import load_model
    from jaxassoc.resources import smollm2_gguf

    template = PromptTemplate("tp1", TP1)
    model = load_model("smollm2-135m")
    tasks = workload(args.bellezza_words, args.ws_pairs)

    def run_jax():
        return [rpam.probabilities(model, t, a, template, batch_size=args.batch_size)[0] for _, t, a in tasks]

    start = time.perf_counter()
    run_jax()
    jax_first = time.perf_counter() - start
    start = time.perf_counter()
    jax_p = run_jax()
    jax_s = time.perf_counter() - start

    torch_model, _ = torch_llama_from_gguf(smollm2_gguf())
    pad = model.vocab.pad_id if model.vocab.pad_id is not None else model.vocab.eos_id
    encoded = [
        (encode_prompts(model, [template.fill(x) for x in t]), tokenize_attributes(model.tokenizer, a, template).token_ids)
        for _, t, a in tasks
    ]
    torch_probabilities(torch_model, encoded[0][0][:4], encoded[0][1], args.batch_size, pad)  # warm-up
    start = time.perf_counter()
    torch_p = [torch_probabilities(torch_model, pr, at, args.batch_size, pad) for pr, at in encoded]
    torch_s = time.perf_counter() - start

    n_t = sum(len(t) for _, t, _ in tasks)
    n_seq = sum(len(pr) * (1 + sum(len(a) > 1 for a in at)) for pr, at in encoded)
    diff = max(float(np.abs(a - b).max()) for a, b in zip(jax_p, torch_p))
    rel = max(float((np.abs(a - b) / np.maximum(np.abs(b), 1e-12)).max()) for a, b in zip(jax_p, torch_p))
    print(f"pinned: {pinned}")
    print(f"SmolLM2-135M (GGUF Q4_1 dequantised to float32), TP1: {len(tasks)} RPAM computations, {n_t} targets, "
          f"{n_seq} prompt + continuation passes the straightforward way; batch {args.batch_size}, "
          f"{args.threads} thread(s); Bellezza words {args.bellezza_words or 399}, WS-353 pairs {args.ws_pairs or 353}")
    print(f"jaxassoc : {jax_s:7.2f} s (first run incl. compilation {jax_first:.2f} s)")
    print(f"PyTorch  : {torch_s:7.2f} s")
    print(f"speed ratio PyTorch time / jaxassoc time: {torch_s / jax_s:.2f}")
    print(f"p(v, t): max |jax - torch| = {diff:.2e}, max relative difference {rel:.2e}")
    print(f"fp32 1024x1024 matmul rate on {args.threads} thread(s): jax {jax_gflops():.1f} GFLOP/s, "
          f"torch {torch_gflops():.1f} GFLOP/s")


if __name__ == "__main__":
    main()
