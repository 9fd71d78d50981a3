"""The contract of a model port: what every metric needs from a language model, whatever its family.

A port is a Flax NNX module (``jaxassoc.models.family``) run as pure functions over its state, the
parameter pytree ``{"body": ..., "head": Head}``:

- ``forward(body, input_ids, attention_mask, *, config, all_layers=False) -> ForwardOutput``: the final
  hidden states at the head's input (after the final norm; for masked LMs also after the MLM head
  transform dense -> activation -> LayerNorm), and every layer's hidden states on request;
- the output head ``Head(W, b, softcap)`` is its own leaf: loading unties it from the input embeddings, so a
  perturbation of the head (SeT, mitigation) never moves the input embeddings; a family whose logits are
  soft-capped after the head (Gemma 2) sets ``softcap``, and every logit goes through
  :func:`jaxassoc.models.heads.head_logits`, which applies it.

Logits are computed from those states by the functions in :mod:`jaxassoc.models.heads`, so a metric can
ask only for the rows and positions it needs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxassoc.errors import ModelError
from jaxassoc.models.sites import EDITS, split_bound


class Head(NamedTuple):
    """The output layer: ``logits = hidden @ W.T + b``, then ``softcap * tanh(logits / softcap)`` when
    ``softcap`` is set (Gemma 2's final logit soft-capping). ``W`` is ``(vocab, d_model)``; ``b`` may be
    None. ``softcap`` is static pytree metadata, not a leaf: it is never traced, differentiated, cast or
    sharded, and ``jax.tree.map`` / ``_replace`` keep it."""

    W: Float[Array, "V D"]
    b: Float[Array, " V"] | None
    softcap: float | None = None


jax.tree_util.register_pytree_with_keys(
    Head,
    lambda h: (((jax.tree_util.GetAttrKey("W"), h.W), (jax.tree_util.GetAttrKey("b"), h.b)), h.softcap),
    lambda softcap, children: Head(*children, softcap),
    flatten_func=lambda h: ((h.W, h.b), h.softcap),
)


class ForwardOutput(NamedTuple):
    """What a port's forward pass returns."""

    hidden: Float[Array, "B T D"]
    """Head input: final hidden states after the final norm (and the MLM head transform)."""
    layers: tuple[Float[Array, "B T H"], ...] | None
    """Embedding output followed by each block's output (HF ``hidden_states`` order), when asked."""
    sites: dict[str, Array] | None = None
    """The named sites read on the way (:mod:`jaxassoc.models.sites`), by name, when asked."""


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """Tokenizer facts the metrics depend on."""

    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    mask_id: int | None  # masked LMs only
    add_bos: bool  # does the tokenizer add BOS by default?
    word_initial_marker: str | None  # "Ġ" (byte-level BPE) or "▁" (SentencePiece), else None
    continuation_marker: str | None  # "##" (WordPiece), else None


@dataclasses.dataclass(frozen=True)
class Provenance:
    """Where a model came from: enough to reproduce and to key caches."""

    source: str  # hub id, folder or file path
    revision: str | None
    weights_sha256: str  # hash of the weight files' bytes
    tokenizer_sha256: str  # hash of the tokenizer's serialised form
    file_format: Literal["safetensors", "pytorch", "gguf"]


@dataclasses.dataclass(frozen=True)
class Decoder:
    """Incremental decoding of a causal port with a key/value cache (``models.decoding``), bound to one family
    and config. Equal (and hashing alike) for equal ``(family, config)``, so a function taking it as a static
    argument compiles once per configuration, however often the model is loaded."""

    family: Any  # jaxassoc.models.family.Family (a module-level singleton: compared by identity)
    config: Any  # the family's frozen config

    def init_cache(self, batch: int, length: int, dtype=jnp.float32) -> Any:
        """An empty cache pytree for ``batch`` rows of ``length`` columns."""
        return self.family.init_cache(self.config, batch, length, dtype)

    def forward_cached(
        self, body, input_ids, attention_mask, cache, start, *, positions=None, allowed=None
    ) -> tuple[Float[Array, "B t D"], Any]:
        """The head input of the tokens at columns ``[start, start + t)``, with the full-length mask; earlier
        columns come from the cache. ``positions`` (B, t) and ``allowed`` (B, 1, t, T) override the position
        ids and the cache columns each new token sees (default: from the mask; ``models.continuations``)."""
        return self.family.forward_cached(
            body,
            input_ids,
            attention_mask,
            cache,
            start,
            config=self.config,
            positions=positions,
            allowed=allowed,
        )


@dataclasses.dataclass(frozen=True)
class Forward:
    """A port's forward pass bound to its family and config, jit-compiled once per ``(family, config)``:
    ``forward(body, input_ids, attention_mask, all_layers=False) -> ForwardOutput``. Equal (and hashing
    alike) for equal ``(family, config)``, so jitted readouts that take it as a static argument share their
    compilations across loads, audit parts and sweep jobs of one process."""

    family: Any  # jaxassoc.models.family.Family (a module-level singleton: compared by identity)
    config: Any

    def __call__(self, body, input_ids, attention_mask, all_layers: bool = False) -> ForwardOutput:
        return _forward(body, input_ids, attention_mask, family=self.family, config=self.config, all_layers=all_layers)


@functools.partial(jax.jit, static_argnames=("family", "config", "all_layers"))
def _forward(body, input_ids, attention_mask, *, family, config, all_layers: bool):
    return family.forward(body, input_ids, attention_mask, config=config, all_layers=all_layers)


@dataclasses.dataclass(frozen=True, eq=False)
class LanguageModel:
    """A loaded port: parameters, tokenizer, and the jit-compiled forward function."""

    name: str
    family: str  # the architecture's name as reports print it: "gpt2", "roberta" (of the bert port), "llama"...
    port: Any  # the jaxassoc.models.family.Family that reads, builds and runs it (no look-up by name)
    objective: Literal["causal", "masked", "seq2seq"]
    config: Any  # the family's frozen config dataclass (hashable: a static argument under jit)
    params: dict  # {"body": pytree, "head": Head}
    tokenizer: Any  # transformers.PreTrainedTokenizerFast
    vocab: VocabInfo
    provenance: Provenance
    forward: Forward  # forward(body, input_ids, attention_mask, all_layers=False); jitted once per config
    max_positions: int  # the context length
    decoder: Decoder | None = None  # causal ports: KV-cache decoding; None for encoders
    mesh: Any = None  # the jax.sharding.Mesh the params are sharded over (models.mesh); None: one device
    scoring: Any = None  # a scoring-time transform of token probabilities (Self-Debias): :meth:`with_scoring`
    checkpoint: Any = None  # models.checkpoint.CheckpointLayout: the HF config and tensors it was read from (save)

    @property
    def head(self) -> Head:
        return self.params["head"]

    @property
    def module(self) -> Any:
        """The model as a Flax NNX module (``family.LanguageModule``: ``body`` and ``head``) holding the
        current params, so ``nnx.split(model.module)`` gives them back as NNX state."""
        return self.port.module(self.config, self.params)

    @property
    def weights_dtype(self) -> str:
        """The dtype its weights are stored in (the embeddings')."""
        return str(jax.tree.leaves(split_bound(self.params["body"])[0])[0].dtype)

    @property
    def precision(self) -> str:
        """The precision policy it runs in (:mod:`jaxassoc.models.precision`: ``float32``, ``mixed``, ...), from
        its weights' and activations' dtypes; ``"<weights>/<activations>"`` for a pair no policy names."""
        from jaxassoc.models.precision import POLICIES

        pair = (self.weights_dtype, self.config.activations)
        return next((p.name for p in POLICIES.values() if (p.params, p.activations) == pair), "/".join(pair))

    def with_params(self, params: dict) -> "LanguageModel":
        """The same model with other parameters (e.g. a perturbed head or a bf16 copy)."""
        return dataclasses.replace(self, params=params)

    @property
    def edits(self) -> dict[str, Any]:
        """The edits bound into the model (:meth:`with_edits`), by site name; ``{}``: none."""
        return dict(split_bound(self.params["body"])[1])

    def with_edits(self, edits: Mapping[str, Any]) -> "LanguageModel":
        """The model with ``edits`` (site name -> ``sites.Replace`` / ``Add`` / ``Apply``, as
        :func:`jaxassoc.models.interventions.run` takes them) bound into it, replacing any bound before
        (``{}``: none): every forward pass applies them (``forward``, cached decoding, packing, meshes), and
        their arrays travel with the weights (``params["body"]["edits"]``: traced, differentiable, replicated
        over the model's mesh). ModelError naming a site that does not exist or an edit that does not fit it,
        and for an encoder-decoder (its two stacks are edited per call: ``interventions.run_decoder``)."""
        if self.objective == "seq2seq" and edits:
            raise ModelError(
                f"{self.name!r} is an encoder-decoder ({self.family}) model: edits are not bound into it; pass them "
                "to interventions.run / run_decoder"
            )
        body, _ = split_bound(self.params["body"])
        if edits:
            edits = dict(edits)
            if self.mesh is not None:
                from jax.sharding import NamedSharding, PartitionSpec

                edits = jax.device_put(edits, NamedSharding(self.mesh, PartitionSpec()))
            body = {**body, EDITS: edits}
            ids = jax.ShapeDtypeStruct((1, 1), jnp.int32)
            jax.eval_shape(lambda b, i: self.port.forward(b, i, i, config=self.config), body, ids)  # fits?
        return self.with_params({**self.params, "body": body})

    def save(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write the model, with its current parameters (in their dtype) and bound edits, as a Hugging Face
        checkpoint folder that ``load_model(folder)`` (and the CLI's ``model.source=<folder>``) reads back into
        a model with the same outputs; returns the folder.

        - ``model.safetensors``: the tensors under the names and layouts of the checkpoint it was loaded from
          (transposes, fused q/k/v, tied embeddings as the family's reader takes them; a GGUF file: its
          architecture's, llama), found by inverting the family's reader and checked by reading them back bit
          for bit; a tied checkpoint whose head was changed is written untied (``tie_word_embeddings: false``);
        - ``config.json``: the HF config it was loaded from (a GGUF file's: the llama config read from it),
          ``torch_dtype`` / ``dtype`` set to the parameters' dtype; the tokenizer's files
          (``tokenizer.save_pretrained``);
        - bound edits (:meth:`with_edits`) are not folded into the weights: their arrays are saved beside them
          (``jaxassoc_edits.safetensors``, with the manifest ``jaxassoc_edits.json``: site, kind, and for a
          ``Transform`` its module's ``module:qualname`` and fields) and ``load_model`` binds them again.
          transformers reads the weights alone: without edits it gives the same outputs.

        The folder is written beside ``folder`` under a temporary name and renamed into place at the end, so an
        error or an interrupt leaves no folder. ModelError, before anything is written, for an existing
        ``folder`` (unless ``overwrite``), an ``Apply`` edit (a Python function, named by site), a model
        ``load_model`` did not return, or a family whose reader computes rather than moves values (none today).
        """
        from jaxassoc.models.saving import save_model

        return save_model(self, folder, overwrite=overwrite)

    def with_scoring(self, scoring: Any) -> "LanguageModel":
        """The model whose token probabilities, wherever ``readouts.sentence_scores`` scores sentences, come from
        ``scoring`` (e.g. ``jaxassoc.mitigation.SelfDebias``: an object with ``causal_token_rows(model,
        sequences, progress)``, ``masked_logprobs(model, masked, filled, progress)``, ``reserved(model)`` (the
        context it takes) and ``identity()``, called with the plain model); None: the plain scores. Part of the fingerprint, so cached scores never mix."""
        return dataclasses.replace(self, scoring=scoring)

    def fingerprint(self) -> str:
        """What the model's outputs depend on, as a sha256: its weights' and tokenizer's hashes, its parameters'
        dtypes and activations' dtype (the precision policy), the edits bound into it (sites, kinds, arrays'
        bytes, functions' names), its low-rank adapters' arrays (``models.lora``) and its scoring transform. The cache identity of every result computed from
        it; hashed once per model object (``with_params`` / ``with_edits`` make new ones), not at every cache
        key."""
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        parts = {
            "weights": self.provenance.weights_sha256,
            "tokenizer": self.provenance.tokenizer_sha256,
            "dtypes": sorted(
                {str(leaf.dtype) for leaf in jax.tree.leaves(split_bound(self.params["body"])[0])}
                | {str(leaf.dtype) for leaf in jax.tree.leaves(self.params["head"])}
            ),  # fmt: skip
            "edits": {name: _edit_identity(edit) for name, edit in sorted(self.edits.items())},
            "activations": self.config.activations,
        }
        if self.scoring is not None:  # absent otherwise: a plain model's fingerprint is what it always was
            parts["scoring"] = self.scoring.identity()
        from jaxassoc.models.lora import identity

        adapted = identity(self.params["body"])
        if adapted:  # low-rank adapters' arrays (models.lora); absent otherwise, as for scoring
            parts["adapters"] = adapted
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _edit_identity(edit: Any) -> list:
    """An edit as JSON: its kind, then each array's dtype, shape and bytes' sha256 (a function: its name)."""
    fn = getattr(edit, "fn", None)
    if fn is not None:
        return [type(edit).__name__, f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"]
    arrays = [np.asarray(leaf) for leaf in jax.tree.leaves(edit)]
    kind = type(edit).__name__
    module = getattr(edit, "module", None)  # sites.Transform: the callable pytree's type, then its arrays
    if module is not None:
        kind = f"{kind}({type(module).__module__}.{type(module).__qualname__})"
    return [kind, *([str(a.dtype), a.shape, hashlib.sha256(a.tobytes()).hexdigest()] for a in arrays)]


def tree_bytes(tree: Any) -> int:
    """Bytes held by the arrays of a pytree."""
    return sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree))
