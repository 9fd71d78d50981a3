"""What fine-tuning minimises (docs/methods.md §13.2): a language-modelling term on counterfactually augmented
text (``cda``) or a metric's differentiable score (``metric``), each with a preservation term on held text.

- ``lm``: the mean next-token negative log-likelihood (a causal LM) or masked-token one (a masked LM) of the
  training rows, over their predicted tokens;
- ``kl`` (preservation, the default): the mean over held-text tokens of KL(p_base || p_adapted) between the
  frozen model's and the adapted model's output distributions. KL is zero only where the two agree, so it
  grows whether the adapter raises or lowers the held text's perplexity: two-sided, where a penalty on a
  perplexity increase alone lets the adapter drift toward its training text;
- ``mse`` (preservation, Kaneko & Bollegala 2021, eq. 3): the mean over held-text tokens of the squared
  distance between the adapted and the frozen head inputs, over the width;
- ``bias`` (``metric``): the metric's differentiable score minus its unbiased value (a
  :class:`~jaxassoc.finetune.bias.BiasTerm`); its loss is its square.

``loss = lm + lambda * preservation`` (``cda``) or ``bias**2 + lambda * preservation`` (``metric``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxassoc.models.heads import head_logits
from jaxassoc.models.lora import inserted, stripped

PRESERVATION = ("kl", "mse")
OBJECTIVES = ("cda", "metric")


@dataclasses.dataclass(frozen=True)
class Objective:
    """A fine-tuning loss (module docstring), hashable: ``port`` and ``config`` the model's (static),
    ``kind`` ``cda`` or ``metric``, ``masked`` (masked-token instead of next-token loss), ``preservation``
    (``kl`` | ``mse``) with weight ``lam``, ``compute_dtype`` the dtype the adapters are cast to for the
    forward pass (the weights' dtype), ``bias`` the metric's term (``metric`` only)."""

    port: Any
    config: Any
    kind: str
    masked: bool
    preservation: str = "kl"
    lam: float = 1.0
    compute_dtype: str = "float32"
    bias: Any = None

    @property
    def weights(self) -> dict[str, float]:
        return {"lm": 1.0, "preservation": self.lam}

    def hidden(self, body: Mapping, ids: Int[Array, "B T"], mask: Int[Array, "B T"]) -> Float[Array, "B T D"]:
        return self.port.forward(body, ids, mask, config=self.config).hidden

    def adapted(self, params: Any, frozen: Mapping) -> dict:
        """The model's parameters with the adapters' trained arrays ``params`` (cast to the compute dtype)."""
        return {**frozen, "body": inserted(frozen["body"], params, self.compute_dtype)}

    def counts(self, micro: Mapping) -> dict[str, Array]:
        """Tokens of each token term over the whole step (all micro batches): the means' denominators."""
        out = {} if self.lam == 0 else {"preservation": jnp.sum(micro["held"]["mask"]).astype(jnp.float32)}
        if "train" in micro:
            out["lm"] = jnp.sum(micro["train"]["weights"]).astype(jnp.float32)
        return out

    def micro_terms(self, params: Any, frozen: Mapping, micro: Mapping, counts: Mapping) -> dict[str, Array]:
        """Each token term's share of the step's mean from one micro batch (``lam == 0``: no preservation term,
        and no pass over the held text)."""
        model = self.adapted(params, frozen)
        out = (
            {}
            if self.lam == 0
            else {"preservation": self.preserve(model, frozen, micro["held"]) / counts["preservation"]}
        )
        if "train" in micro:
            train = micro["train"]
            logits = head_logits(model["head"], self.hidden(model["body"], train["inputs"], train["mask"]))
            out["lm"] = token_nll(logits, train["labels"], train["weights"]) / counts["lm"]
        return out

    def preserve(self, model: Mapping, frozen: Mapping, held: Mapping) -> Array:
        """The preservation term summed over the held tokens of a micro batch."""
        base_body = stripped(frozen["body"])
        hidden = self.hidden(model["body"], held["ids"], held["mask"])
        base = jax.lax.stop_gradient(self.hidden(base_body, held["ids"], held["mask"]))
        mask = held["mask"].astype(jnp.float32)
        if self.preservation == "mse":
            d = hidden.astype(jnp.float32) - base.astype(jnp.float32)
            return jnp.sum(jnp.mean(d * d, axis=-1) * mask)
        p = jax.nn.log_softmax(head_logits(frozen["head"], base).astype(jnp.float32), axis=-1)
        q = jax.nn.log_softmax(head_logits(model["head"], hidden).astype(jnp.float32), axis=-1)
        return jnp.sum(jnp.sum(jnp.exp(p) * (p - q), axis=-1) * mask)

    def whole_terms(self, params: Any, frozen: Mapping, whole: Any) -> dict[str, Array]:
        """``bias2``: the square of the bias term, the metric's surrogate minus its unbiased value (the mean
        square over the metric's sub-scores, e.g. RPAM's tests)."""
        model = self.adapted(params, frozen)
        parts = self.bias.parts(lambda i, m: self.hidden(model["body"], i, m), model["head"], whole)
        return {"bias2": jnp.mean(jnp.square(self.bias.surrogate(parts) - self.bias.target))}

    def whole_loss(self, values: Mapping) -> Array:
        return values["bias2"]


def token_nll(logits: Float[Array, "B T V"], labels: Int[Array, "B T"], weights: Float[Array, "B T"]) -> Array:
    """The summed negative log-likelihood of ``labels`` under ``logits`` at the positions ``weights`` marks
    (float32 log-softmax)."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    return -jnp.sum(picked * weights)
