"""SeT / ILPS over the ABC templates on SmolLM2-135M: seconds per template against the FLOP bound.

Runs the causal scoring of the stereotypes job (:func:`jaxassoc.suites.stereotypes.score_causal`,
the 25 human-rated groups of the template's slot plus the prior noun, every trait synonym, BOS on, no
cache) on the first ``--templates`` causal templates (``--groups N``: the first N groups only), and counts the work it needs: the body's matmuls on
every real (unpadded) prompt token (2 × the layers' weights per token, plus the attention scores and
values, 4 × L × d_model per token and layer for a prompt of L tokens) and the head's logits once at each
trait token (ILPS, ILPS* and SeT read the same logits). The FLOP bound is those FLOPs
over the fp32 matmul rate JAX reaches in the same process on the same pinned CPUs
(``_matmul_rate.jax_gflops``); the ratio is time / bound. The first template includes compilation; the
line for all 33 templates extrapolates the others' seconds per FLOP (steady state) to every template and
all the job's groups.

Run: ``python benchmarks/bench_set_templates.py [--threads 2] [--templates 3] [--groups N]``.
"""

from __future__ import annotations

import argparse
import time

from _matmul_rate import pin_threads


def template_flops(model, abc, template: str, groups: list[str], bos: bool = True) -> float:
    """Forward FLOPs the causal scoring of one template needs (see the module docstring)."""
    import jax
    import numpy as np

    from jaxassoc.readouts.stereotypes import build_problems, default_words

    problems = build_problems(
        model.tokenizer, abc, template, groups, default_words(abc), bos_id=model.vocab.bos_id if bos else None
    )
    layers = model.params["body"]["layers"]
    weights = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(layers) if leaf.ndim == 3)
    n_layers, d = layers["attn"]["q"]["w"].shape[:2]
    lengths = np.array([len(s) for s in problems.sequences])
    body = 2 * weights * lengths.sum() + 4 * n_layers * d * (lengths**2).sum()
    V, D = model.head.W.shape
    head = 2 * V * D * sum(len(t) for t in problems.trait_tokens)
    return float(body + head)


def job_groups(abc, template: str) -> list[str]:
    """The human-rated groups the stereotypes job scores in ``template``'s slot."""
    slot = abc.slot_of(template)
    to_slot = dict(zip(abc.groups["<sgroup>"], abc.groups[slot]))
    return [to_slot[s] for s in dict.fromkeys(abc.human_groups.values()) if s in to_slot]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--templates", type=int, default=3)
    parser.add_argument("--groups", type=int, default=None, help="score only the first N groups (+ the prior)")
    args = parser.parse_args()
    print(pin_threads(args.threads))
    from _matmul_rate import jax_gflops

    from jaxassoc import data
    from jaxassoc.app.tasks.stereotypes import usable_templates
    from jaxassoc.models import load_model
    from jaxassoc.suites.stereotypes import score_causal

    rate = jax_gflops()
    print(f"jax fp32 1024x1024 matmul: {rate:.1f} GFLOP/s")
    model = load_model("smollm2-135m")
    abc = data.load_abc()
    templates = usable_templates(abc, "causal")
    groups = {t: job_groups(abc, t)[: args.groups] for t in templates}
    flops = {t: template_flops(model, abc, t, groups[t]) for t in templates}
    times = []
    for template in templates[: args.templates]:
        start, cpu = time.perf_counter(), time.process_time()
        score_causal(model, abc, template, groups=groups[template])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        times.append(seconds)
        bound = flops[template] / 1e9 / rate
        print(
            f"{template!r}: {seconds:.1f} s (CPU {cpu:.1f} s), {flops[template] / 1e12:.2f} TFLOP, "
            f"{flops[template] / 1e9 / seconds:.1f} GFLOP/s, bound {bound:.1f} s, ratio {seconds / bound:.2f}"
        )
    later = times[1:] or times
    per_flop = sum(later) / sum(flops[t] for t in templates[1 : len(times)] or templates[:1])
    total = sum(template_flops(model, abc, t, job_groups(abc, t)) for t in templates)  # the job's groups
    print(
        f"all {len(templates)} templates, all groups: {total / 1e12:.1f} TFLOP, bound {total / 1e9 / rate:.0f} s, "
        f"extrapolated {total * per_flop:.0f} s, ratio {per_flop * rate * 1e9:.2f}"
    )


if __name__ == "__main__":
    main()
