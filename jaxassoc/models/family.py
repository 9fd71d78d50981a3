"""What a model family provides (:class:`Family`), the registry that finds one by HF ``model_type``, and
the NNX module of a whole loaded model (:class:`LanguageModule`: body and output head).

A family is one folder ``jaxassoc/models/<name>/`` (``config.py``, ``params.py``, ``modeling.py``) whose
``__init__`` exports ``FAMILY``. Its body is an ``nnx.Module`` whose state, as a pure dict, is the body
pytree the metrics see (``params["body"]``): the pure functions here (``forward``, ``forward_cached``)
rebuild the module from that pytree with ``nnx.merge`` and call it, so they jit and differentiate like
any function of arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Decoder, ForwardOutput, Head
from jaxassoc.models.heads import head_logits
from jaxassoc.models.hf_config import ConfigTaker
from jaxassoc.models.lora import adapter_paths, attach
from jaxassoc.models.mesh import OUTPUT_HEAD_AXES, ParamAxes, module_axes
from jaxassoc.models.sites import SiteOps, split_bound, with_bound


@dataclasses.dataclass(frozen=True, eq=False)
class Family:
    """A model family: how its checkpoints are read and its NNX body module built and run."""

    name: str
    model_types: Mapping[str, str]
    """HF ``model_type`` -> the ``LanguageModel.family`` it loads as (RoBERTa keeps its name, Mistral is llama)."""
    objective: Literal["causal", "masked", "seq2seq"]
    config_from_hf: Callable[[dict], Any]
    """The family's frozen config dataclass from a HF ``config.json``; ModelError naming refused fields."""
    params_from_hf: Callable[[Mapping[str, np.ndarray], Any], dict]
    """``{"body": pytree, "head": Head | None}`` from HF tensors (lazy host views); ModelError naming bad ones."""
    new_body: Callable[[Any, Mapping | None], nnx.Module]
    """``new_body(config, body)``: the body module (zero parameters) with the structure of ``body`` (None:
    the full structure); causal families' bodies are :class:`jaxassoc.models.causal_body.CausalBody`."""

    def read_config(self, hf_config: Mapping[str, Any]) -> Any:
        """``config_from_hf`` of a HF config, then ModelError naming every field the port did not read whose
        value is not transformers' default (:class:`~jaxassoc.models.hf_config.ConfigTaker`)."""
        taker = ConfigTaker(hf_config)
        config = self.config_from_hf(taker)
        taker.finish(self.name)
        return config

    def abstract_body(self, config: Any, body: Mapping | None = None) -> nnx.Module:
        """The body module with ``jax.ShapeDtypeStruct`` parameters (``nnx.eval_shape``): nothing allocated.
        ModelError naming any parameter created without logical axes."""
        module = nnx.eval_shape(lambda: self.new_body(config, body))
        module_axes(module, self.name)
        return module

    def param_axes(self, config: Any) -> Mapping[str, ParamAxes]:
        """Parameter path (``"body/layers/attn/q/w"``, ``"head/W"``) -> its logical axes and heads, read from
        the parameters' metadata (the full body's; cached per config)."""
        return _param_axes(self, config)

    def body_module(self, config: Any, body: Mapping) -> nnx.Module:
        """The body module holding the arrays of the pytree ``body`` (no copy; edits bound into it aside)."""
        body, _ = split_bound(body)
        return nnx.merge(_graphdef(self, config, tuple(sorted(body)), adapter_paths(body)), body)

    def forward(
        self,
        body: Mapping,
        input_ids: Int[Array, "B T"],
        attention_mask: Int[Array, "B T"],
        *,
        config: Any,
        all_layers: bool = False,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """The head input and, on request, every layer's hidden states (HF ``hidden_states`` order) and the
        named sites ``sites`` reads (after applying its edits; :mod:`jaxassoc.models.sites`), with the edits bound
        into ``body`` (``LanguageModel.with_edits``) applied."""
        sites = with_bound(sites, body)
        module = self.body_module(config, body)
        if sites is None:
            return module(input_ids, attention_mask, all_layers=all_layers)
        return module(input_ids, attention_mask, all_layers=all_layers, sites=sites)

    def decode(
        self,
        body: Mapping,
        encoder_hidden: Float[Array, "B S D"],
        encoder_mask: Int[Array, "B S"],
        decoder_ids: Int[Array, "B T"],
        decoder_mask: Int[Array, "B T"],
        *,
        config: Any,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """Seq2seq families: the teacher-forced decoder's head input over ``forward``'s encoder states (and the
        decoder's sites ``sites`` reads)."""
        if self.objective != "seq2seq":
            raise ModelError(f"the {self.name} family is {self.objective}: it has no encoder-decoder decode")
        module = self.body_module(config, body)
        return module.decode(encoder_hidden, encoder_mask, decoder_ids, decoder_mask, sites=sites)

    def module(self, config: Any, params: Mapping) -> "LanguageModule":
        """The whole model (``{"body", "head"}`` params) as one NNX module holding those arrays."""
        return LanguageModule(self.body_module(config, params["body"]), params["head"])

    def init_cache(self, config: Any, batch: int, length: int, dtype=jnp.float32):
        """An empty key/value cache for ``batch`` rows of ``length`` columns (causal families)."""
        self._check_causal()
        return self.abstract_body(config).init_cache(batch, length, dtype)

    def forward_cached(
        self,
        body: Mapping,
        input_ids: Int[Array, "B t"],
        attention_mask: Int[Array, "B T"],
        cache,
        start: Int[Array, ""],
        *,
        config: Any,
        positions: Int[Array, "B t"] | None = None,
        allowed: Bool[Array, "B 1 t T"] | None = None,
        sites: SiteOps | None = None,
    ) -> tuple[Float[Array, "B t D"], Any]:
        """``causal_body.CausalBody.forward_cached`` of the body module holding ``body`` (``sites``: edits only)."""
        self._check_causal()
        sites = with_bound(sites, body)
        return self.body_module(config, body).forward_cached(
            input_ids, attention_mask, cache, start, positions=positions, allowed=allowed, sites=sites
        )

    def decoder(self, config: Any) -> Decoder | None:
        """KV-cache decoding bound to ``config`` for causal families; None for masked ones."""
        if self.objective != "causal":
            return None
        return Decoder(self, config)

    def _check_causal(self) -> None:
        if self.objective != "causal":
            raise ModelError(f"the {self.name} family is {self.objective}: it has no key/value-cache decoding")


@functools.lru_cache(maxsize=64)
def _param_axes(family: Family, config: Any) -> dict[str, ParamAxes]:
    return {**module_axes(family.abstract_body(config), family.name), **OUTPUT_HEAD_AXES}


@functools.lru_cache(maxsize=64)
def _graphdef(family: Family, config: Any, keys: tuple[str, ...], adapted: tuple = ()) -> nnx.GraphDef:
    """The graph definition of a body with top-level ``keys`` and low-rank adapters on the ``Linear`` modules at
    the paths ``adapted`` (:mod:`jaxassoc.models.lora`)."""
    return nnx.split(attach(family.abstract_body(config, dict.fromkeys(keys)), adapted))[0]


def param_shapes(module: nnx.Module) -> dict:
    """The parameter shapes of a (typically abstract) module as a nested dict of tuples."""
    state = nnx.state(module).to_pure_dict()
    return _map_leaves(lambda x: tuple(x.shape), state)


def _map_leaves(fn: Callable, tree: Mapping) -> dict:
    return {k: _map_leaves(fn, v) if isinstance(v, Mapping) else fn(v) for k, v in tree.items()}


def family_folders() -> tuple[str, ...]:
    """The family folders: every sub-package of :mod:`jaxassoc.models` (each exports ``FAMILY``)."""
    here = str(Path(__file__).resolve().parent)  # this package's folder (importing the package: a circle)
    return tuple(sorted(m.name for m in pkgutil.iter_modules([here]) if m.ispkg))


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Family]:
    """HF ``model_type`` -> its Family, over every family folder (imported on first use)."""
    out: dict[str, Family] = {}
    for folder in family_folders():
        family = importlib.import_module(f"jaxassoc.models.{folder}").FAMILY
        clash = sorted(set(family.model_types) & set(out))
        if clash:
            raise ModelError(f"model_type {clash} claimed by two families: {out[clash[0]].name} and {family.name}")
        out.update(dict.fromkeys(family.model_types, family))
    return out


def family_for(model_type: str | None) -> Family:
    """The Family of a HF ``model_type``; ModelError naming it and listing the supported ones otherwise."""
    families = registry()
    if model_type not in families:
        raise ModelError(f"unsupported architecture model_type={model_type!r}; supported: {sorted(families)}")
    return families[model_type]


class OutputHead(nnx.Module):
    """The output layer ``logits = hidden @ W.T + b`` as parameters ``W`` ``(vocab, d_model)`` and ``b``; its
    ``softcap`` (None for most families) is static, in the graph definition, not the state."""

    def __init__(self, head: Head):
        self.W = nnx.Param(head.W)
        self.b = None if head.b is None else nnx.Param(head.b)
        self.softcap = head.softcap

    def as_head(self) -> Head:
        return Head(W=self.W[...], b=None if self.b is None else self.b[...], softcap=self.softcap)


class LanguageModule(nnx.Module):
    """A loaded model as one NNX module: ``body`` (the family's body module) and ``head`` (an
    :class:`OutputHead`, None for encoder-only checkpoints). ``nnx.split(module)`` gives the state
    ``{"body": params["body"], "head": {"W", "b"}}``; e.g. ``nnx.split(module, nnx.PathContains("head"),
    ...)`` separates the head for head-only gradients."""

    def __init__(self, body: nnx.Module, head: Head | None):
        self.body = body
        self.head = None if head is None else OutputHead(head)

    def __call__(self, input_ids: Int[Array, "B T"], attention_mask: Int[Array, "B T"]) -> Float[Array, "B T V"]:
        """Full-vocabulary logits at every position (needs a head)."""
        if self.head is None:
            raise ModelError("this model has no output head (an encoder-only checkpoint): use body(...) instead")
        return head_logits(self.head.as_head(), self.body(input_ids, attention_mask).hidden)


__all__ = [
    "Family",
    "LanguageModule",
    "OutputHead",
    "family_folders",
    "family_for",
    "param_shapes",
    "registry",
]
