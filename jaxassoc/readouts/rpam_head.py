"""RPAM as a differentiable function of a causal LM's output head alone (Hodel et al. 2026, §4, App. E).

The body of the model stays fixed, so its hidden states are computed once: :func:`prompt_states` runs the
target prompts (and, for attributes of several tokens, the prompts followed by their subwords) and keeps
the head inputs. :func:`head_rpam_inputs` then recomputes, from any head ``Head(W, b)``,

- ``first_logits[t, c] = h_t · W[first(c)] + b[first(c)]``, the logit of attribute c's first token;
- ``continuation[t, c]``: the mean over c's subwords 2..k of their full-vocabulary probability, each
  read at the position before it (App. E); 1 for single-token attributes,

which are exactly what :func:`jaxassoc.metrics.rpam.rpam_effect_size` takes (normalised RPAM, the
default: the softmax over the attribute set C). Everything is jnp, so ``jax.grad`` reaches ``W`` and ``b``.
:func:`head_state` takes the head out of the model's NNX module with a state filter (the body stays
out of the differentiated state) and :func:`as_head` turns such a state back into ``Head(W, b)``.
Used by ``examples/attribution.py``, ``mitigation.py`` and ``custom_metric.py``; the prompts and tokenisation
are those of ``jaxassoc metric=rpam`` (:mod:`jaxassoc.readouts.rpam_prompts`), so the numbers match the app's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxassoc import data
from jaxassoc.models import Head, LanguageModel, run_batched
from jaxassoc.models.heads import gather_positions, last_positions
from jaxassoc.readouts.rpam import GENDER_ROLE_TESTS
from jaxassoc.readouts.rpam_prompts import PromptTemplate, encode_prompts, tokenize_attributes
from jaxassoc.readouts.sentence_scores import padded

TP1 = PromptTemplate("tp1", "These words are associated: {target} and")  # the paper's TP1 (conf/template/tp1.yaml)


class HeadStates(NamedTuple):
    """Head inputs of one RPAM Test's prompts, for T targets and C attributes (a pytree)."""

    first_hidden: Float[Array, "T D"]  # state at each target prompt's last token
    first_ids: Int[Array, " C"]  # first token of each attribute
    cont_hidden: Float[Array, "M K D"]  # states predicting subwords 2..k of the M multi-token pairs
    cont_ids: Int[Array, "M K"]  # those subwords (padded)
    cont_valid: Bool[Array, "M K"]
    cont_target: Int[Array, " M"]  # row t of each pair
    cont_attribute: Int[Array, " M"]  # column c of each pair


class RpamTestSpec(NamedTuple):
    """A WEAT-WS test as RPAM uses it: target words X, Y and attribute words A, B."""

    id: str
    x: tuple[str, ...]
    y: tuple[str, ...]
    a: tuple[str, ...]
    b: tuple[str, ...]


def weat_ws_tests(*, swap_gender_roles: bool = True) -> dict[str, RpamTestSpec]:
    """WEAT-WS C1-C10 (App. B); C7/C8 with the gender terms as targets unless ``swap_gender_roles=False``."""
    specs = {}
    for test in data.load_weat_suite("weat_ws").tests:
        if swap_gender_roles and test.id in GENDER_ROLE_TESTS:
            test = test.with_roles_swapped()
        specs[test.id] = RpamTestSpec(test.id, test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)
    return specs


def pad_id(model: LanguageModel) -> int:
    """The padding id for batching: the tokenizer's pad, else EOS, else 0 (masked out either way)."""
    return next((int(i) for i in (model.vocab.pad_id, model.vocab.eos_id) if i is not None), 0)


@functools.partial(jax.jit, static_argnames="forward")
def _last_hidden(params, ids, mask, *, forward):
    hidden = forward(params["body"], ids, mask).hidden
    return gather_positions(hidden, last_positions(mask)).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames="forward")
def all_hidden(params, ids, mask, *, forward):
    """The body's hidden states at every position (float32), compiled once per ``forward`` (its config)."""
    return forward(params["body"], ids, mask).hidden.astype(jnp.float32)


def prompt_states(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Sequence[str],
    template: PromptTemplate = TP1,
    *,
    add_bos: bool | None = None,
    batch_size: int = 32,
) -> HeadStates:
    """Run the body once over the prompts of ``targets`` and keep what the head needs (see module doc)."""
    tokens = tokenize_attributes(model.tokenizer, attributes, template)
    prompts = encode_prompts(model, [template.fill(t) for t in targets], add_bos=add_bos)
    common = dict(batch_size=batch_size, pad_id=pad_id(model), max_length=model.max_positions)
    last = functools.partial(_last_hidden, forward=model.forward)
    first_hidden = np.stack(run_batched(last, model.params, prompts, per_token=False, **common))
    pairs = [(t, c) for t in range(len(targets)) for c in tokens.multi_token]
    K = max([len(tokens.token_ids[c]) - 1 for c in tokens.multi_token], default=1)
    D = first_hidden.shape[1]
    cont_hidden = np.zeros((len(pairs), K, D), np.float32)
    cont_ids = np.zeros((len(pairs), K), np.int32)
    cont_valid = np.zeros((len(pairs), K), bool)
    if pairs:
        sequences = [prompts[t] + list(tokens.token_ids[c]) for t, c in pairs]
        states = run_batched(functools.partial(all_hidden, forward=model.forward), model.params, sequences, **common)
        for m, ((t, c), seq, h) in enumerate(zip(pairs, sequences, states)):
            k = len(tokens.token_ids[c])
            # position p predicts token p + 1: subwords 2..k are predicted at len(seq)-k .. len(seq)-2
            cont_hidden[m, : k - 1] = h[len(seq) - k : len(seq) - 1]
            cont_ids[m, : k - 1] = tokens.token_ids[c][1:]
            cont_valid[m, : k - 1] = True
    return HeadStates(
        first_hidden=jnp.asarray(first_hidden),
        first_ids=jnp.asarray(tokens.first_ids),
        cont_hidden=jnp.asarray(cont_hidden),
        cont_ids=jnp.asarray(cont_ids),
        cont_valid=jnp.asarray(cont_valid),
        cont_target=jnp.asarray([t for t, _ in pairs], jnp.int32),
        cont_attribute=jnp.asarray([c for _, c in pairs], jnp.int32),
    )


def head_state(model: LanguageModel) -> nnx.State:
    """The output head's NNX state, split from the model's module by a path filter (``{"head": {"W", "b"}}``):
    the only state the examples differentiate or train."""
    _, state, _ = nnx.split(model.module, nnx.PathContains("head"), ...)
    return state


def as_head(state: nnx.State, softcap: float | None = None) -> Head:
    """``Head(W, b)`` from a head state (:func:`head_state`, its gradient or an update of it); pass the
    model's ``head.softcap`` (Gemma 2's final logit soft-cap, static, not part of the state) to keep it."""
    head = state.to_pure_dict()["head"]
    return Head(W=head["W"], b=head.get("b"), softcap=softcap)


def head_rpam_inputs(head: Head, states: HeadStates) -> tuple[Float[Array, "T C"], Float[Array, "T C"]]:
    """``(first_logits, continuation)`` of the RPAM kernels, recomputed from ``head`` (differentiable)."""
    dtype = jnp.promote_types(head.W.dtype, jnp.float32)  # bf16 heads computed in f32; f64 kept
    W = head.W.astype(dtype)
    b = None if head.b is None else head.b.astype(dtype)
    first_logits = states.first_hidden @ W[states.first_ids].T
    if b is not None:
        first_logits = first_logits + b[states.first_ids]
    first_logits = _soft_cap(first_logits, head.softcap)
    continuation = jnp.ones_like(first_logits)
    if states.cont_ids.shape[0]:
        logits = states.cont_hidden @ W.T
        if b is not None:
            logits = logits + b
        logits = _soft_cap(logits, head.softcap)
        logp = jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), states.cont_ids[..., None], axis=-1)[..., 0]
        valid = states.cont_valid
        mean_p = jnp.sum(jnp.where(valid, jnp.exp(logp), 0.0), axis=-1) / jnp.sum(valid, axis=-1)
        continuation = continuation.at[states.cont_target, states.cont_attribute].set(mean_p)
    return first_logits, continuation


def _soft_cap(logits: Array, softcap: float | None) -> Array:
    """The head's final soft-cap ``c * tanh(logits / c)`` (elementwise, so the needed rows only), as
    :func:`jaxassoc.models.heads.head_logits` applies it."""
    return logits if softcap is None else softcap * jnp.tanh(logits / softcap)


def rpam_test_states(model: LanguageModel, spec: RpamTestSpec, **options) -> HeadStates:
    """:func:`prompt_states` of one RPAM Test: rows X then Y, columns A then B."""
    return prompt_states(model, spec.x + spec.y, spec.a + spec.b, **options)


BIAS_TESTS = {"gender": ("C6", "C7", "C8"), "race": ("C3", "C4", "C5")}
"""The WEAT-WS tests whose RPAM d a fine-tuning bias term drives to 0, per ``intervention.bias_type``."""


def test_arrays(model: LanguageModel, targets: Sequence[str], n_x: int, attributes: Sequence[str],
                template: PromptTemplate = TP1) -> dict[str, np.ndarray]:  # fmt: skip
    """The prompts of ``targets`` (the first ``n_x`` of them X) and ``attributes`` as arrays for
    :func:`bias_parts`: what :func:`prompt_states` keeps, as token positions instead of states."""
    tokens = tokenize_attributes(model.tokenizer, attributes, template)
    prompts = encode_prompts(model, [template.fill(t) for t in targets])
    pad = pad_id(model)
    ids, mask = padded(prompts, pad)
    pairs = [(t, c) for t in range(len(targets)) for c in tokens.multi_token]
    K = max([len(tokens.token_ids[c]) - 1 for c in tokens.multi_token], default=1)
    seqs = [prompts[t] + list(tokens.token_ids[c]) for t, c in pairs] or [[pad]]
    cont_ids, cont_mask = padded(seqs, pad)
    cont_pos, cont_tok = np.zeros((len(pairs), K), np.int32), np.zeros((len(pairs), K), np.int32)
    cont_valid = np.zeros((len(pairs), K), bool)
    for m, ((t, c), seq) in enumerate(zip(pairs, seqs)):
        k = len(tokens.token_ids[c])
        cont_pos[m, : k - 1] = np.arange(len(seq) - k, len(seq) - 1)
        cont_tok[m, : k - 1] = tokens.token_ids[c][1:]
        cont_valid[m, : k - 1] = True
    return {"ids": ids, "mask": mask, "first_ids": tokens.first_ids, "is_x": np.arange(len(targets)) < n_x,
            "cont_ids": cont_ids, "cont_mask": cont_mask, "cont_pos": cont_pos, "cont_tok": cont_tok,
            "cont_valid": cont_valid, "cont_target": np.asarray([t for t, _ in pairs], np.int32),
            "cont_attribute": np.asarray([c for _, c in pairs], np.int32)}  # fmt: skip


def bias_parts(hidden, head: Head, tests, *, n_a: tuple[int, ...], ddof: int = 1):
    """Each test's RPAM d (Eq. 1-2, normalised) from ``hidden(ids, mask)`` (the model's head inputs) and
    ``head``: differentiable in both; X and Y rows told apart by ``is_x`` (so a split of the targets keeps one
    compiled shape per test)."""
    from jaxassoc.metrics.rpam import association_scores, relative_probabilities

    out = []
    for arrays, k in zip(tests, n_a):
        h = hidden(arrays["ids"], arrays["mask"]).astype(jnp.float32)
        first = gather_positions(h, last_positions(arrays["mask"]))
        rows = jnp.arange(arrays["cont_pos"].shape[0])[:, None]
        cont = hidden(arrays["cont_ids"], arrays["cont_mask"]).astype(jnp.float32)[rows, arrays["cont_pos"]]
        states = HeadStates(first, arrays["first_ids"], cont, arrays["cont_tok"], arrays["cont_valid"],
                            arrays["cont_target"], arrays["cont_attribute"])  # fmt: skip
        s = association_scores(relative_probabilities(*head_rpam_inputs(head, states)), n_a=k)
        x = arrays["is_x"]
        mean_x = jnp.sum(jnp.where(x, s, 0.0)) / jnp.sum(x)
        mean_y = jnp.sum(jnp.where(x, 0.0, s)) / jnp.sum(~x)
        out.append((mean_x - mean_y) / jnp.std(s, ddof=ddof))
    return jnp.stack(out)


def bias_term(model: LanguageModel, bias_type: str, seed: int, *, heldout: float, temperature: float | None = None):
    """RPAM as a fine-tuning bias term (``finetune.bias``): the d of each WEAT-WS test of ``bias_type``
    (:data:`BIAS_TESTS`, template TP1) toward 0, each test's X and Y target words split into training and
    held-out targets (the same share of each). d is itself differentiable: the surrogate is the metric
    (``temperature`` unused)."""
    from jaxassoc.errors import InputError
    from jaxassoc.finetune.bias import BiasSetup, BiasTerm, exact_real, exact_surrogate, split_items

    if bias_type not in BIAS_TESTS:
        raise InputError(
            f"RPAM as a fine-tuning bias term: WEAT-WS has tests for {sorted(BIAS_TESTS)}, not bias_type={bias_type!r}"
        )
    specs = weat_ws_tests()
    train, held, n_a = [], [], []
    for i, test_id in enumerate(BIAS_TESTS[bias_type]):
        spec = specs[test_id]
        sides = [split_items(len(words), heldout, seed + 7 * i + side, f"RPAM {test_id} targets")
                 for side, words in enumerate((spec.x, spec.y))]  # fmt: skip
        for out, part in ((train, 0), (held, 1)):
            xs, ys = [spec.x[j] for j in sides[0][part]], [spec.y[j] for j in sides[1][part]]
            if xs or ys:  # heldout=0: no held-out targets
                out.append(test_arrays(model, xs + ys, len(xs), spec.a + spec.b))
        n_a.append(len(spec.a))
    term = BiasTerm("rpam", bias_parts, exact_surrogate, exact_real, target=0.0, units="d",
                    options=(("n_a", tuple(n_a)),))  # fmt: skip
    n_train = sum(int(a["is_x"].size) for a in train)
    n_held = sum(int(a["is_x"].size) for a in held)
    if held and len(held) != len(train):
        raise InputError(f"RPAM's bias term: intervention.heldout={heldout} leaves a test without held-out targets")
    tests = BIAS_TESTS[bias_type]
    return BiasSetup(term, tuple(train), tuple(held), n_train, n_held, tuple(f"rpam {t}" for t in tests),
                     f"RPAM d of WEAT-WS {', '.join(tests)} (TP1), target words split per test")  # fmt: skip
