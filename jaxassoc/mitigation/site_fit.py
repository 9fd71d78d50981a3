"""Fitting an eraser on a model's states at a named site and binding it there (docs/methods.md §11.5).

A sentence's state at a site is the mean over its tokens, special tokens left out (a causal model's BOS, whose
state is an outlier in many models, a masked model's ``[CLS]`` and ``[SEP]``). The fitting rows are every
counterfactual variant of every sentence, labelled with the class its attribute words were swapped to, so the
classes are balanced and differ only by the swapped words. A ``layers.*`` site gets one eraser per layer,
each fitted on the states the erasers of the layers below it have already changed (LEACE's "concept
scrubbing", Belrose et al. 2023, §6): one pass of the fitting data per layer. The fitted factors are a cached
artefact (:func:`jaxassoc.array_cache.cached_arrays`) keyed by the model, the site, the method, its options,
the fitting sentences and the code; the pooled states of a single site are cached too (without the method), so
LEACE, INLP and SentenceDebias at one site read the model once.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.mitigation.eraser import Eraser, as_edit, stack
from jaxassoc.mitigation.inlp import fit_inlp
from jaxassoc.mitigation.leace import fit_leace
from jaxassoc.mitigation.sentence_debias import fit_sentence_debias
from jaxassoc.models import interventions as iv
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import model_limits, run_batched
from jaxassoc.models.sites import ALL_LAYERS, parse_site

METHODS = ("leace", "inlp", "sentence_debias")
EDIT_SITES = ("final_norm", "resid_post", "resid_pre", "resid_mid", "attn.in", "mlp.in", "attn.out", "mlp.out")
"""The sites whose states are ``(B, T, D)`` wide vectors an eraser can be fitted on."""


def fit_eraser(states: np.ndarray, labels: np.ndarray, method: str, options: dict[str, Any]) -> Eraser:
    """``method``'s eraser from the pooled states of every variant, ``states`` (n, m, d) with ``labels`` (n, m)
    the class of each variant: LEACE and INLP on the n m rows, SentenceDebias on the n tuples."""
    if method == "sentence_debias":
        return fit_sentence_debias(states, **options)
    rows, classes = states.reshape(-1, states.shape[-1]), labels.reshape(-1)
    if method == "leace":
        return fit_leace(rows, classes, **options)
    if method == "inlp":
        return fit_inlp(rows, classes, **options)
    raise ConfigError(f"eraser method {method!r}: choose one of {list(METHODS)}")


def fit_at_site(
    model: LanguageModel,
    variants: Sequence[Sequence[str]],
    site: str,
    method: str,
    options: dict[str, Any] | None = None,
    *,
    batch_size: int = 32,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> Eraser:
    """The ``method`` eraser of the concept the variants differ in (``variants[i][c]``: sentence i with its
    attribute words of class c), fitted on ``model``'s states at ``site`` (``output`` (:func:`resolve_site`), ``final_norm``, ``layers.{i}.<kind>``,
    ``layers.*.<kind>`` for one eraser per layer, stacked), cached in ``cache_dir``. ConfigError for a site that
    does not hold (B, T, D) states or an encoder-decoder model; InputError for fewer than two variants."""
    options = dict(options or {})
    site = resolve_site(model, site)
    if model.objective == "seq2seq":
        raise ConfigError(
            f"model {model.name!r} is an encoder-decoder: erasers are bound into causal and masked models"
        )
    n_layers = iv.layer_count(model.params["body"])
    parsed = parse_site(site, n_layers)
    if parsed.kind not in EDIT_SITES:
        raise ConfigError(f"intervention.site={site!r}: an eraser acts on (B, T, D) states; choose a site of kind "
                          f"{list(EDIT_SITES)}")  # fmt: skip
    m = {len(v) for v in variants}
    if not variants or len(m) != 1 or min(m) < 2:
        raise InputError(
            f"fit_at_site: variants are tuples of one length >= 2 (one per class), got lengths {sorted(m)}"
        )
    texts = [t for v in variants for t in v]
    labels = np.tile(np.arange(min(m), dtype=np.int32), len(variants)).reshape(len(variants), -1)
    parts = {
        **model_key(model),
        "site": site,
        "method": method,
        "options": options,
        "texts": hashlib.sha256(json.dumps(texts).encode()).hexdigest(),
        "variants": min(m),
        "batch_size": batch_size,
    }

    def compute() -> dict[str, np.ndarray]:
        if parsed.layer == ALL_LAYERS:
            eraser = _scrub(model, texts, labels, parsed.kind, n_layers, method, options, batch_size, progress)
        else:
            state_key = {k: v for k, v in parts.items() if k not in ("method", "options")}  # every method's
            read = lambda: {"states": pooled_states(model, texts, site, batch_size=batch_size, progress=progress)}  # noqa: E731
            states = cached_arrays(cache_dir, "site_states", state_key, read)["states"]
            eraser = fit_eraser(states.reshape(len(variants), min(m), -1), labels, method, options)
        return {k: np.asarray(v) for k, v in eraser._asdict().items()}

    return Eraser(**{k: jnp.asarray(v) for k, v in cached_arrays(cache_dir, "eraser", parts, compute).items()})


OUTPUT = "output"
"""The site name that means "the states a model's metrics read": ``final_norm`` (the head's input) of a causal
LM; the last block's output ``layers.{L-1}.resid_post`` of a masked LM or encoder, which its MLM head and its
sentence and word vectors all read (bias-bench's ``last_hidden_state``). :func:`resolve_site`."""


def resolve_site(model: LanguageModel, site: str) -> str:
    """``site``, with :data:`OUTPUT` resolved for ``model``'s kind."""
    if site != OUTPUT:
        return site
    return (
        "final_norm" if model.objective == "causal" else f"layers.{iv.layer_count(model.params['body']) - 1}.resid_post"
    )


def bound(model: LanguageModel, site: str, eraser: Eraser) -> LanguageModel:
    """``model`` with ``eraser`` bound at ``site`` in every forward pass (the edits bound before kept)."""
    return model.with_edits({**model.edits, resolve_site(model, site): as_edit(eraser)})


def _scrub(model, texts, labels, kind, n_layers, method, options, batch_size, progress) -> Eraser:
    """One eraser per layer, layer i fitted on the states the erasers of layers < i leave (identity erasers,
    zero factors, stand in for the layers not fitted yet, so every pass runs the same compiled program)."""
    site = f"layers.{ALL_LAYERS}.{kind}"
    fitted: list[Eraser] = []
    for layer in range(n_layers):
        states = pooled_states(_with_layers(model, site, fitted, n_layers), texts, site, batch_size=batch_size,
                               progress=progress)[:, layer]  # fmt: skip
        fitted.append(fit_eraser(states.reshape(*labels.shape, -1), labels, method, options))
    return stack(fitted)


def _with_layers(model: LanguageModel, site: str, fitted: list[Eraser], n_layers: int) -> LanguageModel:
    if not fitted:
        return model
    width, k = fitted[0].width, max(int(e.down.shape[1]) for e in fitted)
    identity = Eraser(jnp.zeros((width,)), jnp.zeros((width, k)), jnp.zeros((k, width)))
    return bound(model, site, stack([*fitted, *[identity] * (n_layers - len(fitted))]))


def pooled_states(
    model: LanguageModel, texts: Sequence[str], site: str, *, batch_size: int = 32, progress: bool = False
) -> np.ndarray:
    """Each text's mean state at ``site`` over its non-special tokens (the first ``max_positions`` of a longer
    text): (n, d), or (n, L, d) for a ``layers.*`` site; batched and jitted once per bucket (:func:`jaxassoc.models.batching.run_batched`)."""
    ids, mask = iv.tokenize(model, texts)
    ids, mask = np.asarray(ids), np.asarray(mask)
    limit = model.max_positions  # a longer fitting sentence keeps its first tokens
    sequences = [row[: min(int(m.sum()), limit)].tolist() for row, m in zip(ids, mask)]
    special = set(model.tokenizer.all_special_ids)
    content = [[0 if t in special else 1 for t in seq] for seq in sequences]
    empty = [i for i, c in enumerate(content) if not any(c)]
    if empty:
        raise InputError(f"text {texts[empty[0]]!r} has no tokens besides special ones")
    fn = _pooled_fn(model.port, model.config, site)
    out = run_batched(fn, model.params, sequences, batch_size=batch_size, progress=progress, mesh=model.mesh,
                      per_token=False, aligned=content, **model_limits(model))  # fmt: skip
    return np.stack(out).astype(np.float32)


@functools.lru_cache(maxsize=None)
def _pooled_fn(port: Any, config: Any, site: str) -> Callable:
    def pooled(params, ids, mask, content):
        out = iv.run_parts(port, params["body"], ids, mask, read=[site], config=config)
        states = out.sites[site].astype(jnp.float32)  # (B, T, D), or (L, B, T, D)
        weights = (content * mask).astype(jnp.float32)
        total = jnp.einsum("...btd,bt->...bd", states, weights) / jnp.sum(weights, axis=1)[:, None]
        return jnp.moveaxis(total, -2, 0) if total.ndim == 3 else total

    return jax.jit(pooled)
