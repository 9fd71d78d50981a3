"""A metric's differentiable score as the bias term of a fine-tuning loss (docs/methods.md §13.2).

A metric offers one by a ``bias_term`` builder on its spec (``MetricSpec.bias_term``; a plugin's too):
``bias_term(model, bias_type, seed) -> BiasSetup``. The :class:`BiasTerm` says how to compute, from a model's
forward pass, the metric's per-item ``parts`` (CrowS-Pairs: both sentences' log-likelihoods; RPAM: each test's
d), the differentiable ``surrogate`` of the metric from them (a vector: one value per sub-score, its loss the
mean square of ``surrogate - target``) and the metric's own ``real`` value from the same parts; the
:class:`BiasSetup` holds the metric's items split into training and held-out items, as arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Array, Float

from jaxassoc.errors import ConfigError

TEMPERATURES = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0)
"""The temperatures (nats) a smoothed count's surrogate is chosen from (:func:`choose_temperature`)."""


@dataclasses.dataclass(frozen=True)
class BiasTerm:
    """How a metric's score is computed and smoothed; hashable (static under ``jit``): ``parts(hidden, head,
    arrays, **options)`` (``hidden(ids, mask)`` the adapted model's head inputs) -> a pytree of per-item values;
    ``surrogate(parts, **options)`` -> the differentiable score (a vector); ``real(parts)`` -> the metric's own
    value (NumPy, the same shape); ``target``: the unbiased value; ``units``: how the values read (a label)."""

    metric: str
    parts_fn: Callable
    surrogate_fn: Callable
    real_fn: Callable
    target: float
    options: tuple[tuple[str, Any], ...] = ()
    units: str = ""

    def parts(self, hidden: Callable, head: Any, arrays: Any) -> Any:
        return self.parts_fn(hidden, head, arrays, **dict(self.options))

    def surrogate(self, parts: Any) -> Float[Array, " k"]:
        return self.surrogate_fn(parts, **dict(self.options))

    def real(self, parts: Any) -> np.ndarray:
        return np.atleast_1d(np.asarray(self.real_fn(parts), np.float64))

    def with_options(self, **options: Any) -> "BiasTerm":
        return dataclasses.replace(self, options=tuple(sorted({**dict(self.options), **options}.items())))


@dataclasses.dataclass(frozen=True)
class BiasSetup:
    """A bias term with its items: ``train`` and ``heldout`` arrays (pytrees the term's ``parts`` take),
    their counts, the names of its sub-scores, a description for the log and the report, and how to take a
    minibatch of items."""

    term: BiasTerm
    train: Any
    heldout: Any
    n_train: int
    n_heldout: int
    names: tuple[str, ...]
    description: str
    sample: Callable[[Any, np.ndarray], Any] | None = None
    """``sample(arrays, rows)``: the items ``rows`` of ``arrays``, for a step's minibatch of training items;
    None: every training item at every step (a term whose items do not split into rows, RPAM's tests)."""


def rows_of(arrays: Any, rows: np.ndarray) -> Any:
    """The items ``rows`` of a dict of arrays whose leading axis is the items (a ``BiasSetup.sample``)."""
    return {k: v[rows] for k, v in arrays.items()}


def exact_surrogate(parts: Any, **_: Any) -> Any:
    """The surrogate of a metric that is differentiable itself (RPAM's d): its parts."""
    return parts


def exact_real(parts: Any) -> np.ndarray:
    """The real value of such a metric: its parts, on the host."""
    return np.asarray(parts)


def split_items(n: int, heldout: float, seed: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held-out)`` indices of ``n`` items: a seeded permutation, the first ``round(heldout * n)`` held
    out (at least one item on each side when ``0 < heldout < 1``; all trained when ``heldout == 0``).
    ConfigError when there are too few items to split."""
    if not 0 <= heldout < 1:
        raise ConfigError(f"intervention.heldout={heldout} must be in [0, 1)")
    k = int(round(heldout * n))
    if heldout > 0:
        k = min(max(k, 1), n - 1)
    if n - k < 1 or (heldout > 0 and n < 2):
        raise ConfigError(f"{what}: {n} items cannot be split into training and held-out items")
    order = np.random.default_rng([seed, n]).permutation(n)
    return np.sort(order[k:]), np.sort(order[:k])


def base_parts(model: Any, term: BiasTerm, arrays: Any) -> Any:
    """``term``'s parts of ``arrays`` under ``model`` as it is (jitted once per term)."""
    import jax

    forward = jax.jit(lambda body, i, m: model.port.forward(body, i, m, config=model.config).hidden)
    return jax.jit(term.parts_fn, static_argnums=0)(
        lambda i, m: forward(model.params["body"], i, m), model.head, arrays
    )


def choose_temperature(
    model: Any, term: BiasTerm, arrays: Any, n: int, grid: Sequence[float] = TEMPERATURES
) -> tuple[float, dict[float, float]]:
    """The largest temperature of ``grid`` at which ``term``'s surrogate agrees with its real value on the
    ``n`` training items ``arrays`` under ``model`` within one item's share (``1/n``, at least 0.01), and each
    temperature's gap; the smallest when none does (docs/methods.md §13.2: a warm surrogate of a count tracks the
    margins' mean, not their sign, so minimising it can move the real count away from its target)."""
    parts = base_parts(model, term, arrays)
    real = term.real(parts)
    tolerance = max(1.0 / n, 0.01)
    gaps = {float(t): float(np.max(np.abs(np.asarray(term.with_options(temperature=t).surrogate(parts)) - real)))
            for t in grid}  # fmt: skip
    agreeing = [t for t, gap in gaps.items() if gap <= tolerance]
    return (max(agreeing) if agreeing else min(gaps)), gaps


def smoothed_setup(
    model: Any, term: BiasTerm, arrays: dict, train: np.ndarray, held: np.ndarray, temperature: float | None, what: str
) -> BiasSetup:
    """The :class:`BiasSetup` of a smoothed count over rows of ``arrays`` (CrowS-Pairs, UnStereoEval): ``train`` /
    ``held`` rows, the temperature given or chosen by agreement (:func:`choose_temperature`, each temperature's gap
    in the description), minibatches of rows (:func:`rows_of`); ``what``: the score, for the description."""
    gaps = {}
    if temperature is None:
        temperature, gaps = choose_temperature(model, term, rows_of(arrays, train), len(train))
    shown = ", ".join(f"T={t:g}: {g:.3f}" for t, g in gaps.items())
    description = f"{what} (temperature {temperature:g}" + (
        f"; |soft - real| on the training pairs by temperature: {shown})" if gaps else ")"
    )
    term = term.with_options(temperature=float(temperature))
    return BiasSetup(term, rows_of(arrays, train), rows_of(arrays, held), len(train), len(held), (term.metric,),
                     description, sample=rows_of)  # fmt: skip
