"""``model.precision`` on SmolLM2-135M: float32 against mixed (and bfloat16), each against PyTorch doing the
same work in float32 and under ``torch.autocast("cpu", dtype=torch.bfloat16)``, all pinned to the same threads.

1. **Scoring** (UnStereoEval's path, in this process): the distinct sentences of ``--dataset`` (``--limit``) as
   log P(sentence | BOS), jaxassoc's ``score_sentences`` per precision (packed rows; first run with
   compilation reported apart, the timed run is the second) against transformers' ``LlamaForCausalLM`` on
   length-sorted padded batches (``bench_unstereo_scoring.py``'s loop) in float32 and under autocast (the
   weights stay float32, autocast casts them per product: what a PyTorch user writes). Also: max |Δ score|
   against float32 and the share of male/female pairs whose preference flips.
2. **Whole process** (``--whole-process``): ``jaxassoc model=smollm2-135m metric=rpam dataset=weat_ws
   template=tp2 model.precision=P cache_dir=null`` (no result cache) twice with ``JAXASSOC_CACHE`` a new folder:
   the first run compiles into its ``xla/``, the warm one loads from it; for P = float32 and mixed; against ``rpam_loop_process.py --weat-only`` (the key/value-cache loop)
   in float32 and with ``--autocast``.

Printed: seconds, ratios, and each framework's matmul rate (1024², float32 and bfloat16 inputs with float32
accumulation) as the ceilings. Run:
``python benchmarks/bench_precision.py [--threads 2] [--limit 512] [--whole-process]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _matmul_rate import jax_gflops, pin_threads, torch_gflops
from _reference import torch_llama_from_gguf
from bench_unstereo_scoring import _flops, _torch_scores

PRECISIONS = ("float32", "mixed", "bfloat16")


def scoring(args) -> None:
    import numpy as np
    import torch

    from jaxassoc.data import unstereo as data
    from jaxassoc.models.loading import load_model
    from jaxassoc.readouts.unstereo import score_sentences, sentence_token_ids
    from jaxassoc.resources import smollm2_gguf

    frame = data.load_dataset(args.dataset)
    male, female = data.fill_templates(frame["template"].tolist())
    n = args.limit // 2 if args.limit else len(male)
    pairs = list(zip(male[:n], female[:n]))
    sentences = list(dict.fromkeys(s for pair in pairs for s in pair))
    seconds, scores = {}, {}
    for precision in PRECISIONS:
        model = load_model("smollm2-135m", precision=precision)
        t = time.perf_counter()
        score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch)
        first = time.perf_counter() - t
        t = time.perf_counter()
        scores[precision] = np.asarray(score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch))
        seconds[precision] = time.perf_counter() - t
        print(f"jaxassoc {precision:8s}: {seconds[precision]:6.2f} s warm, first run with compilation {first:6.2f} s")
    sequences = sentence_token_ids(model, sentences)
    torch_model, hf_config, _ = torch_llama_from_gguf(smollm2_gguf())
    pad = model.vocab.pad_id
    for name, autocast in (("torch float32", False), ("torch autocast", True)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            _torch_scores(torch_model, sequences[: args.batch_size], args.batch_size, pad)  # warm-up
            t = time.perf_counter()
            scores[name] = _torch_scores(torch_model, sequences, args.batch_size, pad)
            seconds[name] = time.perf_counter() - t
        print(f"{name:17s}: {seconds[name]:6.2f} s")
    gflop = _flops(hf_config, [len(s) for s in sequences]) / 1e9
    index = {s: i for i, s in enumerate(sentences)}
    preference = {k: np.array([v[index[m]] > v[index[f]] for m, f in pairs]) for k, v in scores.items()}
    print(
        f"{len(sentences)} sentences of {args.dataset} ({len(pairs)} pairs), {gflop:.1f} GFLOP of useful matmul "
        f"work, {args.threads} thread(s); matmul ceilings (1024²): JAX float32 {jax_gflops():.0f}, bfloat16->f32 "
        f"{jax_gflops(dtype='bfloat16'):.0f}; torch float32 {torch_gflops():.0f}, bfloat16 "
        f"{torch_gflops(dtype='bfloat16'):.0f} GFLOP/s"
    )
    print("| run | s | GFLOP/s | vs jaxassoc float32 | vs torch float32 | vs torch autocast | max Δ | flips |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, s in seconds.items():
        delta = np.abs(scores[name] - scores["float32"]).max()
        flips = (preference[name] != preference["float32"]).mean()
        print(
            f"| {name} | {s:.2f} | {gflop / s:.1f} | {seconds['float32'] / s:.2f}x | {seconds['torch float32'] / s:.2f}x"
            f" | {seconds['torch autocast'] / s:.2f}x | {delta:.3f} | {100 * flips:.1f} % |"
        )


def whole_process(args) -> None:
    python, here = sys.executable, Path(__file__).resolve().parent
    results = {}
    for precision in ("float32", "mixed"):
        with tempfile.TemporaryDirectory() as cache:  # no result cache; compiled functions in <cache>/xla
            for run in ("first", "warm"):
                command = [python, "-m", "jaxassoc", "model=smollm2-135m", "metric=rpam", "dataset=weat_ws",
                           "template=tp2", f"model.precision={precision}", "cache_dir=null",
                           f"hydra.run.dir={cache}/run-{run}"]  # fmt: skip
                results[f"jaxassoc {precision} {run}"] = _timed_process(command, {"JAXASSOC_CACHE": cache})
    for autocast in ((), ("--autocast",)):
        command = [python, str(here / "rpam_loop_process.py"), "--template", "tp2", "--weat-only", "--threads",
                   str(args.threads), *autocast]  # fmt: skip
        results[f"torch loop{' autocast' if autocast else ''}"] = _timed_process(command, {})
    for name, seconds in results.items():
        print(f"{name:24s}: {seconds:6.1f} s")
    f32, mixed = results["jaxassoc float32 warm"], results["jaxassoc mixed warm"]
    print(
        f"mixed vs float32 (warm) {f32 / mixed:.2f}x; (first) {results['jaxassoc float32 first'] / results['jaxassoc mixed first']:.2f}x"
    )
    print(f"mixed vs torch autocast loop: warm {results['torch loop autocast'] / mixed:.2f}x, first "
          f"{results['torch loop autocast'] / results['jaxassoc mixed first']:.2f}x")  # fmt: skip
    print(f"float32 vs torch float32 loop: warm {results['torch loop'] / f32:.2f}x, first "
          f"{results['torch loop'] / results['jaxassoc float32 first']:.2f}x")  # fmt: skip


def _timed_process(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env})
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dataset", default="USE-5")
    parser.add_argument("--limit", type=int, default=512, help="sentences (pairs x 2; 0: all)")
    parser.add_argument("--batch-size", type=int, default=32, help="PyTorch: sentences per batch")
    parser.add_argument("--tokens-per-batch", type=int, default=4096, help="jaxassoc: tokens per packed batch")
    parser.add_argument("--whole-process", action="store_true")
    args = parser.parse_args(argv)
    print(pin_threads(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    whole_process(args) if args.whole_process else scoring(args)


if __name__ == "__main__":
    main()
