"""RPAM's probabilities p(v, t) of every target t and attribute v (Hodel et al. 2026, §4; docs/methods.md §1)
from a loaded model's forward passes (:mod:`jaxassoc.readouts.rpam_prompts`, through the on-disk cache):
:func:`probabilities` of one (targets, attributes) task, :func:`task_probabilities` of several from one run
over their union. The validation tasks built on them (RPAM Test, WS-353, Bellezza, SST-2):
:mod:`jaxassoc.suites.rpam`.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from jaxassoc.metrics import rpam
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.rpam_prompts import PromptTemplate, RpamInputs, cached_rpam_inputs, tokenize_attributes

GENDER_ROLE_TESTS = ("C7", "C8")


def probabilities(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Sequence[str],
    template: PromptTemplate,
    *,
    normalise: bool = True,
    needed: np.ndarray | None = None,
    **run_options,
) -> tuple[np.ndarray, RpamInputs]:
    """p(v, t) for every target (rows) and attribute (columns), and the raw inputs it came from.

    ``needed`` (bool, targets x attributes; None: all) marks the entries the task reads: the others are NaN
    when their attribute has several tokens (its continuation is not computed). ``run_options`` go to
    :func:`cached_rpam_inputs` (``cache_dir`` turns the on-disk cache on)."""
    tokens = tokenize_attributes(model.tokenizer, attributes, template)
    inputs = cached_rpam_inputs(model, targets, tokens, template, needed=needed, **run_options)
    p = rpam.relative_probabilities(
        jnp.asarray(inputs.first_logits),
        jnp.asarray(inputs.continuation),
        jnp.asarray(inputs.log_partition),
        normalise=normalise,
    )
    return np.asarray(p), inputs


def task_probabilities(
    model: LanguageModel,
    tasks: Sequence[tuple[Sequence[str], Sequence[str]]],
    template: PromptTemplate,
    *,
    normalise: bool = True,
    **run_options,
) -> tuple[list[np.ndarray], RpamInputs]:
    """p(v, t) of several (targets, attributes) tasks from one run over their union, so a prompt shared by
    tasks runs once and each (prompt, multi-token attribute) continuation once; each task's p equals
    :func:`probabilities` of that task alone (its softmax is over its own attributes)."""
    for _, attributes in tasks:
        tokenize_attributes(model.tokenizer, attributes, template)  # each task's own duplicate check
    targets = list(dict.fromkeys(t for ts, _ in tasks for t in ts))
    attributes = list(dict.fromkeys(a for _, attrs in tasks for a in attrs))
    rows = [[targets.index(t) for t in ts] for ts, _ in tasks]
    cols = [[attributes.index(a) for a in attrs] for _, attrs in tasks]
    needed = np.zeros((len(targets), len(attributes)), dtype=bool)
    for r, c in zip(rows, cols):
        needed[np.ix_(r, c)] = True
    _, inputs = probabilities(model, targets, attributes, template, needed=needed, **run_options)
    ps = [
        np.asarray(
            rpam.relative_probabilities(
                jnp.asarray(inputs.first_logits[np.ix_(r, c)]),
                jnp.asarray(inputs.continuation[np.ix_(r, c)]),
                jnp.asarray(inputs.log_partition[r]),
                normalise=normalise,
            )
        )
        for r, c in zip(rows, cols)
    ]
    return ps, inputs
