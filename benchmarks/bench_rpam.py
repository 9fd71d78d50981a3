"""RPAM p(v, t) on SmolLM2-135M: jaxassoc vs a key/value-cache transformers-PyTorch loop, TP1 and TP2.

Workload per template: WEAT-WS C1-C10 (C7/C8 with the gender terms as targets), Bellezza words x the 50
valence attributes, and WS-353 (every word a target and an attribute; a pair needs each word's
continuation after its partner only). ``--bellezza-words``/``--ws-pairs`` take seeded subsets, ``--weat-tests``
the first n tests (0 = all).
Both sides compute the same p(v, t) entries from the same weights (the embedded GGUF dequantised once by
``jaxassoc.models.gguf.read_gguf`` and loaded into ``transformers.LlamaForCausalLM``):

- PyTorch (eager, ``torch.inference_mode``): per task, length-sorted batches of ``--batch-size`` prompts,
  left-padded (position ids from the mask), run once with ``use_cache=True`` and the head at the last position only
  (``logits_to_keep=1``) for the first-token logits and log-partition; then the needed (prompt,
  multi-token attribute) pairs of the batch in chunks of up to ``--cont-batch`` rows: each row gets its
  prompt's cache rows (``index_select``), its subwords 1..k-1 right-padded, position ids continuing the
  prompt, and reads log P(subword j+1) at each, the head over those positions only;
- jaxassoc: what ``jaxassoc model=... metric=rpam`` runs: WEAT-WS in one run over its tests' union
  (:func:`jaxassoc.readouts.rpam.task_probabilities`), Bellezza and WS-353 (partners only) with
  :func:`~jaxassoc.readouts.rpam.probabilities`: each prompt once with its cache, all its needed
  continuations packed into one pass from that cache. Its first run includes compilation; the timed run
  is the second.

Both are pinned to the same CPU threads (``--threads``). Printed: times, the ratio, max |Δp|, and achieved
GFLOP/s of both on the same useful work (2 x body matmul parameters x real prompt and continuation tokens
+ 2 x head parameters x head positions: one per prompt, one per continuation subword; attention scores
and padding not counted) against each framework's fp32 matmul rate measured in the same run.
Run: ``python benchmarks/bench_rpam.py [--threads 2] [--templates tp1,tp2] [--bellezza-words 100] [--ws-pairs 40]``.

``--whole-process`` times what the user waits for instead, per template: the command
``jaxassoc -m model=smollm2-135m metric=rpam dataset=weat_ws,bellezza,wordsim353 template=tpN cache_dir=null``
(start-up, loading, compilation, statistics with permutation p-values and bootstrap CIs, the sweep report),
twice from an empty cache folder: the first run compiles, the next loads the compiled functions from
``<cache>/xla`` (``compile_cache``); against the process ``benchmarks/rpam_loop_process.py`` (the same loop,
from the GGUF file to the effect sizes and correlations), both on all 399 Bellezza words and 353 WS-353
pairs, pinned to the same CPUs.
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

TEMPLATES = {
    "tp1": "These words are associated: {target} and",
    "tp2": "This sentence and this word are associated: {quote}This is {target}{quote} and {quote}",
}


def workload(bellezza_words: int, ws_pairs: int, weat_tests: int = 0):
    """``(name, tasks, needed)``: WEAT-WS (10 tasks of (targets, attributes)), Bellezza, WS-353 with its
    pairs (``needed`` marks the WS-353 entries a pair reads; None: all)."""
    import numpy as np

    from jaxassoc import data
    from jaxassoc.readouts.rpam import GENDER_ROLE_TESTS

    weat = []
    for test in data.load_weat_suite("weat_ws").tests[: weat_tests or None]:
        test = test.with_roles_swapped() if test.id in GENDER_ROLE_TESTS else test
        weat.append((test.targets_x + test.targets_y, test.attributes_a + test.attributes_b))
    rng = np.random.default_rng(0)
    words = data.load_bellezza()["word"].tolist()
    if bellezza_words:
        words = [words[i] for i in np.sort(rng.choice(len(words), bellezza_words, replace=False))]
    pleasant, unpleasant = data.valence_attributes()
    pairs = data.load_wordsim353()
    if ws_pairs:
        pairs = pairs.iloc[np.sort(rng.choice(len(pairs), ws_pairs, replace=False))]
    ws_words = sorted(set(pairs["word1"]) | set(pairs["word2"]))
    index = {w: i for i, w in enumerate(ws_words)}
    i1, i2 = pairs["word1"].map(index).to_numpy(), pairs["word2"].map(index).to_numpy()
    needed = np.zeros((len(ws_words), len(ws_words)), dtype=bool)
    needed[i1, i2] = needed[i2, i1] = True
    return [
        ("WEAT-WS", weat, None),
        ("Bellezza", [(words, list(pleasant + unpleasant))], None),
        ("WS-353", [(ws_words, ws_words)], needed),
    ]


def torch_probabilities(model, prompts, attr_ids, needed, batch_size, cont_batch, pad_id):
    """p(v, t) (NaN where not needed and multi-token) with the prompt's key/value cache kept."""
    import numpy as np
    import torch

    T, C = len(prompts), len(attr_ids)
    first = torch.tensor([a[0] for a in attr_ids])
    p = np.full((T, C), np.nan)
    multi = [c for c, a in enumerate(attr_ids) if len(a) > 1]
    order = sorted(range(T), key=lambda t: len(prompts[t]))
    with torch.inference_mode():
        for start in range(0, T, batch_size):
            rows = order[start : start + batch_size]
            P = max(len(prompts[t]) for t in rows)
            ids = torch.full((len(rows), P), pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), P), dtype=torch.long)
            for r, t in enumerate(rows):
                ids[r, P - len(prompts[t]) :] = torch.tensor(prompts[t])
                mask[r, P - len(prompts[t]) :] = 1
            out = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                use_cache=True,
                logits_to_keep=1,
            )
            logits = out.logits[:, -1].double()
            p[rows] = torch.softmax(logits[:, first], dim=-1).numpy()
            pairs = [(r, c) for r, t in enumerate(rows) for c in multi if needed is None or needed[t, c]]
            if needed is not None:  # the entries not asked for stay NaN, as on the jaxassoc side
                p[np.ix_(rows, multi)] = np.where(needed[np.ix_(rows, multi)], p[np.ix_(rows, multi)], np.nan)
            for s in range(0, len(pairs), cont_batch):
                chunk = pairs[s : s + cont_batch]
                select = torch.tensor([r for r, _ in chunk])
                k = max(len(attr_ids[c]) for _, c in chunk) - 1
                inputs = torch.full((len(chunk), k), pad_id, dtype=torch.long)
                targets = torch.zeros((len(chunk), k), dtype=torch.long)
                valid = torch.zeros((len(chunk), k), dtype=torch.bool)
                for j, (_, c) in enumerate(chunk):
                    a = attr_ids[c]
                    inputs[j, : len(a) - 1], targets[j, : len(a) - 1] = torch.tensor(a[:-1]), torch.tensor(a[1:])
                    valid[j, : len(a) - 1] = True
                cache = _select_cache(out.past_key_values, select)
                cont_mask = torch.cat([mask[select], valid.long()], dim=1)
                positions = mask[select].sum(1, keepdim=True) + torch.arange(k)[None]
                hidden = model.model(
                    input_ids=inputs, attention_mask=cont_mask, position_ids=positions, cache=cache, use_cache=True
                ).last_hidden_state
                logp = torch.log_softmax(model.lm_head(hidden[valid]).float(), dim=-1)
                logp = logp.gather(1, targets[valid][:, None])[:, 0].double().exp()
                at = 0
                for j, (r, c) in enumerate(chunk):
                    n = len(attr_ids[c]) - 1
                    p[rows[r], c] *= logp[at : at + n].mean().item()
                    at += n
    return p


def _select_cache(cache, rows):
    """A new DynamicCache holding the given batch rows of ``cache`` (rows may repeat)."""
    from transformers import DynamicCache

    new = DynamicCache()
    for i, layer in enumerate(cache.layers):
        new.update(layer.keys.index_select(0, rows), layer.values.index_select(0, rows), i)
    return new


def useful_flops(config, prompts, attr_ids, needed) -> float:
    """2 x body matmul params x (prompt + continuation tokens) + 2 x head params x head positions."""
    L, D, F = config.num_hidden_layers, config.hidden_size, config.intermediate_size
    q, kv = config.num_attention_heads * config.head_dim, config.num_key_value_heads * config.head_dim
    body = L * (D * q + 2 * D * kv + q * D + 3 * D * F)
    head = config.vocab_size * D
    cont = sum(
        len(attr_ids[c]) - 1
        for t in range(len(prompts))
        for c in range(len(attr_ids))
        if len(attr_ids[c]) > 1 and (needed is None or needed[t, c])
    )
    return 2 * body * (sum(map(len, prompts)) + cont) + 2 * head * (len(prompts) + cont)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--cont-batch", type=int, default=256, help="PyTorch continuation rows per pass")
    parser.add_argument("--templates", default="tp1,tp2")
    parser.add_argument("--bellezza-words", type=int, default=100, help="seeded subset (0: all 399)")
    parser.add_argument("--ws-pairs", type=int, default=40, help="seeded subset of pairs (0: all 353)")
    parser.add_argument("--weat-tests", type=int, default=0, help="the first n WEAT-WS tests (0: all 10)")
    parser.add_argument("--whole-process", action="store_true", help="time both as whole processes (see above)")
    args = parser.parse_args(argv)
    if args.whole_process:
        return whole_processes(args.templates.split(","), args.threads)
    pinned = pin_threads(args.threads)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    import transformers

    from jaxassoc.models.loading import load_model
    from jaxassoc.readouts import rpam
    from jaxassoc.readouts.rpam_prompts import PromptTemplate, encode_prompts, tokenize_attributes
    from jaxassoc.resources import smollm2_gguf

    model = load_model("smollm2-135m")
    torch_model, _, _ = torch_llama_from_gguf(smollm2_gguf())
    pad = model.vocab.pad_id if model.vocab.pad_id is not None else model.vocab.eos_id
    work = workload(args.bellezza_words, args.ws_pairs, args.weat_tests)
    print(f"pinned: {pinned}; transformers {transformers.__version__}, torch {torch.__version__}")
    print(
        f"SmolLM2-135M (GGUF dequantised to float32); batch {args.batch_size}; WEAT-WS tests "
        f"{args.weat_tests or 10}, Bellezza words "
        f"{args.bellezza_words or 399}, WS-353 pairs {args.ws_pairs or 353}"
    )
    rates = {"jax": jax_gflops(), "torch": torch_gflops()}
    for name in args.templates.split(","):
        template = PromptTemplate(name, TEMPLATES[name])

        def run_jax():
            out = []
            for _, tasks, needed in work:
                if len(tasks) > 1:
                    out += rpam.task_probabilities(model, tasks, template, batch_size=args.batch_size)[0]
                else:
                    out.append(
                        rpam.probabilities(model, *tasks[0], template, needed=needed, batch_size=args.batch_size)[0]
                    )
            return out

        start = time.perf_counter()
        run_jax()
        jax_first = time.perf_counter() - start
        start = time.perf_counter()
        jax_p = run_jax()
        jax_s = time.perf_counter() - start

        encoded = [
            (
                encode_prompts(model, [template.fill(x) for x in ts]),
                tokenize_attributes(model.tokenizer, a, template).token_ids,
                needed,
            )
            for _, tasks, needed in work
            for ts, a in tasks
        ]
        torch_probabilities(
            torch_model, encoded[0][0][:4], encoded[0][1], None, args.batch_size, args.cont_batch, pad
        )  # warm-up
        start = time.perf_counter()
        torch_p = [
            torch_probabilities(torch_model, pr, at, nd, args.batch_size, args.cont_batch, pad)
            for pr, at, nd in encoded
        ]
        torch_s = time.perf_counter() - start

        seen = np.concatenate([np.isfinite(b).ravel() for b in torch_p])
        both = np.concatenate([a.ravel() for a in jax_p])[seen], np.concatenate([b.ravel() for b in torch_p])[seen]
        flops = sum(useful_flops(model.config, pr, at, nd) for pr, at, nd in encoded)
        n_cont = sum(
            sum(len(at[c]) > 1 and (nd is None or nd[t, c]) for t in range(len(pr)) for c in range(len(at)))
            for pr, at, nd in encoded
        )
        n_prompts = sum(len(pr) for pr, _, _ in encoded)
        print(
            f"\n{name}: {len(encoded)} RPAM computations, {n_prompts} prompts, {n_cont} needed continuations, "
            f"{flops / 1e9:.1f} GFLOP useful"
        )
        print(
            f"jaxassoc : {jax_s:7.2f} s (first run incl. compilation {jax_first:.2f} s), "
            f"{flops / jax_s / 1e9:6.1f} GFLOP/s = {flops / jax_s / 1e9 / rates['jax']:.0%} of jax matmul"
        )
        print(
            f"PyTorch  : {torch_s:7.2f} s, {flops / torch_s / 1e9:6.1f} GFLOP/s = "
            f"{flops / torch_s / 1e9 / rates['torch']:.0%} of torch matmul"
        )
        print(f"speed ratio PyTorch time / jaxassoc time: {torch_s / jax_s:.2f}")
        print(
            f"p(v, t) on {seen.sum()} entries: max |jax - torch| = {np.abs(both[0] - both[1]).max():.2e}, max relative "
            f"{(np.abs(both[0] - both[1]) / np.maximum(np.abs(both[1]), 1e-12)).max():.2e}"
        )
    print(
        f"\nfp32 1024x1024 matmul rate on {args.threads} thread(s) at start: jax {rates['jax']:.1f} GFLOP/s, "
        f"torch {rates['torch']:.1f} GFLOP/s; at end: jax {jax_gflops():.1f}, torch {torch_gflops():.1f}"
    )


def whole_processes(templates: list[str], threads: int) -> None:
    """Wall time of the jaxassoc sweep and of the loop process per template, same CPUs (see the docstring)."""
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "OPENBLAS_NUM_THREADS": str(threads),
    }
    here, jaxassoc = Path(__file__).parent, Path(sys.executable).parent / "jaxassoc"
    print(f"CPUs {cpus}; both processes pinned to them")
    for name in templates:
        with tempfile.TemporaryDirectory() as out:
            sweep = [
                str(jaxassoc),
                "-m",
                "model=smollm2-135m",
                "metric=rpam",
                "dataset=weat_ws,bellezza,wordsim353",
                f"template={name}",
                "cache_dir=null",
            ]
            commands = {  # the first jaxassoc run fills an empty cache folder; the next reads its xla/
                "jaxassoc, first run": [*sweep, f"hydra.sweep.dir={out}/first"],
                "jaxassoc, next run": [*sweep, f"hydra.sweep.dir={out}/next"],
                "PyTorch loop": [
                    sys.executable,
                    str(here / "rpam_loop_process.py"),
                    "--template",
                    name,
                    "--threads",
                    str(threads),
                ],
            }
            seconds = {}
            for side, command in commands.items():
                start = time.perf_counter()
                done = subprocess.run(
                    command,
                    env={**env, "JAXASSOC_CACHE": f"{out}/cache"},
                    cwd=out,
                    capture_output=True,
                    text=True,
                    preexec_fn=lambda: os.sched_setaffinity(0, cpus),
                )
                seconds[side] = time.perf_counter() - start
                if done.returncode:
                    sys.exit(f"{side} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
                if side == "PyTorch loop":
                    print(done.stdout.strip())
            loop = seconds["PyTorch loop"]
            print(
                f"{name}: whole process: PyTorch loop {loop:.1f} s; jaxassoc first run (compiles) "
                f"{seconds['jaxassoc, first run']:.1f} s, ratio {loop / seconds['jaxassoc, first run']:.2f}; "
                f"next run (compiled functions from <cache>/xla) {seconds['jaxassoc, next run']:.1f} s, ratio "
                f"{loop / seconds['jaxassoc, next run']:.2f}"
            )


if __name__ == "__main__":
    main()
