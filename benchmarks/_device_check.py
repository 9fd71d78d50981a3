"""The Python parts of ``benchmarks/device_check.sh``: jaxassoc on this machine's accelerator (or its CPU).

``env``         JAX's version, backend and devices, and whether this is the quick (CPU) size.
``parity``      A tiny random checkpoint per family, written by transformers as the tests write them
                (``tests/family_specs``: the same specs as the ``tiny_checkpoint`` fixture), loaded by
                ``jaxassoc.models.load_model`` onto JAX's default device; its logits on a right-padded batch
                against transformers' (PyTorch, CPU, float32) at every real position, with JAX's matmul
                precision at the device's default (TF32 on recent NVIDIA GPUs, bfloat16 passes on TPUs).
                Twice: ``precision="float32"`` (its products at HIGHEST whatever the default: must match
                within the spec's tolerance) and ``precision="mixed"`` (within the bf16 bound of
                ``tests/test_models_precision.py``: layers x 3·√10·2⁻⁹ x max |logit|).
``audit-parts`` The Hydra override ``audit.parts=[...]`` of the default audit's RPAM and UnStereoEval parts
                (``conf/audit/default.yaml``), Bellezza and USE-5 subsampled with ``--quick``.
``audit``       Reads the audit folder ``device_check.sh`` wrote: each part's device (from its results.json
                provenance), seconds and whether its aggregates hold finite numbers.
``throughput``  SmolLM2-135M sentence log-likelihoods (UnStereoEval's scoring path, ``score_sentences``) on
                USE-5 sentences, per precision policy (``--precisions``, default float32, mixed, bfloat16):
                sentences/s, tokens/s and useful FLOP/s against the rate an n x n matmul reaches on the same
                device in the same run with that policy's products (the ceiling: f32 x f32 at HIGHEST for
                float32, bf16 x bf16 -> f32 for mixed and bfloat16); and each policy's deviation from
                float32: max and mean |Δ| of the sentence log-likelihoods, and the share of UnStereoEval
                pairs (male / female sentence of a template) whose decision (male, neutral, female) changes.

Each prints what it found and exits non-zero when a check fails. Run through ``device_check.sh``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # jaxassoc from this checkout; tests/family_specs


def accelerator() -> bool:
    import jax

    return jax.default_backend() != "cpu"


def cmd_env(args) -> int:
    import jax

    devices = jax.devices()
    print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else '?'}")
    print(
        f"backend: {jax.default_backend()}; {len(devices)} device(s): {devices[0].device_kind} ({devices[0].platform})"
    )
    for d in devices[:8]:
        print(f"  {d}")
    if not accelerator():
        print("no GPU or TPU found by JAX: running on the CPU, at the quick sizes (slow; see README, 'GPU and TPU')")
    return 0


def cmd_parity(args) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    try:
        import torch
        import transformers
    except ImportError as e:
        print(
            f"parity: needs PyTorch and transformers as the reference ({e}); pip install torch (a CPU build is enough)"
        )
        return 1
    from family_specs import tiny, write

    from jaxassoc.models import load_model
    from jaxassoc.models.heads import head_logits

    transformers.utils.logging.disable_progress_bar()
    failed = 0
    device = jax.devices()[0]
    for family in args.families.split(","):
        spec = tiny(family)
        with tempfile.TemporaryDirectory() as tmp:
            folder = write(spec, Path(tmp) / family)
            reference = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
            models = {precision: load_model(folder, precision=precision) for precision in ("float32", "mixed")}
            placed = {d for m in models.values() for leaf in jax.tree.leaves(m.params) for d in leaf.devices()}
            vocab = reference.config.vocab_size
            rng = np.random.default_rng(0)
            ids = rng.integers(3, vocab, size=(4, 24)).astype(np.int32)
            mask = np.ones_like(ids)
            mask[1, 17:] = 0  # right padding in two rows
            mask[3, 9:] = 0
            with torch.no_grad():
                theirs = reference(input_ids=torch.from_numpy(ids).long(), attention_mask=torch.from_numpy(mask).long())
            theirs = theirs.logits.float().numpy()
            real = mask.astype(bool)
            scale = float(np.abs(theirs[real]).max())
            depth = reference.config.num_hidden_layers + 1  # the blocks and the head
            deltas = {}
            for precision, model in models.items():

                def logits(params, ids, mask, model=model):
                    return head_logits(params["head"], model.forward(params["body"], ids, mask).hidden)

                # the device's default matmul precision (TF32 on NVIDIA GPUs, bfloat16 passes on TPUs): the
                # policy's own product precision must hold whatever it is
                with jax.default_matmul_precision("default"):
                    ours = jax.jit(logits)(model.params, jnp.asarray(ids), jnp.asarray(mask))
                deltas[precision] = float(np.abs(np.asarray(ours, np.float32)[real] - theirs[real]).max())
        mixed_bound = depth * 3 * math.sqrt(10) * 2.0**-9 * scale  # tests/test_models_precision.py: bf16_chain
        ok_float32 = deltas["float32"] <= spec.atol
        ok_mixed = deltas["mixed"] <= mixed_bound
        failed += not (ok_float32 and ok_mixed)
        where = ", ".join(sorted(str(d) for d in placed))
        print(
            f"parity {family:6s} on {where}: max |Δ logits| {deltas['float32']:.1e} in float32 "
            f"({'ok' if ok_float32 else 'FAIL'}: <= {spec.atol:g}), {deltas['mixed']:.1e} in mixed "
            f"({'ok' if ok_mixed else 'FAIL'}: <= {mixed_bound:.1e}, {depth} layers x 3·√10·2⁻⁹ x max |logit| "
            f"{scale:.2f}); {int(real.sum())} positions, vocabulary {vocab}"
        )
        if device not in placed:
            print(f"parity {family}: FAIL, the parameters are not on JAX's default device {device}")
            failed += 1
    return 1 if failed else 0


def cmd_audit(args) -> int:
    import numpy as np
    import pandas as pd

    folder = Path(args.folder)
    failed = 0
    parts = sorted(p.parent for p in folder.glob("*/results.json"))
    if not parts:
        print(f"audit: no part finished in {folder}")
        return 1
    for part in parts:
        record = json.loads((part / "results.json").read_text())
        aggregates = pd.read_parquet(part / "aggregates.parquet")
        numbers = aggregates.select_dtypes("number").to_numpy(dtype=float)
        finite = numbers.size > 0 and bool(np.isfinite(numbers).any())
        failed += not finite
        print(
            f"audit {part.name:14s} device {record['provenance'].get('device')}, "
            f"{record.get('summary', {}).get('seconds', float('nan')):.1f} s, {len(aggregates)} aggregate rows"
            f"{'' if finite else ': FAIL, no finite number'}"
        )
    return 1 if failed else 0


def cmd_audit_parts(args) -> int:
    """Print the Hydra override that runs the default audit's RPAM and UnStereoEval parts (as
    ``conf/audit/default.yaml`` defines them); ``--quick``: Bellezza and USE-5 subsampled to 60 items."""
    import yaml

    parts = yaml.safe_load((ROOT / "conf" / "audit" / "default.yaml").read_text())["parts"]
    chosen = []
    for part in parts:
        overrides = list(part["overrides"])
        if not any(o in ("metric=rpam", "metric=unstereo") for o in overrides):
            continue
        if args.quick and any(o in ("dataset=bellezza", "dataset=use5") for o in overrides):
            overrides = [o for o in overrides if not o.startswith("dataset.sample=")] + ["dataset.sample=60"]
        chosen.append("{name:%s,overrides:[%s]}" % (part["name"], ",".join(f"'{o}'" for o in overrides)))
    print(f"audit.parts=[{','.join(chosen)}]")
    return 0


def matmul_rate(n: int, precision: str, repeats: int) -> float:
    """FLOP/s of an n x n matmul on JAX's default device (best of ``repeats``) as ``precision``'s products run
    (``jaxassoc.models.precision.matmul``): float32 x float32 at ``HIGHEST`` for ``float32``; bf16 x bf16 -> f32
    (``preferred_element_type``) for ``mixed`` and ``bfloat16``; f16 x f16 -> f32 for ``float16``."""
    import jax
    import jax.numpy as jnp

    from jaxassoc.models.precision import policy

    dtype = jnp.dtype(policy(precision).params)
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
    highest = jax.lax.Precision.HIGHEST if dtype == jnp.float32 else None  # precision.matmul's product, no casts
    f = jax.jit(lambda x: jnp.matmul(x, x, precision=highest, preferred_element_type=jnp.float32))
    f(a).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        f(a).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def sentence_flops(config, lengths) -> float:
    """Forward matmul FLOPs of causal sequences of these lengths: weights per token, the head at every
    token, and causal attention (the same count as ``bench_unstereo_scoring.py``)."""
    d, ff, layers, vocab = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    per_token = 2 * (layers * (2 * d * q + 2 * d * kv + 3 * d * ff) + vocab * d)
    return sum(t * per_token + 4 * layers * q * t * (t + 1) / 2 for t in lengths)


def use5_pairs(n_sentences: int) -> tuple[list[str], list[tuple[int, int]]]:
    """The first USE-5 templates' distinct filled sentences, up to ``n_sentences``, and the (male, female)
    indices into them of every template whose two sentences are both in."""
    from jaxassoc.data import unstereo

    frame = unstereo.load_dataset("USE-5")
    male, female = unstereo.fill_templates(frame["template"].tolist())
    index: dict[str, int] = {}
    pairs = []
    for m, f in zip(male, female, strict=True):
        for s in (m, f):
            if s not in index and len(index) < n_sentences:
                index[s] = len(index)
        if m in index and f in index:
            pairs.append((index[m], index[f]))
    return list(index), pairs


def cmd_throughput(args) -> int:
    """Per precision policy: the throughput of ``score_sentences`` against the matmul ceiling of its products,
    and how far its sentence log-likelihoods and UnStereoEval's per-pair decisions move from ``float32``'s."""
    import jax
    import numpy as np

    from jaxassoc.metrics.unstereo import LOG10_THRESHOLD
    from jaxassoc.models import load_model
    from jaxassoc.models.precision import policy
    from jaxassoc.readouts.unstereo import score_sentences, sentence_token_ids

    sentences, pairs = use5_pairs(args.sentences)
    male, female = (np.array([p[i] for p in pairs]) for i in (0, 1))

    def decisions(scores: np.ndarray) -> np.ndarray:
        """UnStereoEval's per-pair decision: -1 male preferred, 0 neutral (|FM| <= ln 1.65), +1 female."""
        fm = scores[female] - scores[male]
        return np.where(np.abs(fm) / math.log(10) <= LOG10_THRESHOLD, 0, np.sign(fm)).astype(int)

    n = args.matmul_n
    reference = None
    for precision in args.precisions.split(","):
        model = load_model("smollm2-135m", precision=precision)
        lengths = [len(s) for s in sentence_token_ids(model, sentences)]
        start = time.perf_counter()
        scores = score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch)  # compiles
        first = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            score_sentences(model, sentences, tokens_per_batch=args.tokens_per_batch)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        flops = sentence_flops(model.config, lengths)
        ceiling = matmul_rate(n, precision, repeats=5)
        weights = policy(precision).params
        products = "f32 x f32 at HIGHEST" if weights == "float32" else f"{weights} x {weights} -> f32"
        print(
            f"throughput {precision}: {len(sentences)} sentences, {sum(lengths)} tokens, {args.tokens_per_batch} "
            f"tokens per packed batch: median {seconds:.3f} s of {args.repeats} (first run with compilation "
            f"{first:.1f} s) = {len(sentences) / seconds:,.0f} sentences/s, {sum(lengths) / seconds:,.0f} tokens/s, "
            f"{flops / seconds / 1e12:.3f} TFLOP/s useful = {100 * flops / seconds / ceiling:.1f}% of the "
            f"{ceiling / 1e12:.2f} TFLOP/s a {n}x{n} matmul reaches on this device ({products})"
        )
        if precision == "float32":
            reference = scores
        elif reference is not None:
            delta = np.abs(scores - reference)
            per_token = delta / np.array(lengths)
            moved = decisions(scores) != decisions(reference)
            fm = reference[female] - reference[male]
            fm_flip = np.sign(scores[female] - scores[male]) != np.sign(fm)
            print(
                f"deviation {precision} vs float32: sentence log-likelihood max |Δ| {delta.max():.3g} nats, mean "
                f"{delta.mean():.3g} (per token: max {per_token.max():.2g}, mean {per_token.mean():.2g}; |log P| "
                f"up to {np.abs(reference).max():.0f}); UnStereoEval decisions (male / neutral / female) changed "
                f"in {moved.sum()} of {len(pairs)} pairs ({100 * moved.mean():.1f}%), sign of FM flipped in "
                f"{fm_flip.sum()} ({100 * fm_flip.mean():.1f}%)"
            )
        del model
        jax.clear_caches()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env")
    parity = sub.add_parser("parity")
    parity.add_argument("--families", default="llama,gpt2", help="keys of tests/family_specs.TINY (causal ones)")
    audit = sub.add_parser("audit")
    audit.add_argument("folder")
    audit_parts = sub.add_parser("audit-parts")
    audit_parts.add_argument("--quick", action="store_true")
    throughput = sub.add_parser("throughput")
    throughput.add_argument("--sentences", type=int, default=4096)
    throughput.add_argument("--tokens-per-batch", type=int, default=16384)
    throughput.add_argument("--repeats", type=int, default=3)
    throughput.add_argument("--precisions", default="float32,mixed,bfloat16", help="model.precision policies")
    throughput.add_argument("--matmul-n", type=int, default=8192)
    args = parser.parse_args()
    commands = {"env": cmd_env, "parity": cmd_parity, "audit": cmd_audit, "audit-parts": cmd_audit_parts}
    return {**commands, "throughput": cmd_throughput}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
