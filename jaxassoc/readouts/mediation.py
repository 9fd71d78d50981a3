"""The model side of causal mediation analysis (Vig et al. 2020; docs/methods.md §10): the template
sentences as token ids, and the pronoun log-odds of every run the effects need.

An example is a template filled with a profession (``u``, "The nurse said that") and with the
anti-stereotypical gender word (the *set-gender* intervention, "The man said that"). Its score is the
log-odds ``lo = z_anti − z_stereo`` of the next token (``y = p(anti)/p(stereo) = exp(lo)``: the softmax's
normaliser cancels, so only two rows of the head are computed). Runs, each on a batch of examples of one
length, all in one jitted function:

- the plain runs on ``u`` and on set-gender(u), reading every layer's ``attn.heads`` (and ``mlp.hidden``);
- per head (every head of every layer): ``u`` with that head's output replaced by its set-gender value (the
  indirect effect's run), and set-gender(u) with it replaced by its value on ``u`` (the direct effect's);
  the heads are patched at every position, a layer's heads vmapped, each run resumed at the head's layer
  from the plain run's residual stream (the layers before it are the plain run's: not recomputed);
- per selected neuron (``mlp.hidden`` at the profession's position only, as the authors intervene): the same
  two runs; neurons are selected per layer by their attribution-patching estimate (one backward pass for
  every neuron, :func:`neuron_estimates`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.data.mediation import Profession
from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput, Head, LanguageModel
from jaxassoc.models.heads import token_logits
from jaxassoc.models.interventions import layer_count, run_parts, site_shapes
from jaxassoc.models.sites import Add, Replace
from jaxassoc.readouts.sentence_scores import start_token

SET_GENDER = {"female": "man", "male": "woman"}
"""The set-gender word of a profession by its stereotype: the anti-stereotypical gender's."""
PRONOUNS = {"female": ("he", "she"), "male": ("she", "he")}
"""(anti-stereotypical, stereotypical) pronoun by the profession's stereotype."""
HEADS, NEURONS, RESID = "layers.*.attn.heads", "layers.*.mlp.hidden", "layers.*.resid_pre"


def _next_token(model: LanguageModel, text: str, word: str) -> int:
    """The one token ``" " + word`` adds after ``text``; ModelError when the tokenizer splits it."""
    before = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    after = model.tokenizer(f"{text} {word}", add_special_tokens=False)["input_ids"]
    if len(after) != len(before) + 1 or after[: len(before)] != before:
        raise ModelError(
            f"causal mediation needs {word!r} to be one token after a sentence; {model.name!r}'s tokenizer "
            f"gives {len(after) - len(before)} new tokens for {text + ' ' + word!r}"
        )
    return int(after[-1])


def examples(model: LanguageModel, professions: Sequence[Profession], templates: Sequence[str]) -> pd.DataFrame:
    """One row per (template, profession with a stereotype): ``template``, ``profession``, ``stereotype``,
    ``set_gender``, token ids ``base`` and ``alt`` (after the start token), the profession's ``position``,
    ``anti`` and ``stereo`` pronoun ids, and ``kept``: False (with ``dropped``, why) when the profession
    and its set-gender word do not differ by exactly one token (the authors drop those too)."""
    start = start_token(model, eos_fallback=True, what="metric=mediation")
    pronouns = {g: tuple(_next_token(model, "The man said that", w) for w in PRONOUNS[g]) for g in PRONOUNS}
    rows = []
    for template in templates:
        for p in professions:
            if p.stereotype is None:
                continue
            base, alt = (
                [start, *model.tokenizer(template.format(w), add_special_tokens=False)["input_ids"]]
                for w in (p.word, SET_GENDER[p.stereotype])
            )
            differ = [i for i, (a, b) in enumerate(zip(base, alt)) if a != b]
            kept = len(base) == len(alt) and len(differ) == 1
            rows.append(
                {
                    "template": template,
                    "profession": p.word,
                    "stereotype": p.stereotype,
                    "set_gender": SET_GENDER[p.stereotype],
                    "base": base,
                    "alt": alt,
                    "position": differ[0] if kept else -1,
                    "anti": pronouns[p.stereotype][0],
                    "stereo": pronouns[p.stereotype][1],
                    "kept": kept,
                    "dropped": "" if kept else "the profession is not one token where its set-gender word is",
                }
            )
    return pd.DataFrame(rows)


def pronoun_logodds(head: Head, out: ForwardOutput, *, tokens: Int[Array, "B 2"]) -> Float[Array, " B"]:
    """``lo = z_anti − z_stereo`` at the last position (``tokens``: each row's anti, stereo pronoun ids)."""
    logits = token_logits(head, out.hidden[:, -1], tokens).astype(jnp.float32)  # bfloat16 policy: f32 from here
    return logits[:, 0] - logits[:, 1]


def _per_layer(port, config, body, ids, mask, logodds, values, resid, kind, units, where_of, n_units):
    """Log-odds ``(L, k, B)`` of ``ids`` with each of ``k`` units per layer (``units``: ``(L, k)`` indices)
    set to ``values`` (a ``layers.*`` read of the other sentence), one unit per pass, vmapped over a layer's
    units; each pass resumes at the unit's layer from ``resid`` (``layers.*.resid_pre`` of ``ids``), so the
    layers before it are not recomputed (``lax.map`` over layers keeps the layer index unbatched)."""
    L = values.shape[0]

    def layer_runs(xs):
        layer, chosen = xs

        def one(unit):
            where = where_of((jnp.arange(L)[:, None] == layer) & (jnp.arange(n_units)[None, :] == unit))
            edits = {kind: Replace(values, where)}
            out = run_parts(port, body, ids, mask, config=config, edits=edits, start=(layer, resid[layer]))
            return logodds(out)

        return jax.vmap(one)(chosen)

    return jax.lax.map(layer_runs, (jnp.arange(L), units))


@functools.partial(jax.jit, static_argnames=("port", "config", "neurons"))
def _head_runs(port, config, params, base, alt, position, tokens, n, *, neurons: bool):
    """Plain, set-gender and per-head patched log-odds of one batch, and the neurons' attribution estimates
    summed over its ``n`` real rows."""
    body, head = params["body"], params["head"]
    mask = jnp.ones_like(base)
    reads = (HEADS, RESID, NEURONS) if neurons else (HEADS, RESID)
    logodds = functools.partial(pronoun_logodds, head, tokens=tokens)

    def plain(ids):
        out = run_parts(port, body, ids, mask, config=config, read=reads)
        return logodds(out), out.sites

    lo_base, at_base = plain(base)
    lo_alt, at_alt = plain(alt)
    L, H = at_base[HEADS].shape[0], at_base[HEADS].shape[3]
    heads = jnp.broadcast_to(jnp.arange(H), (L, H))
    where = lambda m: m[:, None, None, :, None]  # noqa: E731  (L, H) -> the heads site
    indirect = _per_layer(
        port, config, body, base, mask, logodds, at_alt[HEADS], at_base[RESID], HEADS, heads, where, H
    )
    direct = _per_layer(port, config, body, alt, mask, logodds, at_base[HEADS], at_alt[RESID], HEADS, heads, where, H)
    B = base.shape[0]
    out = {
        "lo_base": lo_base,
        "lo_alt": lo_alt,
        "head_indirect": indirect.reshape(L * H, B).T,
        "head_direct": direct.reshape(L * H, B).T,
    }
    if neurons:
        real = jnp.arange(B) < n
        estimate = _neuron_estimate(
            port, config, body, lambda o: jnp.where(real, logodds(o), 0.0), base, mask, position, at_base, at_alt
        )
        out["neuron_estimate"] = estimate
    return out


def _at_position(position: Int[Array, " B"], T: int) -> Bool[Array, "B T"]:
    return jnp.arange(T)[None, :] == position[:, None]


def _neuron_estimate(port, config, body, logodds, base, mask, position, at_base, at_alt):
    """Attribution patching of every neuron at the profession's position: ``Σ_b (a_alt − a_base) ∂lo/∂a``,
    ``(L, F)``, one backward pass."""

    def score(delta):
        return logodds(run_parts(port, body, base, mask, config=config, edits={NEURONS: Add(delta)})).sum()

    grad = jax.grad(score)(jnp.zeros_like(at_base[NEURONS]))
    at = _at_position(position, base.shape[1])[None, :, :, None]
    return jnp.where(at, (at_alt[NEURONS] - at_base[NEURONS]) * grad, 0.0).sum(axis=(1, 2))


@functools.partial(jax.jit, static_argnames=("port", "config"))
def _neuron_runs(port, config, params, base, alt, position, tokens, units):
    """Per selected neuron (``units``: ``(L, k)``, k per layer), the indirect and direct effects' log-odds,
    the neuron patched at the profession's position only."""
    body, head = params["body"], params["head"]
    mask = jnp.ones_like(base)
    logodds = functools.partial(pronoun_logodds, head, tokens=tokens)
    at_base = run_parts(port, body, base, mask, config=config, read=(NEURONS, RESID)).sites
    at_alt = run_parts(port, body, alt, mask, config=config, read=(NEURONS, RESID)).sites
    at = _at_position(position, base.shape[1])[None, :, :, None]
    F = at_base[NEURONS].shape[-1]
    where = lambda m: m[:, None, None, :] & at  # noqa: E731  (L, F) -> the neurons at the profession
    indirect = _per_layer(
        port, config, body, base, mask, logodds, at_alt[NEURONS], at_base[RESID], NEURONS, units, where, F
    )
    direct = _per_layer(
        port, config, body, alt, mask, logodds, at_base[NEURONS], at_alt[RESID], NEURONS, units, where, F
    )
    L, k, B = indirect.shape
    return {"neuron_indirect": indirect.reshape(L * k, B).T, "neuron_direct": direct.reshape(L * k, B).T}


@dataclass(frozen=True)
class Batch:
    """Examples of one sequence length, padded to a fixed batch size by repeating the first (so every batch
    of a length compiles once); ``n`` real rows."""

    base: np.ndarray
    alt: np.ndarray
    position: np.ndarray
    tokens: np.ndarray
    n: int


def batches(frame: pd.DataFrame, batch_size: int) -> list[tuple[np.ndarray, Batch]]:
    """``(row indices, Batch)`` over the kept rows of :func:`examples`, grouped by length."""
    out = []
    kept = frame[frame["kept"]]
    lengths = kept["base"].map(len)
    for _, group in kept.groupby(lengths, sort=True):
        for at in range(0, len(group), batch_size):
            part = group.iloc[at : at + batch_size]
            pad = np.r_[np.arange(len(part)), np.zeros(batch_size - len(part), int)]
            out.append(
                (
                    part.index.to_numpy(),
                    Batch(
                        base=np.asarray(part["base"].tolist(), np.int32)[pad],
                        alt=np.asarray(part["alt"].tolist(), np.int32)[pad],
                        position=part["position"].to_numpy(np.int32)[pad],
                        tokens=part[["anti", "stereo"]].to_numpy(np.int32)[pad],
                        n=len(part),
                    ),
                )
            )
    return out


def head_runs(model: LanguageModel, batch: Batch, *, neurons: bool) -> dict[str, np.ndarray]:
    """Log-odds of one batch's real rows: ``lo_base``, ``lo_alt`` ``(n,)``, ``head_indirect`` and
    ``head_direct`` ``(n, L·H)`` (layer-major), and with ``neurons`` the batch's summed attribution estimate
    of every neuron ``neuron_estimate`` ``(L, F)``."""
    args = (batch.base, batch.alt, batch.position, batch.tokens, batch.n)
    out = _head_runs(model.port, model.config, model.params, *args, neurons=neurons)
    return {k: _host(v) if k == "neuron_estimate" else _host(v)[: batch.n] for k, v in out.items()}


def neuron_runs(model: LanguageModel, batch: Batch, selected: np.ndarray) -> dict[str, np.ndarray]:
    """``neuron_indirect`` / ``neuron_direct`` ``(n, N)`` for the ``selected`` ``(N, 2)`` (layer, neuron)
    pairs, the same number per layer, layer-major (:func:`top_neurons`)."""
    L, _ = _neurons(model)
    units = np.asarray(selected[:, 1]).reshape(L, -1)
    if not (np.asarray(selected[:, 0]).reshape(L, -1) == np.arange(L)[:, None]).all():
        raise ModelError("neuron_runs takes the same number of neurons from every layer, layer-major (top_neurons)")
    out = _neuron_runs(
        model.port, model.config, model.params, batch.base, batch.alt, batch.position, batch.tokens, units
    )
    return {k: _host(v)[: batch.n] for k, v in out.items()}


def _host(x: Array) -> np.ndarray:
    """A result on the host in float32 at least (a bfloat16 model's effects: the statistics' dtype)."""
    return np.asarray(x, jnp.promote_types(x.dtype, jnp.float32))


def top_neurons(estimate: np.ndarray, per_layer: int) -> np.ndarray:
    """``(L·k, 2)`` (layer, neuron) pairs: the ``k`` neurons of each layer with the largest estimate."""
    order = np.argsort(-estimate, axis=1, kind="stable")[:, :per_layer]
    return np.stack([np.repeat(np.arange(estimate.shape[0]), order.shape[1]), order.ravel()], axis=1)


def layer_and_heads(model: LanguageModel) -> tuple[int, int]:
    """(layers, query heads per layer)."""
    body = model.params["body"]
    return layer_count(body), site_shapes(model.port, body, config=model.config)["attn.heads"][0]


def _neurons(model: LanguageModel) -> tuple[int, int]:
    body = model.params["body"]
    shape = site_shapes(model.port, body, config=model.config)["mlp.hidden"]
    if len(shape) != 1:
        raise ModelError(f"{model.name!r}: neuron effects need one MLP per layer; its hidden site is {shape}")
    return layer_count(body), shape[0]
