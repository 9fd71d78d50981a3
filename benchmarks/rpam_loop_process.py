"""The reference *process* of ``bench_rpam.py --whole-process``: RPAM WEAT-WS (C1-C10) + Bellezza (399 words)
+ WS-353 (all 353 pairs) on SmolLM2-135M with the key/value-cache PyTorch loop of ``bench_rpam.py``, from
the embedded GGUF file to the effect sizes and correlations, as a user would write it without jaxassoc.

Weights and tokenizer come from ``jaxassoc.models.gguf.read_gguf`` (NumPy only; transformers' own GGUF
loading needs ``accelerate``), prompts and attribute tokens from jaxassoc's template rules, so both sides
read the same token ids. Statistics: d per WEAT-WS test (Eq. 1, ddof 1), Spearman ρ / Pearson r for
Bellezza, Spearman ρ for WS-353 (docs/methods.md §1.3-1.5); no permutation test or bootstrap CI (the
jaxassoc process computes both). Prints one line per result and the wall time of each stage.

``--weat-only`` stops after WEAT-WS (the process of ``bench_precision.py``); ``--autocast`` runs every forward
pass under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (bfloat16 products, the weights kept in float32 and
cast by autocast, as a PyTorch user turns on mixed precision).

Run: ``python benchmarks/rpam_loop_process.py --template tp2 --threads 2 [--weat-only] [--autocast]``.
"""

from __future__ import annotations

import argparse
import time

START = time.perf_counter()

from _matmul_rate import pin_threads  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", choices=("tp1", "tp2"), default="tp2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cont-batch", type=int, default=256)
    parser.add_argument("--weat-only", action="store_true", help="WEAT-WS only (no Bellezza, no WS-353)")
    parser.add_argument("--autocast", action="store_true", help="bfloat16 autocast on the CPU")
    args = parser.parse_args(argv)
    pin_threads(args.threads)

    import scipy.stats
    import torch

    torch.set_num_threads(args.threads)
    from _reference import torch_llama_from_gguf
    from bench_rpam import TEMPLATES, torch_probabilities, workload

    from jaxassoc import data
    from jaxassoc.readouts.rpam import GENDER_ROLE_TESTS
    from jaxassoc.readouts.rpam_prompts import PromptTemplate
    from jaxassoc.resources import smollm2_gguf

    model, hf_config, tok = torch_llama_from_gguf(smollm2_gguf())
    loaded = time.perf_counter()
    print(f"loaded in {loaded - START:.1f} s (imports, GGUF dequantised into LlamaForCausalLM)")

    template = PromptTemplate(args.template, TEMPLATES[args.template])
    bos = [hf_config["bos_token_id"]] if tok("a")["input_ids"][0] == hf_config["bos_token_id"] else []
    pad = hf_config["pad_token_id"] if hf_config.get("pad_token_id") is not None else hf_config["eos_token_id"]

    def encode(targets, attributes):
        prompts = [bos + tok(template.fill(t), add_special_tokens=False)["input_ids"] for t in targets]
        attrs = [tuple(tok(template.attribute_prefix + a, add_special_tokens=False)["input_ids"]) for a in attributes]
        return prompts, attrs

    if args.autocast:
        torch.autocast("cpu", dtype=torch.bfloat16).__enter__()  # for the rest of the process
    _, (_, bellezza, _), (_, ws, needed) = workload(0, 0)
    for test in data.load_weat_suite("weat_ws").tests:
        test = test.with_roles_swapped() if test.id in GENDER_ROLE_TESTS else test
        targets, attributes = test.targets_x + test.targets_y, test.attributes_a + test.attributes_b
        p = torch_probabilities(model, *encode(targets, attributes), None, args.batch_size, args.cont_batch, pad)
        s = p[:, : len(test.attributes_a)].mean(1) - p[:, len(test.attributes_a) :].mean(1)
        x, y = s[: len(test.targets_x)], s[len(test.targets_x) :]
        print(f"WEAT-WS {test.id}: d = {(x.mean() - y.mean()) / s.std(ddof=1):+.4f}")
    if args.weat_only:
        print(f"scored in {time.perf_counter() - loaded:.1f} s; process {time.perf_counter() - START:.1f} s")
        return
    ((words, attributes),) = bellezza
    p = torch_probabilities(model, *encode(words, attributes), None, args.batch_size, args.cont_batch, pad)
    valence = p[:, :25].mean(1) - p[:, 25:].mean(1)
    ratings = data.load_bellezza()["valence"].to_numpy()
    print(
        f"Bellezza Spearman {scipy.stats.spearmanr(valence, ratings)[0]:.4f}, "
        f"Pearson {scipy.stats.pearsonr(valence, ratings)[0]:.4f}"
    )
    ((words, _),) = ws
    p = torch_probabilities(model, *encode(words, words), needed, args.batch_size, args.cont_batch, pad)
    pairs = data.load_wordsim353()
    index = {w: i for i, w in enumerate(words)}
    i1, i2 = pairs["word1"].map(index).to_numpy(), pairs["word2"].map(index).to_numpy()
    score = 0.5 * (p[i1, i2] + p[i2, i1])
    print(f"WS-353 Spearman {scipy.stats.spearmanr(score, pairs['score'])[0]:.4f} on {len(pairs)} pairs")
    print(f"scored in {time.perf_counter() - loaded:.1f} s; process {time.perf_counter() - START:.1f} s")


if __name__ == "__main__":
    main()
