"""SeT on the embedded SmolLM2-135M: the exact solver vs the optax solver over every SeT problem of the
Cao et al. (2022) suite (docs/methods.md §3, issue #6 "exact-vs-optax agreement over all SeT problems").

Suite (causal adaptation, as ``metric=set``): for each template (default "Most <pgroup> are <mask>.";
``--templates all``: the 33 whose trait ends the prompt), every group of the template's slot plus the prior
noun, every synonym of the 32 trait poles, BOS first (``--no-bos`` drops it); one SeT problem per trait
token: x = the head input (final-norm output) at the position predicting that token after the earlier
trait tokens, gold = the token, head A = W (SmolLM2's untied copy of the embeddings, no bias), γ = 1.

Head inputs come from one teacher-forced pass per (filler, word), batched as in the stereotype pipeline
(``jaxassoc.readouts.stereotypes``) but with the fine length buckets (most prompts have 5-8 tokens).
The exact solver (:func:`~jaxassoc.metrics.set_exact.set_exact`, vmapped) and the optax solver
(:func:`~jaxassoc.metrics.set_optax.set_optax`, augmented Lagrangian + L-BFGS, batched) then solve all
problems in fixed-size blocks (one compilation each). Printed: problem count, max and median relative
difference of ‖ΔA‖_F where the exact ΔA ≠ 0, the largest optax ‖ΔA‖_F where the exact one is 0 (gold
already wins by γ), the optax solution's worst constraint violation over the whole vocabulary
(γ − (z'_gold − max_{i≠gold} z'_i), logit units), and the time of each stage. One CSV row per problem.

``--max-problems N`` scores about N problems from evenly spaced (template, filler, word) prompts, for a
quick check; the default is the whole suite.

Run: ``python experiments/set_cao2022/optax_vs_exact.py [--templates default|all] [--max-problems N]
[--csv PATH]`` (the default suite is 9,776 problems).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd

from jaxassoc.data import load_abc
from jaxassoc.metrics.set_exact import set_exact
from jaxassoc.metrics.set_optax import set_optax
from jaxassoc.models import load_model, model_limits, run_batched
from jaxassoc.models.batching import FINE_BUCKETS
from jaxassoc.readouts.stereotypes import build_problems, default_words, is_causal_template

DEFAULT_TEMPLATE = "Most <pgroup> are <mask>."
REL_TOLERANCE = 1e-3  # issue #6: optax matches exact to a relative 1e-3 on ‖ΔA‖_F


class Suite(NamedTuple):
    """Prompts (prefix + whole trait) and one SeT problem per trait token, in (template, filler, word) order."""

    sequences: list[list[int]]
    prompt_template: list[str]  # per prompt
    prompt_filler: list[str]
    prompt_word: list[str]
    problem_prompt: np.ndarray  # (N,) the prompt each problem reads
    problem_position: np.ndarray  # (N,) the position whose head input predicts the token
    problem_subword: np.ndarray  # (N,) the token's index within the trait
    gold: np.ndarray  # (N,) the token id


def templates_for(option: str) -> list[str]:
    """``default``: the metric's default template; ``all``: every ABC template whose trait ends the prompt."""
    if option == "default":
        return [DEFAULT_TEMPLATE]
    return [t for t in load_abc().all_templates if is_causal_template(t)]


def suite_problems(model, templates: list[str], *, bos: bool = True, max_problems: int | None = None) -> Suite:
    """Every (template, group or prior noun, trait word) prompt and its per-token SeT problems; with
    ``max_problems``, evenly spaced prompts holding about that many problems."""
    abc = load_abc()
    words = default_words(abc)
    sequences, starts, lengths, tpl, fil, wrd = [], [], [], [], [], []
    for template in templates:
        problems = build_problems(
            model.tokenizer,
            abc,
            template,
            abc.groups[abc.slot_of(template)],
            words,
            bos_id=model.vocab.bos_id if bos else None,
        )
        sequences += problems.sequences
        starts += problems.trait_starts
        lengths += [len(t) for t in problems.trait_tokens]
        tpl += [template] * len(problems.sequences)
        fil += [f for f in problems.fillers for _ in words]
        wrd += list(words) * len(problems.fillers)
    keep = np.arange(len(sequences))
    if max_problems is not None and max_problems < sum(lengths):
        k = max(1, math.ceil(len(sequences) * max_problems / sum(lengths)))
        keep = np.unique(np.linspace(0, len(sequences) - 1, k).round().astype(int))
    sequences = [sequences[i] for i in keep]
    starts, lengths = np.asarray(starts)[keep], np.asarray(lengths)[keep]
    prompt = np.repeat(np.arange(len(keep)), lengths)
    subword = np.concatenate([np.arange(n) for n in lengths])
    position = starts[prompt] - 1 + subword
    gold = np.array([sequences[p][q + 1] for p, q in zip(prompt, position)], np.int32)
    return Suite(
        sequences,
        [tpl[i] for i in keep],
        [fil[i] for i in keep],
        [wrd[i] for i in keep],
        prompt,
        position,
        subword,
        gold,
    )


def head_inputs(model, suite: Suite, *, batch_size: int = 64, prompts_per_call: int = 8192) -> np.ndarray:
    """x (N, D): the final-norm hidden state at each problem's position, one teacher-forced pass per prompt."""
    forward = jax.jit(lambda params, ids, mask: model.forward(params["body"], ids, mask).hidden)
    limits = model_limits(model)
    x = np.zeros((len(suite.gold), model.head.W.shape[1]), np.float32)
    for start in range(0, len(suite.sequences), prompts_per_call):
        hidden = run_batched(
            forward,
            model.params,
            suite.sequences[start : start + prompts_per_call],
            batch_size=batch_size,
            buckets=FINE_BUCKETS,
            **limits,
        )
        rows = np.flatnonzero((suite.problem_prompt >= start) & (suite.problem_prompt < start + prompts_per_call))
        for n in rows:
            x[n] = hidden[suite.problem_prompt[n] - start][suite.problem_position[n]]
    return x


def _padded_blocks(n: int, block: int):
    """Index arrays of ``block`` entries covering 0..n-1 (the last one padded by repeating its first)."""
    for start in range(0, n, block):
        part = np.arange(start, min(start + block, n))
        yield part, np.concatenate([part, np.repeat(part[:1], block - len(part))])


def solve_exact(W, b, x: np.ndarray, gold: np.ndarray, *, block: int = 2048, chunk: int = 64):
    """Exact SeT of all problems, ``block`` at a time: (‖ΔA‖_F, pool size)."""
    distance, pool = np.zeros(len(x), np.float32), np.zeros(len(x), np.int32)
    for part, padded in _padded_blocks(len(x), min(block, len(x))):
        res = set_exact(W, b, x[padded], gold[padded], chunk=chunk)
        distance[part], pool[part] = np.asarray(res.distance)[: len(part)], np.asarray(res.pool_size)[: len(part)]
    return distance, pool


def solve_optax(W, b, x: np.ndarray, gold: np.ndarray, *, block: int = 1024):
    """Optax SeT of all problems as single-context problems: (‖ΔA‖_F, max violation, working set verified)."""
    res = set_optax(W, b, x[:, None], gold[:, None], block=min(block, len(x)))
    return np.asarray(res.distance), np.asarray(res.max_violation), np.asarray(res.working_set_ok)


def timed(fn):
    """(fn(), seconds)."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def agreement(exact: np.ndarray, optax: np.ndarray, violation: np.ndarray) -> dict:
    """Relative differences where the exact ΔA ≠ 0, optax's ‖ΔA‖_F where it is 0, worst violation."""
    moved = exact > 0
    rel = np.abs(optax[moved] / exact[moved] - 1)
    return {
        "problems": len(exact),
        "already_satisfied": int((~moved).sum()),
        "max_rel_diff": float(rel.max(initial=0.0)),
        "median_rel_diff": float(np.median(rel)) if rel.size else 0.0,
        "beyond_tolerance": int((rel > REL_TOLERANCE).sum()),
        "worst": int(np.flatnonzero(moved)[np.argmax(rel)]) if rel.size else None,
        "max_optax_where_exact_0": float(np.abs(optax[~moved]).max(initial=0.0)),
        "max_violation": float(violation.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", choices=("default", "all"), default="default")
    parser.add_argument("--no-bos", dest="bos", action="store_false", help="no BOS token before the prompt")
    parser.add_argument("--max-problems", type=int, default=None, help="about N problems from evenly spaced prompts")
    parser.add_argument("--batch-size", type=int, default=64, help="prompts per forward pass")
    parser.add_argument("--exact-block", type=int, default=2048, help="exact solver: problems per compiled call")
    parser.add_argument("--optax-block", type=int, default=1024, help="optax solver: problems per compiled call")
    parser.add_argument("--csv", type=Path, default=Path("outputs/set_cao2022/optax_vs_exact.csv"))
    args = parser.parse_args()

    (model, t_load) = timed(lambda: load_model("smollm2-135m"))
    templates = templates_for(args.templates)
    suite = suite_problems(model, templates, bos=args.bos, max_problems=args.max_problems)
    W, b = model.head.W, model.head.b
    print(
        f"model: {model.name} (loaded in {t_load:.1f} s), head V={W.shape[0]}, D={W.shape[1]}, "
        f"{'no bias' if b is None else 'with bias'}; jax {jax.__version__} on {jax.devices()[0].platform}, "
        f"bos={args.bos}"
    )
    scope = "" if args.max_problems is None else f" (--max-problems {args.max_problems}: evenly spaced prompts)"
    print(f"suite: {len(templates)} template(s), {len(suite.sequences)} prompts, {len(suite.gold)} SeT problems{scope}")

    x, t_forward = timed(lambda: head_inputs(model, suite, batch_size=args.batch_size))
    (d_exact, pool), t_exact = timed(lambda: solve_exact(W, b, x, suite.gold, block=args.exact_block))
    (d_optax, violation, ws_ok), t_optax = timed(lambda: solve_optax(W, b, x, suite.gold, block=args.optax_block))

    stats = agreement(d_exact, d_optax, violation)
    print(f"problems: {stats['problems']}; already satisfied (exact ΔA = 0): {stats['already_satisfied']}")
    print(
        f"optax vs exact ‖ΔA‖_F where exact > 0: max rel. diff {stats['max_rel_diff']:.2e}, "
        f"median {stats['median_rel_diff']:.2e}; max optax ‖ΔA‖_F where exact = 0: "
        f"{stats['max_optax_where_exact_0']:.1e}"
    )
    if stats["worst"] is not None:
        w, p = stats["worst"], suite.problem_prompt[stats["worst"]]
        print(
            f"problems beyond rel. {REL_TOLERANCE:g}: {stats['beyond_tolerance']}; worst: problem {w} "
            f"({suite.prompt_filler[p]!r}, {suite.prompt_word[p]!r}, subword {suite.problem_subword[w]}): "
            f"exact {d_exact[w]:.5f}, optax {d_optax[w]:.5f}, optax violation {violation[w]:.2e}"
        )
    print(
        f"optax constraints (γ = 1, whole vocabulary): max violation γ − (z'_gold − max other z') = "
        f"{stats['max_violation']:.2e} logits; working sets verified: {bool(ws_ok.all())}"
    )
    print(
        f"exact ‖ΔA‖_F: median {np.median(d_exact):.4f}, max {d_exact.max():.4f}; pool size mean "
        f"{pool.mean():.1f}, max {pool.max()}"
    )
    print(
        f"time (compilation included): forward passes {t_forward:.1f} s, exact {t_exact:.1f} s, optax {t_optax:.1f} s"
    )

    tokens = model.tokenizer.convert_ids_to_tokens(suite.gold.tolist())
    p = suite.problem_prompt
    table = pd.DataFrame(
        {
            "template": np.asarray(suite.prompt_template)[p],
            "filler": np.asarray(suite.prompt_filler)[p],
            "word": np.asarray(suite.prompt_word)[p],
            "subword": suite.problem_subword,
            "token_id": suite.gold,
            "token": tokens,
            "exact_distance": d_exact,
            "exact_pool_size": pool,
            "optax_distance": d_optax,
            "optax_max_violation": violation,
            "optax_working_set_ok": ws_ok,
        }
    )
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.csv, index=False)
    print(f"wrote {args.csv} ({len(table)} rows)")


if __name__ == "__main__":
    main()
